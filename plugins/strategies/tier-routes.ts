import { Type } from 'typebox'
import { projectServices } from '../projects/refs.js'
import { strategyServices } from './refs.js'

import { IdParam, accepted, coreServices, invalidParam, serializeJob, type RegisterApi } from '../../core/index.js'

const TierInput = Type.Object(
  {
    project_ids: Type.Optional(Type.Array(IdParam, { minItems: 1, maxItems: 1000 })),
    project_id: Type.Optional(IdParam),
    /** the named storage the projects go to */
    storage: Type.String({ minLength: 1, maxLength: 64 }),
    /** policy: projects neither created nor used in the last N days */
    older_than_days: Type.Optional(Type.Integer({ minimum: 0, maximum: 36500 })),
    /** policy: projects not used (or, never used, not created) since this ISO 8601 time */
    last_used_before: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
  },
  { additionalProperties: false },
)
const DAY_MS = 86_400_000

/** POST /projects/tier: projects to another named storage, by request or by a policy; a job per project */
export function registerTierRoutes(api: RegisterApi) {
  const projects = api.use(projectServices.service)
  const tier = api.use(strategyServices.tier)
  const runs = api.use(strategyServices.runs)
  const storages = api.use(coreServices.storages)

  api.routes.post(
    '/projects/tier',
    { access: 'admin', input: TierInput, summary: 'move projects to another storage (project_ids or project_id, or a policy older_than_days / last_used_before; storage): copied, verified, switched, the old copy removed' },
    async (ctx) => {
      const { storage, older_than_days: days, last_used_before: before } = ctx.input
      storages().get(storage, 'storage')
      const ids = ctx.input.project_ids ?? (ctx.input.project_id !== undefined ? [ctx.input.project_id] : undefined)
      const policy = days !== undefined || before !== undefined
      if (!ids && !policy) throw invalidParam('project_ids', 'name the projects (project_ids or project_id) or a policy (older_than_days, last_used_before)')
      if (ids && policy) throw invalidParam(days !== undefined ? 'older_than_days' : 'last_used_before', 'is a policy; give it or project_ids, not both')
      let selected: number[]
      if (ids) {
        // all or nothing: every named project must be movable (404, 423, 409 as for an archive)
        for (const id of new Set(ids)) await tier().assertTierable(ctx.em, (await projects().readable(ctx.em, ctx.user, id)).project, storage)
        selected = [...new Set(ids)]
      } else {
        const cutoffs: number[] = []
        if (days !== undefined) cutoffs.push(Date.now() - days * DAY_MS)
        if (before !== undefined) {
          const at = Date.parse(before)
          if (Number.isNaN(at)) throw invalidParam('last_used_before', 'is not an ISO 8601 date or time')
          cutoffs.push(at)
        }
        selected = []
        // a policy takes what it may move and leaves the rest (frozen, mounted, archived) where it is
        for (const id of await tier().byPolicy(storage, new Date(Math.min(...cutoffs)))) {
          const ok = await projects()
            .readable(ctx.em, ctx.user, id)
            .then(({ project }) => tier().assertTierable(ctx.em, project, storage))
            .then(() => true, () => false)
          if (ok) selected.push(id)
        }
      }
      // each project claimed for this move (two requests for one project: one 202, one 409); a policy leaves a claimed one out
      const queued = await runs().queueTier(selected, storage, ctx.user.userId, Boolean(ids))
      if (!queued.length) throw invalidParam(days !== undefined ? 'older_than_days' : 'last_used_before', `selects no project that can move to storage "${storage}"`)
      // the first job as `job` (clients that follow one), every job as `jobs`
      return accepted(ctx, { job: serializeJob(queued[0]), jobs: queued.map(serializeJob) })
    },
  )
}
