import type { RegisterApi } from '../plugin/contract.js'
import type { MamContext } from '../http/context.js'
import { IdParams } from '../http/schemas.js'
import { iso } from '../db/entity.js'
import { notFound } from '../errors.js'
import { JOBS_TABLE, normalise } from '../jobs/queue.js'
import { andThen, preparedRead, type MaybePromise, type PreparedRead } from '../db/rows.js'
import { coreServices } from '../plugin/services.js'
import type { JobKind, JobRow } from '../jobs/types.js'

export function serializeJob(job: JobRow) {
  return {
    id: job.id,
    action: job.type,
    state: job.state,
    progress: job.progress,
    error: job.error,
    attempts: job.attempts,
    cancel_requested: job.cancel_requested,
    project_id: job.project_id,
    edit_id: job.edit_id,
    asset_id: job.asset_id,
    success: job.success,
    failure: job.failure,
    result: job.result,
    created_at: iso(job.created_at),
    updated_at: iso(job.updated_at),
    started_at: iso(job.started_at),
    finished_at: iso(job.finished_at),
  }
}

/** §4.14: job status. A job is visible to the user who started it and to administrators. */
export function registerStatusRoutes({ routes }: RegisterApi) {
  // synchronous while SQLite's connection is free (PreparedRead.now): clients poll these
  const show = (kinds: JobKind[] | null) => (ctx: MamContext) => andThen(visibleJob(ctx, kinds), (job) => ({ job: serializeJob(job) }))
  routes.get('/status/:id', { access: 'authenticated', params: IdParams, summary: 'status of a job' }, show(null))
  routes.get('/asset_status/:id', { access: 'authenticated', params: IdParams, summary: 'status of an asset job' }, show(['asset']))
  routes.get('/copy_to_status/:id', { access: 'authenticated', params: IdParams, summary: 'status of a copy-to job' }, show(['copy_to']))
  routes.delete('/status/:id', { access: 'authenticated', params: IdParams, summary: 'cancel a job' }, async (ctx) => {
    const job = await visibleJob(ctx, null)
    return { job: serializeJob((await ctx.resolve(coreServices.jobs).cancel(job.id))!) }
  })
}

/** one job's row by id, prepared once per knex: clients poll the status routes */
const jobRows = new WeakMap<object, PreparedRead>()
function jobById(ctx: MamContext, id: number): MaybePromise<JobRow | null> {
  const knex = ctx.resolve(coreServices.knex)
  let read = jobRows.get(knex)
  if (!read) jobRows.set(knex, (read = preparedRead(knex, `select * from ${JOBS_TABLE} where id = ?`)))
  return andThen(read.now([id]), ([row]) => (row ? normalise(row) : null))
}

function visibleJob(ctx: MamContext, kinds: JobKind[] | null): MaybePromise<JobRow> {
  return andThen(jobById(ctx, ctx.params.id), (job) => {
    const user = ctx.user!
    if (!job || (kinds && !kinds.includes(job.kind)) || (!user.isAdmin && job.user_id !== user.userId)) throw notFound('job', ctx.params.id)
    return job
  })
}
