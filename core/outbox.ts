import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { Dialect, EntityManager, Knex } from './db/orm.js'
import type { EventBus, EventType, PublishedEvent, PublishOptions } from './events.js'
import type { JobService } from './jobs/service.js'

export const OUTBOX_TABLE = 'event_outbox'
/** the job that hands outbox events to their consumers */
export const FANOUT_JOB = 'core.outbox-fanout'

/** A plugin that hears every outbox event (notifications, webhooks). */
export interface OutboxConsumer {
  /** the consuming plugin: while it is switched off, its consumer is skipped */
  plugin: string
  /**
   * Handles a batch of events, oldest first. Delivery is at least once (a crash repeats a batch), so
   * this must be idempotent by event id. Throwing has the whole batch handed out again later.
   */
  deliver(events: PublishedEvent[]): Promise<void>
}

/** where the event is written: a knex transaction, a transactional EntityManager, or plain knex */
export type OutboxWriter = Knex | EntityManager

export interface OutboxItem<P = unknown> {
  event: EventType<P>
  payload: P
  options: PublishOptions
}

/** the knex (transaction, when there is one) behind a writer */
export function knexOf(db: OutboxWriter): Knex {
  if (typeof db === 'function') return db as Knex
  const em = db as EntityManager
  return (em.getTransactionContext<Knex.Transaction>() ?? em.getKnex()) as Knex
}

/** a batch that failed this many times is given up (logged), so one poisoned event cannot stall the outbox */
const MAX_ATTEMPTS = 10

interface OutboxRow {
  id: number | string
  event_id: string
  name: string
  subject_type: string
  subject_id: number | string
  actor_id: number | string | null
  payload: string | unknown
  created_at: Date | string | number
  attempts: number | string
}

/**
 * The transactional outbox: catalogue events that must not be lost are written to `event_outbox` in
 * the transaction of the change that caused them (`publish(trx, …)`), with a fan-out job queued in
 * that same transaction. The job (`core.outbox-fanout`) claims pending events under a lease, hands
 * them to every consumer, and marks them dispatched. A crash anywhere repeats the batch: consumers
 * deduplicate by event id. Resolved as `coreServices.outbox`.
 */
