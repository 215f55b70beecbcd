import type { JobRow } from '../jobs/types.js'
import { serializeJob } from '../system/status-routes.js'
import type { MamContext } from './context.js'

/** A job was queued for the request: 202 with the job (`GET /status/:id` follows it). */
export function acceptedJob(ctx: MamContext, job: JobRow) {
  return accepted(ctx, { job: serializeJob(job) })
}

/**
 * The request was taken on and its work goes on (202) with another body than one job: the state
 * of the work (an archive, a package being made) or several jobs. One job alone: `acceptedJob`.
 */
export function accepted<T>(ctx: MamContext, body: T): T {
  ctx.status = 202
  return body
}

/** A record was made: 201 with it under its root key. */
export function created<T extends Record<string, unknown>>(ctx: MamContext, body: T): T {
  ctx.status = 201
  return body
}
