import type { Knex } from '@mikro-orm/knex'
import type { Dialect } from '../db/orm.js'
import type { EventBus } from '../events.js'
import type { EnqueueOptions, JobKind, JobRow } from './types.js'

export const JOBS_TABLE = 'jobs'
export const NOTIFY_CHANNEL = 'mamkit_jobs'

/**
 * The durable queue: every state change is one SQL statement, fenced by `locked_by`, so a process
 * that lost a job's lease can never finish it a second time. On PostgreSQL claims use
 * `FOR UPDATE SKIP LOCKED`, letting several processes share one queue; on SQLite a single
 * `UPDATE … RETURNING` is atomic across processes by itself.
 */
export class JobQueue {
  /**
   * runs in the transaction that ends a job as finished or failed (the runtime writes the
   * `job.finished` / `job.failed` events to the outbox here, so they commit with the state)
   */
  onSettled?: (trx: Knex, job: JobRow) => Promise<void>

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly events: EventBus,
    private readonly defaults: { maxAttempts: number },
  ) {}

  async enqueue(type: string, kind: JobKind, payload: unknown, options: EnqueueOptions = {}): Promise<JobRow> {
    const [row] = await this.enqueueMany([{ type, kind, payload, options }])
    return row
  }

  /**
   * Many jobs in one INSERT per 500 (one NOTIFY, one wake-up): registering a thousand files must
   * not cost a thousand round trips before the first analysis can start.
   */
  async enqueueMany(jobs: Array<{ type: string; kind: JobKind; payload: unknown; options?: EnqueueOptions }>): Promise<JobRow[]> {
    if (!jobs.length) return []
    const now = new Date()
    const rows = jobs.map(({ type, kind, payload, options = {} }) => ({
      type,
      kind,
      state: 'queued',
      payload: JSON.stringify(payload ?? null),
      progress: 0,
      attempts: 0,
      max_attempts: options.maxAttempts ?? this.defaults.maxAttempts,
      priority: options.priority ?? 0,
      run_at: options.runAt ?? now,
      cancel_requested: false,
      user_id: options.userId ?? null,
      project_id: options.projectId ?? null,
      edit_id: options.editId ?? null,
      asset_id: options.assetId ?? null,
      success: 0,
      failure: 0,
      created_at: now,
      updated_at: now,
    }))
    const out: JobRow[] = []
    for (let i = 0; i < rows.length; i += 500) out.push(...(await this.knex(JOBS_TABLE).insert(rows.slice(i, i + 500)).returning('*')).map(normalise))
    const types = [...new Set(jobs.map((j) => j.type))]
    for (const type of types) this.events.emit('jobs.enqueued', { type })
    if (this.dialect === 'postgresql') await this.knex.raw(`select pg_notify(?, ?)`, [NOTIFY_CHANNEL, types.join(',')])
    return out
  }

  /**
   * Makes sure a job of `type` is queued to run by `runAt` (default now), written with `db` (a
   * transaction: it commits with the rows the job will process). For "drain" jobs that process
   * whatever is pending in a table (the outbox, webhook deliveries): one queued job serves every
   * writer. On PostgreSQL the queued job found is share-locked until `db` commits, so a claim cannot
   * take it before it sees this transaction's rows; on SQLite the writer already holds the lock.
   */
  async ensureQueued(db: Knex, type: string, kind: JobKind, payload: unknown, options: EnqueueOptions = {}): Promise<void> {
    const runAt = options.runAt ?? new Date()
    const lock = this.dialect === 'postgresql' ? ' for share' : ''
    const result = await db.raw(`select id from ${JOBS_TABLE} where type = ? and state = 'queued' and run_at <= ? limit 1${lock}`, [type, runAt])
    const found: unknown[] = this.dialect === 'postgresql' ? result.rows : result
    if (found.length) return
    const now = new Date()
    await db(JOBS_TABLE).insert({
      type, kind, state: 'queued', payload: JSON.stringify(payload ?? null), progress: 0, attempts: 0,
      max_attempts: options.maxAttempts ?? this.defaults.maxAttempts, priority: options.priority ?? 0, run_at: runAt,
      cancel_requested: false, user_id: options.userId ?? null, project_id: null, edit_id: null, asset_id: null,
      success: 0, failure: 0, created_at: now, updated_at: now,
    })
    // PostgreSQL delivers a NOTIFY at commit; this process hears it too. SQLite: wake once committed.
    if (this.dialect === 'postgresql') await db.raw(`select pg_notify(?, ?)`, [NOTIFY_CHANNEL, type])
    else {
      const committed = (db as Knex & { executionPromise?: Promise<unknown> }).executionPromise
      if (committed) committed.then(() => this.events.emit('jobs.enqueued', { type }), () => {})
      else this.events.emit('jobs.enqueued', { type })
    }
  }

  /** queued jobs of these projects take a new priority (encoding_priority changed); running ones keep theirs */
  async reprioritise(projectIds: number[], priority: number): Promise<number> {
    if (!projectIds.length) return 0
    return this.knex(JOBS_TABLE).whereIn('project_id', projectIds).where({ state: 'queued' }).update({ priority, updated_at: new Date() })
  }

  async get(id: number): Promise<JobRow | null> {
    const row = await this.knex(JOBS_TABLE).where({ id }).first()
    return row ? normalise(row) : null
  }

  /**
   * Takes up to `limit` runnable jobs of the given types: queued and due and, with `sweep`, running
   * ones whose lease lapsed (after failing those that lapsed on their last attempt). Leases lapse
   * over seconds, so the runner sweeps on its poll timer, not on every wake-up; without the lapsed
   * branch the claim walks the claim index in priority order and stops after `limit` rows, however
   * many jobs wait.
   */
  async claim(workerId: string, types: string[], limit: number, leaseMs: number, sweep = true): Promise<JobRow[]> {
    if (types.length === 0 || limit <= 0) return []
    const now = new Date()
    // a job whose lease lapsed on its last allowed attempt has crashed its process too often
    if (sweep)
      await this.knex(JOBS_TABLE)
        .where({ state: 'running' })
        .where('lease_until', '<', now)
        .whereRaw('attempts >= max_attempts')
        .update({ state: 'failed', error: 'the job stopped responding too often (lease lapsed)', locked_by: null, lease_until: null, finished_at: now, updated_at: now })
    const lock = this.dialect === 'postgresql' ? 'for update skip locked' : ''
    // SQLite without statistics prefers the (state, run_at) index and sorts every queued row
    const claimIndex = this.dialect === 'sqlite' && !sweep ? 'indexed by jobs_claim_index' : ''
    const typeList = types.map(() => '?').join(', ')
    const result = await this.knex.raw(
      `update ${JOBS_TABLE}
          set state = 'running', attempts = attempts + 1, locked_by = ?, lease_until = ?,
              started_at = coalesce(started_at, ?), updated_at = ?
        where id in (
          select id from ${JOBS_TABLE} ${claimIndex}
           where type in (${typeList})
             and ${sweep ? `((state = 'queued' and run_at <= ?) or (state = 'running' and lease_until < ?))` : `state = 'queued' and run_at <= ?`}
           order by priority desc, id
           limit ? ${lock})
       returning *`,
      [workerId, new Date(now.getTime() + leaseMs), now, now, ...types, ...(sweep ? [now, now] : [now]), limit],
    )
    const rows: any[] = this.dialect === 'postgresql' ? result.rows : result
    return rows.map(normalise).sort((a, b) => b.priority - a.priority || a.id - b.id)
  }

  /** Extends the lease and stores progress; null when the lease was lost to another process. */
  async heartbeat(id: number, workerId: string, leaseMs: number, progress: { progress: number; success: number; failure: number }) {
    const now = new Date()
    const rows = await this.knex(JOBS_TABLE)
      .where({ id, locked_by: workerId, state: 'running' })
      .update({ lease_until: new Date(now.getTime() + leaseMs), updated_at: now, ...progress })
      .returning(['cancel_requested'])
    if (rows.length === 0) return null
    return { cancelRequested: Boolean((rows[0] as any).cancel_requested) }
  }

  /** Ends a claimed job; false when this process no longer holds it (someone else finishes it). */
  async settle(
    id: number,
    workerId: string,
    change: { state: 'finished' | 'failed' | 'cancelled' | 'queued'; result?: unknown; error?: string | null; runAt?: Date; progress?: { progress: number; success: number; failure: number } },
  ): Promise<boolean> {
    const now = new Date()
    const final = change.state !== 'queued'
    const hook = this.onSettled
    const update = (db: Knex) => db(JOBS_TABLE)
      .where({ id, locked_by: workerId, state: 'running' })
      .update({
        state: change.state,
        ...(change.result !== undefined ? { result: JSON.stringify(change.result) } : {}),
        ...(change.error !== undefined ? { error: change.error } : {}),
        ...(change.progress ?? {}),
        ...(change.state === 'finished' ? { progress: 1 } : {}),
        ...(change.runAt ? { run_at: change.runAt } : {}),
        locked_by: null,
        lease_until: null,
        finished_at: final ? now : null,
        updated_at: now,
      })
    let count: number
    if (hook && (change.state === 'finished' || change.state === 'failed'))
      count = await this.knex.transaction(async (trx) => {
        const n = await update(trx)
        if (n > 0) await hook(trx, normalise(await trx(JOBS_TABLE).where({ id }).first()))
        return n
      })
    else count = await update(this.knex)
    if (count > 0) this.events.emit('jobs.settled', { id, state: change.state })
    return count > 0
  }

  /** Hands back this process's running jobs without counting the attempt (graceful shutdown). */
  async release(workerId: string, ids: number[]): Promise<void> {
    if (ids.length === 0) return
    await this.knex(JOBS_TABLE)
      .whereIn('id', ids)
      .where({ locked_by: workerId, state: 'running' })
      .update({ state: 'queued', locked_by: null, lease_until: null, attempts: this.knex.raw('attempts - 1'), updated_at: new Date() })
  }

  /** Queued jobs end at once; running ones are asked to stop and end as cancelled when they do. */
  async cancel(id: number): Promise<JobRow | null> {
    const now = new Date()
    await this.knex(JOBS_TABLE).where({ id, state: 'queued' }).update({ state: 'cancelled', finished_at: now, updated_at: now })
    await this.knex(JOBS_TABLE).where({ id, state: 'running' }).update({ cancel_requested: true, updated_at: now })
    return this.get(id)
  }
}

const toDate = (v: unknown) => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(v as number))
const fromJson = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : (v ?? null))

export function normalise(row: any): JobRow {
  return {
    ...row,
    id: Number(row.id),
    payload: fromJson(row.payload),
    result: fromJson(row.result),
    progress: Number(row.progress ?? 0),
    attempts: Number(row.attempts),
    max_attempts: Number(row.max_attempts),
    priority: Number(row.priority),
    cancel_requested: Boolean(row.cancel_requested),
    success: Number(row.success ?? 0),
    failure: Number(row.failure ?? 0),
    created_at: toDate(row.created_at)!,
    updated_at: toDate(row.updated_at)!,
    started_at: toDate(row.started_at),
    finished_at: toDate(row.finished_at),
  }
}