export class Outbox {
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
  private readonly consumers: OutboxConsumer[] = []

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly events: EventBus,
    private readonly jobs: JobService,
    private readonly isActive: (plugin: string) => boolean,
    private readonly log: Logger,
    private readonly options: { leaseMs: number; batch?: number; retainDays?: number } = { leaseMs: 30_000 },
  ) {}

  /** adds a consumer (in a plugin's `start`) */
  consume(consumer: OutboxConsumer): void {
    this.consumers.push(consumer)
  }

  /**
   * Writes a declared event with `db` (the change's transaction: both commit or neither does) and
   * queues the fan-out. Throws on an undeclared event or a payload that does not match its schema.
   */
  async publish<P>(db: OutboxWriter, event: EventType<P>, payload: P, options: PublishOptions): Promise<PublishedEvent<P>> {
    const [published] = await this.publishMany(db, [{ event, payload, options }])
    return published as PublishedEvent<P>
  }

  async publishMany(db: OutboxWriter, items: OutboxItem<any>[]): Promise<PublishedEvent[]> {
    if (!items.length) return []
    const published = items.map((i) => this.events.prepare(i.event, i.payload, i.options))
    const k = knexOf(db)
    const rows = published.map((p) => ({
      event_id: p.id,
      name: p.name,
      subject_type: p.subject.type,
      subject_id: p.subject.id,
      actor_id: p.actor_id,
      payload: JSON.stringify(p.payload),
      created_at: new Date(p.time),
      attempts: 0,
    }))
    for (let i = 0; i < rows.length; i += 500) await k(OUTBOX_TABLE).insert(rows.slice(i, i + 500))
    await this.jobs.ensureQueued(k, FANOUT_JOB, {})
    // this process's subscribers hear it once it is committed
    const committed = (k as Knex & { executionPromise?: Promise<unknown> }).executionPromise
    const local = () => published.forEach((p) => this.events.deliverLocally(p))
    if (committed) committed.then(local, () => {})
    else local()
    return published
  }

  /** events not handed out yet (a restart queues the fan-out for them) */
  async pending(): Promise<number> {
    const [row] = await this.knex(OUTBOX_TABLE).whereNull('dispatched_at').count({ n: '*' })
    return Number((row as { n: unknown }).n)
  }

  /** queues the fan-out when events wait (at start: a process that died left them) */
  async resume(): Promise<void> {
    if (await this.knex(OUTBOX_TABLE).whereNull('dispatched_at').first('id')) await this.jobs.ensureQueued(this.knex, FANOUT_JOB, {})
  }

  /**
   * One round of the fan-out: claims up to `limit` pending events (or ones whose claim lapsed), hands
   * them to every active consumer and marks them dispatched. Returns how many it claimed.
   */
  async fanOut(limit = this.options.batch ?? 500): Promise<number> {
    const now = new Date()
    const lock = this.dialect === 'postgresql' ? 'for update skip locked' : ''
    const result = await this.knex.raw(
      `update ${OUTBOX_TABLE} set locked_by = ?, lease_until = ?, attempts = attempts + 1
        where id in (
          select id from ${OUTBOX_TABLE}
           where dispatched_at is null and (lease_until is null or lease_until < ?)
           order by id limit ? ${lock})
       returning *`,
      [this.owner, new Date(now.getTime() + this.options.leaseMs), now, limit],
    )
    const rows: OutboxRow[] = (this.dialect === 'postgresql' ? result.rows : result) as OutboxRow[]
    if (!rows.length) return 0
    rows.sort((a, b) => Number(a.id) - Number(b.id))
    const ids = rows.map((r) => Number(r.id))
    const events = rows.map(toPublished)
    try {
      // side by side: a cheap consumer (webhooks: a row per hook) does not wait for a heavy one
      // (notifications: a row per user); a failure of either hands the whole batch out again
      const outcomes = await Promise.allSettled(this.consumers.filter((c) => this.isActive(c.plugin)).map((c) => c.deliver(events)))
      const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')
      if (failed) throw failed.reason
    } catch (err) {
      const attempts = Math.max(...rows.map((r) => Number(r.attempts)))
      if (attempts < MAX_ATTEMPTS) {
        // handed back at once: the job's retry (with its backoff) claims them again
        await this.knex(OUTBOX_TABLE).whereIn('id', ids).where({ locked_by: this.owner }).update({ locked_by: null, lease_until: null })
        throw err
      }
      this.log.error({ err, events: events.map((e) => e.id) }, `outbox: giving up a batch after ${attempts} attempts`)
      await this.knex(OUTBOX_TABLE).whereIn('id', ids).where({ locked_by: this.owner }).update({ error: String((err as Error).message).slice(0, 1000) })
    }
    await this.knex(OUTBOX_TABLE).whereIn('id', ids).where({ locked_by: this.owner }).update({ dispatched_at: new Date(), locked_by: null, lease_until: null })
    return rows.length
  }

  /** removes dispatched events older than the retention (webhook deliveries keep their own copy) */
  async prune(): Promise<number> {
    const before = new Date(Date.now() - (this.options.retainDays ?? 7) * 86_400_000)
    const old = this.knex(OUTBOX_TABLE).whereNotNull('dispatched_at').where('dispatched_at', '<', before).orderBy('id').limit(5000).select('id')
    return this.knex(OUTBOX_TABLE).whereIn('id', old).delete()
  }
}

function toPublished(row: OutboxRow): PublishedEvent {
  const created = row.created_at instanceof Date ? row.created_at : new Date(typeof row.created_at === 'string' && /^\d+$/.test(row.created_at) ? Number(row.created_at) : row.created_at)
  return {
    id: row.event_id,
    name: row.name,
    time: created.toISOString(),
    subject: { type: row.subject_type, id: Number(row.subject_id) },
    actor_id: row.actor_id === null ? null : Number(row.actor_id),
    payload: typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload,
  }
}
