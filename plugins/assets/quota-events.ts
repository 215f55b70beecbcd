import type { Dialect, Knex, Outbox } from '../../core/index.js'
import { PROJECT } from '../projects/index.js'
import { quotaNearLimit } from './events.js'

/** the share of a quota whose crossing warns (`quota.near-limit`) */
export const NEAR_LIMIT = 0.9

const crossed = (quota: number, before: number, after: number) => before < quota * NEAR_LIMIT && after >= quota * NEAR_LIMIT

/**
 * Publishes `quota.near-limit` for each quota an upload of `bytes` into a project just took past
 * NEAR_LIMIT: the project's own quota and that of every team with write on it. Runs in the upload's
 * transaction, after its bytes were charged: the project row is locked by that charge, and the teams'
 * rows are locked here before their usage is summed, so uploads side by side (into other projects of
 * the same team too) are counted one after the other and a crossing is seen by exactly one of them.
 * No flag is kept: usage that went down and up again crosses again.
 */
export async function publishQuotaCrossings(trx: Knex, dialect: Dialect, outbox: Outbox, projectId: number, bytes: number, uploadedBy: number): Promise<void> {
  if (bytes <= 0) return
  const project = await trx('projects').where({ id: projectId }).first('id', 'name', 'size', 'quota')
  if (!project) return
  const items: Parameters<Outbox['publishMany']>[1] = []
  const item = (p: { scope: 'project' | 'team'; team_id: number | null; team_name: string | null; quota: number; used: number }) =>
    items.push({
      event: quotaNearLimit,
      payload: { ...p, project_id: projectId, project_name: String(project.name), percent: Math.floor((p.used * 100) / p.quota), uploaded_by_id: uploadedBy },
      // no actor: the uploader is among those it concerns, and the one who caused an event is never told of it
      options: { subjectId: projectId, actorId: null },
    })
  const size = Number(project.size)
  if (project.quota !== null && crossed(Number(project.quota), size - bytes, size)) item({ scope: 'project', team_id: null, team_name: null, quota: Number(project.quota), used: size })

  const teamIds = (await trx('access_rights').where({ object_type: PROJECT.type, object_id: projectId, write: true }).pluck('team_id')).map(Number)
  if (teamIds.length) {
    const locking = trx('teams').whereIn('id', teamIds).whereNotNull('quota').orderBy('id').select('id', 'name', 'quota')
    const teams = await (dialect === 'postgresql' ? locking.forUpdate() : locking)
    for (const team of teams) {
      const [{ used }] = await trx('projects as p')
        .join('access_rights as ar', function () {
          this.on('ar.object_id', '=', 'p.id').andOnVal('ar.object_type', '=', PROJECT.type)
        })
        .where({ 'ar.team_id': team.id, 'ar.write': true, 'p.deleted': false })
        .sum({ used: 'p.size' })
      const after = Number(used ?? 0)
      if (crossed(Number(team.quota), after - bytes, after)) item({ scope: 'team', team_id: Number(team.id), team_name: String(team.name), quota: Number(team.quota), used: after })
    }
  }
  await outbox.publishMany(trx, items)
}
