import { projectServices } from '../projects/refs.js'
import type { Project } from '../projects/index.js'
import { strategyServices } from './refs.js'
import { ArchiveInput, NoInput } from './schemas.js'
import { strategyParam } from './routes.js'
import type { StateRow } from './archive.js'

import { IdParams, MamError, accepted, conflict, type MamContext, type Principal, type RegisterApi } from '../../core/index.js'
/** §4.20 archive, unarchive, move_archive, cancel_archiving, clear_archive_errors, clear_all_archive_errors */
export function registerArchiveRoutes(api: RegisterApi) {
  const { routes } = api
  const projects = api.use(projectServices.service)
  const guards = api.use(projectServices.guards)
  const archives = api.use(strategyServices.archives)
  const strategies = api.use(strategyServices.strategies)
  const runs = api.use(strategyServices.runs)

  /** a project the caller may change, that no edit has mounted or opened (409), not frozen (423) */
  const archivable = async (ctx: MamContext<any, any, Principal>, id: number): Promise<Project> => {
    const project = await projects().writable(ctx.em, ctx.user, id)
    // 'rename': the edits plugin refuses it for a mounted or open project; our own guard only for a running archive
    await guards().check(ctx.em, project, 'rename')
    return project
  }

  const answer = async (s: StateRow) => ({ archivestrategystate: await archives().serialize(s) })

  /** queues the run; 202 with the state it starts from */
  const start = async (ctx: MamContext<any, any, Principal>, s: StateRow) => {
    await runs().queueArchive(s, ctx.user.userId)
    return accepted(ctx, await answer((await archives().state(s.project_id))!))
  }

  routes.put(
    '/projects/:id/archive',
    { access: 'authenticated', params: IdParams, input: ArchiveInput, summary: 'archive the project with an archive strategy (strategy, exclude_linked_files): copy, verify, release the originals' },
    async (ctx) => {
      const project = await archivable(ctx, ctx.params.id)
      const ref = strategyParam(ctx.input)!
      const strategy = await strategies().usable('archive', ref.id, ctx.user, ref.param)
      const s = await runs().beginArchive(project.id, strategy.id, ctx.user.userId, ctx.input.exclude_linked_files ?? false)
      return start(ctx, s)
    },
  )

  routes.put('/projects/:id/unarchive', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'restore the archived originals byte-identical (verified against their checksums)' }, async (ctx) => {
    const project = await archivable(ctx, ctx.params.id)
    const current = await archives().state(project.id)
    if (!current || (current.bytes_released === 0 && current.state !== 'archived')) throw conflict(`Project "${project.name}" has no archived files to restore`, { state: current?.state ?? 'online' })
    // space comes back: the quotas must have room for it (507 otherwise, nothing restored)
    await projects().assertSpace(ctx.em, project, current.bytes_released)
    const s = await archives().begin(project.id, 'unarchive', ['archived', 'failed', 'cancelled'], { user_id: ctx.user.userId })
    return start(ctx, s)
  })

  routes.put('/projects/:id/move_archive', { access: 'authenticated', params: IdParams, input: ArchiveInput, summary: "move the project's archive to another archive strategy's target (copy, verify, delete the old)" }, async (ctx) => {
    const project = await archivable(ctx, ctx.params.id)
    const ref = strategyParam(ctx.input)!
    const strategy = await strategies().usable('archive', ref.id, ctx.user, ref.param)
    const current = await archives().state(project.id)
    if (!current || current.state !== 'archived') throw conflict(`Project "${project.name}" is not archived`, { state: current?.state ?? 'online' })
    if (current.archive_strategy_id === strategy.id) throw conflict(`Project "${project.name}" is archived with strategy "${strategy.name}" already`, { errors: [{ param: ref.param, message: 'is the strategy the archive is on' }] })
    const s = await archives().begin(project.id, 'move', ['archived'], { next_strategy_id: strategy.id, user_id: ctx.user.userId })
    return start(ctx, s)
  })

  routes.put('/projects/:id/cancel_archiving', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'stop a running archive (the project comes back whole online) or restore' }, async (ctx) => {
    const project = await projects().writable(ctx.em, ctx.user, ctx.params.id)
    return answer(await archives().cancel(project.id))
  })

  routes.put('/projects/:id/clear_archive_errors', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'clear the archive errors of a project: its failed files are retried by the next archive' }, async (ctx) => {
    const project = await projects().writable(ctx.em, ctx.user, ctx.params.id)
    const s = await archives().state(project.id)
    if (!s) throw new MamError('not_found', `Project "${project.name}" was never archived`)
    await archives().clearErrors(project.id)
    return answer((await archives().state(project.id))!)
  })

  routes.put('/projects/clear_all_archive_errors', { access: 'admin', input: NoInput, summary: 'clear the archive errors of every project' }, async () => ({
    hash: { cleared_files: await archives().clearErrors() },
  }))
}
