import { Type } from 'typebox'
import { strategyServices } from './refs.js'

import { IdParam, coreServices, defineJob, type RegisterApi } from '../../core/index.js'
export const ArchiveJob = defineJob('strategies.archive', Type.Object({ projectId: IdParam }))

export function defineStrategyJobs(api: RegisterApi) {
  api.jobs.define(ArchiveJob, {
    kind: 'project',
    maxAttempts: 10,
    concurrency: 2,
    async handler(ctx) {
      return ctx.resolve(strategyServices.archives).run(ctx.payload.projectId, { signal: ctx.signal, progress: (f) => ctx.progress(f), log: ctx.log })
    },
  })
}

export const CopyJob = defineJob(
  'strategies.copy',
  Type.Object({
    strategyId: IdParam,
    kind: Type.Union([Type.Literal('asset_copy_to'), Type.Literal('project_copy_to')]),
    projectId: IdParam,
    paths: Type.Optional(Type.Array(Type.String())),
    folder: Type.Optional(Type.String()),
  }),
)
export const BackupJob = defineJob('strategies.backup', Type.Object({ strategyId: IdParam, projectId: IdParam }))
export const DatabaseBackupJob = defineJob('strategies.database-backup', Type.Object({ strategyId: IdParam }))

export function defineCopyJobs(api: RegisterApi) {
  const runCtx = (ctx: { signal: AbortSignal; progress(f: number): void; log: any }) => ({ signal: ctx.signal, progress: (f: number) => ctx.progress(f), log: ctx.log })
  api.jobs.define(CopyJob, { kind: 'copy_to', maxAttempts: 3, concurrency: 2, handler: (ctx) => ctx.resolve(strategyServices.copies).copyTo(ctx.id, ctx.payload, runCtx(ctx)) })
  api.jobs.define(BackupJob, { kind: 'project', maxAttempts: 3, concurrency: 1, handler: (ctx) => ctx.resolve(strategyServices.copies).backup(ctx.id, ctx.payload, runCtx(ctx)) })
  api.jobs.define(DatabaseBackupJob, { kind: 'generic', maxAttempts: 3, concurrency: 1, handler: (ctx) => ctx.resolve(strategyServices.copies).databaseBackup(ctx.id, ctx.payload, runCtx(ctx)) })
}

export const TierJob = defineJob('strategies.tier', Type.Object({ projectId: IdParam, storage: Type.String({ minLength: 1, maxLength: 64 }) }))

export function defineTierJob(api: RegisterApi) {
  api.jobs.define(TierJob, {
    kind: 'project',
    maxAttempts: 3,
    concurrency: 1,
    async handler(ctx) {
      const tier = ctx.resolve(strategyServices.tier)
      const result = await tier.tier(ctx.resolve(coreServices.em), ctx.payload.projectId, ctx.payload.storage, { signal: ctx.signal, progress: (f) => ctx.progress(f), log: ctx.log })
      // done with the project: the next request may claim it (a failed run's claim lapses with its job)
      await tier.release(ctx.payload.projectId, ctx.id)
      return result
    },
  })
}
