import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Knex } from '../db/orm.js'
import { isUniqueViolation } from '../db/unique.js'
import { MamError, invalidParam } from '../errors.js'

const TABLE = 'idempotency_keys'
const OWNER = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
const KEEP_MS = 24 * 3600_000
const SWEEP_EVERY_MS = 10 * 60_000

export interface IdempotencyScope {
  userId: number
  key: string
  /** method and route pattern: `POST /projects/:id/inject_uploads` */
  route: string
  /** what makes two requests the same (the concrete path, the parameters, the files' names and sizes) */
  fingerprint: string
}

export type Claim = { replay: { status: number; body: unknown } } | { id: number }

/** expired rows go lazily: at most every ten minutes, from whichever request comes by */
const lastSweep = new WeakMap<object, number>()

/**
 * Stored answers of requests sent with an `Idempotency-Key` (SQL only). A key is claimed by a
 * unique row (user, key, route) before the work starts; the answer is saved in the transaction
 * that commits the work, so a crash leaves either no effect and no answer or both. A running claim
 * has a lease like a job: a process that died lets a retry take the key over once it lapses.
 */
export class IdempotencyKeys {
  constructor(
    private readonly knex: Knex,
    private readonly leaseMs: number,
  ) {}

  async claim(scope: IdempotencyScope): Promise<Claim> {
    await this.sweep()
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = new Date()
      try {
        const [row] = await this.knex(TABLE)
          .insert({
            user_id: scope.userId,
            key: scope.key,
            route: scope.route,
            fingerprint: scope.fingerprint,
            state: 'running',
            owner: OWNER,
            lease_until: this.leaseEnd(),
            expires_at: new Date(now.getTime() + KEEP_MS),
            created_at: now,
            updated_at: now,
          })
          .returning('id')
        return { id: Number(typeof row === 'object' ? row.id : row) }
      } catch (err) {
        if (!isUniqueViolation(err)) throw err
      }
      const existing = await this.knex(TABLE).where({ user_id: scope.userId, key: scope.key, route: scope.route }).first()
      if (!existing) continue // expired and removed meanwhile
      if (time(existing.expires_at) < Date.now()) {
        await this.knex(TABLE).where({ id: existing.id }).where('expires_at', '<', new Date()).delete()
        continue
      }
      if (existing.fingerprint !== scope.fingerprint)
        throw invalidParam('Idempotency-Key', 'was used for a different request; use a new key for a new request')
      if (existing.state === 'done') return { replay: { status: Number(existing.status), body: JSON.parse(existing.body) } }
      // the first request still runs, or its process died: a lapsed lease of another process lets this one take over
      const taken = await this.knex(TABLE)
        .where({ id: existing.id, state: 'running' })
        .whereNot({ owner: OWNER })
        .where('lease_until', '<', new Date())
        .update({ owner: OWNER, lease_until: this.leaseEnd(), updated_at: new Date() })
      if (taken === 1) return { id: Number(existing.id) }
      throw new MamError('conflict', 'A request with this Idempotency-Key is still being processed; retry when it has finished', { headers: { 'Retry-After': '1' } })
    }
    throw new MamError('conflict', 'The Idempotency-Key changed hands while claiming it; retry', { headers: { 'Retry-After': '1' } })
  }

  /** stores the answer; inside the transaction that commits the work, so both happen or neither */
  async save(trx: Knex, id: number, status: number, body: unknown): Promise<void> {
    const n = await trx(TABLE).where({ id, owner: OWNER, state: 'running' }).update({ state: 'done', status, body: JSON.stringify(body ?? null), updated_at: new Date() })
    if (n !== 1) throw new MamError('conflict', 'The request with this Idempotency-Key was taken over by a retry after its lease lapsed')
  }

  /** the request failed without an effect: a retry under the same key runs again */
  async release(id: number): Promise<void> {
    await this.knex(TABLE).where({ id, owner: OWNER, state: 'running' }).delete()
  }

  async renew(id: number): Promise<void> {
    await this.knex(TABLE).where({ id, owner: OWNER, state: 'running' }).update({ lease_until: this.leaseEnd(), updated_at: new Date() })
  }

  private async sweep(): Promise<void> {
    const last = lastSweep.get(this.knex) ?? 0
    if (Date.now() - last < SWEEP_EVERY_MS) return
    lastSweep.set(this.knex, Date.now())
    await this.knex(TABLE).where('expires_at', '<', new Date()).delete()
  }

  private leaseEnd(): Date {
    return new Date(Date.now() + this.leaseMs)
  }
}

const time = (v: unknown) => (v instanceof Date ? v.getTime() : typeof v === 'string' && !/^\d+$/.test(v) ? Date.parse(v) : Number(v))
