import { createHash } from 'node:crypto'
import type { MamContext } from '../http/context.js'
import type { Knex } from '../db/orm.js'
import { coreServices } from '../plugin/services.js'
import { invalidParam } from '../errors.js'
import { IdempotencyKeys } from './store.js'

const HEADER = 'Idempotency-Key'
const KEY = /^[\x21-\x7e]{1,255}$/

/** how a handler stores its answer with its work: call `save` in the transaction that commits the work */
export interface Answer {
  save(trx: Knex, body: unknown): Promise<void>
}

/** JSON with sorted keys, so the same parameters in another order are the same request */
const canonical = (v: unknown): string =>
  Array.isArray(v) ? `[${v.map(canonical).join(',')}]` : v && typeof v === 'object' ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as any)[k])}`).join(',')}}` : JSON.stringify(v ?? null)

function fingerprintOf(ctx: MamContext): string {
  // parts are collected as they finish, so their order says nothing
  const files = ctx.files.map((f) => canonical({ field: f.field, name: f.originalName, size: f.size })).sort()
  return createHash('sha256').update(canonical({ method: ctx.method, path: ctx.path, input: ctx.input, files })).digest('hex')
}

/**
 * Runs a handler at most once per `Idempotency-Key` (header, optional): a client that lost the
 * answer repeats the request under the same key and gets the stored status and body (header
 * `Idempotent-Replayed: true`) instead of a second effect. The same key while the first request
 * still runs is 409 with Retry-After; under another request (path, parameters, files' names and
 * sizes) it is 422. Keys belong to the user and the route, and are kept 24 hours. A request that
 * fails stores nothing, so its retry runs again.
 */
export async function idempotent<T>(ctx: MamContext, status: number, work: (answer: Answer) => Promise<T>): Promise<T> {
  const key = ctx.get(HEADER)
  if (!key) {
    const body = await work({ save: async () => {} })
    ctx.status = status
    return body
  }
  if (!KEY.test(key)) throw invalidParam(HEADER, 'must be 1 to 255 visible ASCII characters')
  const config = ctx.resolve(coreServices.config)
  const keys = new IdempotencyKeys(ctx.resolve(coreServices.knex), config.jobs.leaseMs)
  const route = `${ctx.method} ${(ctx as { _matchedRoute?: string })._matchedRoute ?? ctx.path}`
  const claim = await keys.claim({ userId: ctx.user!.userId, key, route, fingerprint: fingerprintOf(ctx) })
  if ('replay' in claim) {
    ctx.status = claim.replay.status
    ctx.set('Idempotent-Replayed', 'true')
    return claim.replay.body as T
  }
  const heartbeat = setInterval(() => keys.renew(claim.id).catch(() => {}), Math.max(50, Math.floor(config.jobs.leaseMs / 3)))
  heartbeat.unref()
  let saved = false
  try {
    const body = await work({
      save: async (trx, answer) => {
        await keys.save(trx, claim.id, status, answer)
        saved = true
      },
    })
    if (!saved) await keys.save(ctx.resolve(coreServices.knex), claim.id, status, body)
    ctx.status = status
    return body
  } catch (err) {
    // nothing if the answer was committed; otherwise the key is free for the retry
    await keys.release(claim.id).catch(() => {})
    throw err
  } finally {
    clearInterval(heartbeat)
  }
}
