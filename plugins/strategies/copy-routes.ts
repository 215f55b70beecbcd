import { stat } from 'node:fs/promises'
import { Type } from 'typebox'
import { projectServices } from '../projects/refs.js'
import { assetServices } from '../assets/refs.js'
import { strategyServices } from './refs.js'
import { StrategyRef } from './schemas.js'
import { strategyParam } from './routes.js'
import { BackupJob, CopyJob, DatabaseBackupJob } from './jobs.js'

import { IdParam, IdParams, MamError, acceptedJob, coreServices, invalidParam, relativeSegments, resolveInside, type MamContext, type Principal, type RegisterApi } from '../../core/index.js'
const StrategyInput = Type.Object({ strategy: Type.Optional(StrategyRef) }, { additionalProperties: false })
const FolderInput = Type.Object({ strategy: Type.Optional(StrategyRef), project_id: IdParam, path: Type.Optional(Type.String({ maxLength: 4096 })) }, { additionalProperties: false })

/** §4.6 copy_to / copy_folder_to, §4.20 copy_to / backup, §4.5 PUT /backup: each answers a job */
export function registerCopyRoutes(api: RegisterApi) {
  const { routes } = api
  const projects = api.use(projectServices.service)
  const assets = api.use(assetServices.service)
  const strategies = api.use(strategyServices.strategies)
  const jobs = api.use(coreServices.jobs)

  const enqueue = async (ctx: MamContext<any, any, Principal>, type: string, payload: unknown, projectId: number | null) =>
    acceptedJob(ctx, await jobs().enqueue(type, payload, { userId: ctx.user.userId, projectId }))

  routes.put('/assets/:id/copy_to', { access: 'authenticated', params: IdParams, input: StrategyInput, summary: 'copy an asset with an asset copy-to strategy (job at /copy_to_status/:id)' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
    const ref = strategyParam(ctx.input)!
    const strategy = await strategies().usable('asset_copy_to', ref.id, ctx.user, ref.param)
    return enqueue(ctx, CopyJob.type, { strategyId: strategy.id, kind: 'asset_copy_to', projectId: asset.project.id, paths: [asset.path] }, asset.project.id)
  })

  routes.put('/assets/copy_folder_to', { access: 'authenticated', input: FolderInput, summary: 'copy a folder of a project with an asset copy-to strategy (project_id, path, strategy)' }, async (ctx) => {
    const { project } = await projects().readable(ctx.em, ctx.user, ctx.input.project_id)
    const ref = strategyParam(ctx.input)!
    const strategy = await strategies().usable('asset_copy_to', ref.id, ctx.user, ref.param)
    const folder = relativeSegments(ctx.input.path ?? '', 'path').join('/')
    const dir = await resolveInside(projects().pathOf(project), folder || '.', 'path')
    if (!(await stat(dir).then((s) => s.isDirectory(), () => false))) throw invalidParam('path', 'is not a folder of the project')
    return enqueue(ctx, CopyJob.type, { strategyId: strategy.id, kind: 'asset_copy_to', projectId: project.id, ...(folder ? { folder } : {}) }, project.id)
  })

  routes.put('/projects/:id/copy_to', { access: 'authenticated', params: IdParams, input: StrategyInput, summary: 'copy the project with a project copy-to strategy (contents: media, project files or both)' }, async (ctx) => {
    const { project } = await projects().readable(ctx.em, ctx.user, ctx.params.id)
    const ref = strategyParam(ctx.input)!
    const strategy = await strategies().usable('project_copy_to', ref.id, ctx.user, ref.param)
    if (strategy.delete_project) throw new MamError('not_implemented', `Strategy "${strategy.name}" deletes the source project after the copy; that step is not built in this server yet, so nothing was copied`)
    return enqueue(ctx, CopyJob.type, { strategyId: strategy.id, kind: 'project_copy_to', projectId: project.id }, project.id)
  })

  routes.put('/projects/:id/backup', { access: 'authenticated', params: IdParams, input: StrategyInput, summary: 'back the project up now with a backup strategy (full or incremental, retention keep N)' }, async (ctx) => {
    const project = await projects().writable(ctx.em, ctx.user, ctx.params.id).catch(async (err) => {
      // a frozen project is backed up all the same: a backup changes nothing in it
      if (err instanceof MamError && err.code === 'locked') return (await projects().readable(ctx.em, ctx.user, ctx.params.id)).project
      throw err
    })
    const ref = strategyParam(ctx.input)!
    const strategy = await strategies().usable('backup', ref.id, ctx.user, ref.param)
    return enqueue(ctx, BackupJob.type, { strategyId: strategy.id, projectId: project.id }, project.id)
  })

  routes.put('/backup', { access: 'admin', input: StrategyInput, summary: 'back the database up now (SQLite online backup or pg_dump -Fc) with a backup strategy' }, async (ctx) => {
    const ref = strategyParam(ctx.input)!
    const strategy = await strategies().usable('backup', ref.id, ctx.user, ref.param)
    return enqueue(ctx, DatabaseBackupJob.type, { strategyId: strategy.id }, null)
  })
}
