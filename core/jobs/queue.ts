import type { Knex } from '@mikro-orm/knex'
import type { Dialect } from '../db/orm.js'
import type { EventBus } from '../events.js'
import { HotStatement } from '../db/hot.js'
import type { EnqueueOptions, JobFilter, JobKind, JobRow, JobState, Recurrence } from './types.js'

export const JOBS_TABLE = 'jobs'
export const NOTIFY_CHANNEL = 'mamkit_jobs'
/** NOTIFY payloads on the jobs channel that carry a command for the runners' control listeners, not a wake-up */
export const CONTROL_PREFIX = 'control:'

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
  /**
   * whether `onSettled` has anything to do for a job ending in this state (judged on the claimed
   * row): the others end without a transaction, many in one statement
   */
  onSettledWants?: (job: Pick<JobRow, 'type' | 'kind' | 'user_id' | 'state'>) => boolean
  /** the types that run again and again (`api.jobs.schedule`), set by the runtime */
  recurring = new Map<string, Recurrence & { kind: JobKind; maxAttempts?: number }>()
  private readonly hot: ReturnType<typeof hotStatements>

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly events: EventBus,
    private readonly defaults: { maxAttempts: number },
  ) {
    this.hot = hotStatements(knex, dialect)
  }

  async enqueue(type: string, kind: JobKind, payload: unknown, options: EnqueueOptions = {}): Promise<JobRow> {
    const [row] = await this.enqueueMany([{ type, kind, payload, options }], options.trx)
    return row
  }

  /**
   * Many jobs in one INSERT per 500 (one NOTIFY, one wake-up): registering a thousand files must
   * not cost a thousand round trips before the first analysis can start. Written with `db` when given
   * (a transaction the jobs commit with).
   */
  async enqueueMany(jobs: Array<{ type: string; kind: JobKind; payload: unknown; options?: EnqueueOptions }>, db: Knex = this.knex): Promise<JobRow[]> {
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
    for (let i = 0; i < rows.length; i += 500) out.push(...(await db(JOBS_TABLE).insert(rows.slice(i, i + 500)).returning('*')).map(normalise))
    await this.wakeRunners([...new Set(jobs.map((j) => j.type))], db)
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
    await this.wakeRunners([type], db)
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

  /** the newest jobs whose columns match every value given (a list: any of it; undefined: ignored) */
  async list(filter: JobFilter, limit: number): Promise<JobRow[]> {
    let query = this.knex(JOBS_TABLE)
    for (const [column, value] of Object.entries(filter)) {
      if (value === undefined) continue
      query = Array.isArray(value) ? query.whereIn(column, value) : query.where(column, value)
    }
    const rows = await query.orderBy('id', 'desc').limit(limit)
    return rows.map(normalise)
  }

  /**
   * Takes up to `limit` runnable jobs of the given types in one statement: queued and due, in
   * priority order. With `sweep` (the runner's poll timer: leases lapse over seconds, not per
   * wake-up) it first fails running jobs whose lease lapsed on their last attempt and takes those
   * that lapsed before it. Every claimed row gets `token` as its `locked_by`: the lease is this
   * claim's, and every later write (heartbeat, completion, release) is fenced by it, so even the
   * same process cannot settle a job twice after losing and retaking it.
   *
   * `held` are the claim tokens the calling runner still holds (jobs it runs, outcomes it has not
   * written yet): their leases may have lapsed while the database was away (no heartbeat got
   * through), but the jobs are not lost, so the sweep neither fails nor takes them again.
   */
  async claim(token: string, types: string[], limit: number, leaseMs: number, sweep = true, held: string[] = []): Promise<JobRow[]> {
    if (types.length === 0 || limit <= 0) return []
    const now = new Date()
    const leaseUntil = new Date(now.getTime() + leaseMs)
    const typeList = JSON.stringify(types)
    const heldList = JSON.stringify(held)
    const rows: any[] = []
    if (sweep) {
      // a job whose lease lapsed on its last allowed attempt has crashed its process too often
      await this.knex(JOBS_TABLE)
        .where({ state: 'running' })
        .where('lease_until', '<', now)
        .whereRaw('attempts >= max_attempts')
        .where((q) => q.whereNull('locked_by').orWhereNotIn('locked_by', held))
        .update({ state: 'failed', error: 'the job stopped responding too often (lease lapsed)', locked_by: null, lease_until: null, finished_at: now, updated_at: now })
      rows.push(...(await this.hot.claimLapsed.run([token, leaseUntil, now, now, now, heldList, typeList, limit])))
    }
    // jobs handed back from this runner's process (releaseWorker) go to the others
    const handedBack = releasedMark(token.slice(0, Math.max(0, token.lastIndexOf(':'))))
    if (rows.length < limit) rows.push(...(await this.hot.claim.run([token, leaseUntil, now, now, now, handedBack, typeList, limit - rows.length])))
    return rows.map(normalise).sort((a, b) => b.priority - a.priority || a.id - b.id)
  }

  /**
   * Extends the leases of all of a process's jobs in one statement and stores their progress.
   * Returns the jobs still held (with whether a cancellation was asked for); a job missing from the
   * answer was lost to another process.
   */
  async heartbeat(jobs: Array<{ id: number; token: string; progress: number; success: number; failure: number }>, leaseMs: number): Promise<Map<number, { cancelRequested: boolean }>> {
    const held = new Map<number, { cancelRequested: boolean }>()
    if (!jobs.length) return held
    const now = new Date()
    const rows = await this.hot.heartbeat.run<{ id: number | string; cancel_requested: unknown }>([new Date(now.getTime() + leaseMs), now, JSON.stringify(jobs)])
    for (const r of rows) held.set(Number(r.id), { cancelRequested: Boolean(r.cancel_requested) })
    return held
  }

  /** Ends one claimed job; false when this claim no longer holds it (someone else finishes it). */
  async settle(id: number, token: string, change: SettleChange): Promise<boolean> {
    const [done] = await this.settleMany([{ id, token, ...change }])
    return done
  }

  /**
   * Ends claimed jobs, as many as there are, in one statement (a transaction with the `onSettled`
   * hook when a job needs it). Each row is fenced by its own claim token: a job this claim no
   * longer holds is left alone and answers false. `jobs.settled` is emitted for each one ended.
   */
  async settleMany(jobs: Array<SettleChange & { id: number; token: string; row?: Pick<JobRow, 'type' | 'kind' | 'user_id'> }>): Promise<boolean[]> {
    if (!jobs.length) return []
    const now = new Date()
    const hook = this.onSettled
    const hooked = (j: { state: JobState; row?: Pick<JobRow, 'type' | 'kind' | 'user_id'> }) =>
      hook !== undefined && (j.state === 'finished' || j.state === 'failed') && (!j.row || !this.onSettledWants || this.onSettledWants({ ...j.row, state: j.state }))
    // a recurring job's end queues its next run in the same transaction (a row without its type may be one)
    const recurs = (j: { state: JobState; type?: string }) => j.state !== 'queued' && j.state !== 'running' && (j.type === undefined ? this.recurring.size > 0 : this.recurring.has(j.type))
    const inTransaction = (j: (typeof jobs)[number]) => hooked(j) || recurs({ state: j.state, type: j.row?.type })
    const plain = jobs.filter((j) => !inTransaction(j))
    const withHook = jobs.filter(inTransaction)
    const settled = new Map<number, string>()
    const records = (list: typeof jobs) =>
      JSON.stringify(
        list.map((j) => ({
          id: j.id,
          token: j.token,
          state: j.state,
          set_result: j.result !== undefined,
          result: j.result === undefined ? null : JSON.stringify(j.result),
          set_error: j.error !== undefined,
          error: j.error ?? null,
          progress: j.state === 'finished' ? 1 : (j.progress?.progress ?? null),
          success: j.progress?.success ?? null,
          failure: j.progress?.failure ?? null,
          run_at: j.runAt ? j.runAt.getTime() : null,
          uncount: j.uncount === true,
        })),
      )
    const writes: Promise<void>[] = []
    if (plain.length)
      writes.push(
        this.hot.settle.run<{ id: number | string; state: string }>([now, now, records(plain)]).then((rows) => {
          for (const r of rows) settled.set(Number(r.id), r.state)
        }),
      )
    if (withHook.length)
      writes.push(
        this.knex.transaction(async (trx) => {
          const rows = await this.hot.settleFull.runIn(trx, [now, now, records(withHook)])
          for (const r of rows) {
            const job = normalise(r)
            if (hooked({ state: job.state, row: job })) await hook!(trx, job)
            if (recurs(job)) await this.queueRecurring(trx, job.type, this.recurring.get(job.type)!.everyMs)
            settled.set(job.id, job.state)
          }
        }),
      )
    await Promise.all(writes)
    for (const [id, state] of settled) this.events.emit('jobs.settled', { id, state })
    return jobs.map((j) => settled.has(j.id))
  }

  /**
   * Queues a run of each recurring type (`firstAfterMs` from now) that has none queued or running:
   * a process's first start, a chain whose queued run was cancelled. One transaction per type.
   */
  async ensureRecurring(types: string[]): Promise<void> {
    for (const type of types) {
      const recurrence = this.recurring.get(type)
      if (!recurrence) continue
      // PostgreSQL: the advisory lock lives as long as a transaction; SQLite: one statement is one
      if (this.dialect === 'postgresql') await this.knex.transaction((trx) => this.queueRecurring(trx, type, recurrence.firstAfterMs))
      else await this.queueRecurring(this.knex, type, recurrence.firstAfterMs)
    }
  }

  /**
   * The next run of a recurring type, `delayMs` from now, unless one is queued or running. On
   * PostgreSQL a transaction-scoped advisory lock per type makes two processes doing this at once
   * queue one run, not two; on SQLite the writing transaction already excludes the other.
   */
  private async queueRecurring(db: Knex, type: string, delayMs: number): Promise<void> {
    const recurrence = this.recurring.get(type)!
    if (this.dialect === 'postgresql') await db.raw('select pg_advisory_xact_lock(hashtext(?))', [`${NOTIFY_CHANNEL}:recurring:${type}`])
    const now = new Date()
    const at = (d: Date) => (this.dialect === 'sqlite' ? d.getTime() : d) // knex's SQLite binding of dates
    // one statement: on SQLite a check and a separate insert could meet another writer in between
    await db.raw(
      `insert into ${JOBS_TABLE} (type, kind, state, payload, progress, attempts, max_attempts, priority, run_at, cancel_requested, success, failure, created_at, updated_at)
       select ?, ?, 'queued', ?, 0, 0, ?, 0, ?, ?, 0, 0, ?, ?
       where not exists (select 1 from ${JOBS_TABLE} where type = ? and (state = 'queued' or state = 'running'))`,
      [type, recurrence.kind, JSON.stringify({}), recurrence.maxAttempts ?? this.defaults.maxAttempts, at(new Date(now.getTime() + delayMs)), this.dialect === 'sqlite' ? 0 : false, at(now), at(now), type],
    )
  }

  /**
   * Hands back claimed jobs without counting the attempt: graceful shutdown, a claim not started,
   * or (with `runAt`) a job that met a database outage or a full disk, to run again then.
   */
  async release(jobs: Array<{ id: number; token: string; runAt?: Date }>): Promise<void> {
    if (jobs.length === 0) return
    await this.hot.release.run([new Date(), JSON.stringify(jobs.map((j) => ({ id: j.id, token: j.token, run_at: j.runAt ? j.runAt.getTime() : null })))])
  }

  /**
   * Hands back every job a runner holds (its `workerId` starts each of its claim tokens), without
   * counting the attempt: that runner was detached from the farm, or stopped answering, and other
   * processes take the jobs at their next claim. Its next heartbeat finds them gone and aborts their
   * handlers (the fence of every write). Returns the ids handed back.
   *
   * The jobs keep a mark of that runner in `locked_by` (a queued job's is otherwise empty), which
   * its claims pass over: until its heartbeat learns that it was detached, the runner could
   * otherwise take back the very jobs it was relieved of.
   */
  async releaseWorker(workerId: string): Promise<number[]> {
    const prefix = `${workerId}:`
    const rows: Array<{ id: number | string }> = await this.knex(JOBS_TABLE)
      .where({ state: 'running' })
      .whereRaw('substr(locked_by, 1, ?) = ?', [prefix.length, prefix])
      .update({ state: 'queued', locked_by: releasedMark(workerId), lease_until: null, attempts: this.knex.raw('attempts - 1'), updated_at: new Date() })
      .returning('id')
    const ids = rows.map((r) => Number(typeof r === 'object' ? r.id : r))
    if (ids.length) await this.wakeRunners(['released'])
    return ids
  }

  /**
   * A command for the runners' control listeners (`JobRunner.onControl`) of every process: through
   * NOTIFY on PostgreSQL (this process hears it too), at once in this process on SQLite, where the
   * other processes find the command at their next poll of whatever the topic stands for.
   */
  async notifyControl(topic: string): Promise<void> {
    if (this.dialect === 'postgresql') await this.knex.raw(`select pg_notify(?, ?)`, [NOTIFY_CHANNEL, `${CONTROL_PREFIX}${topic}`])
    else this.events.emit('jobs.control', topic)
  }

  /**
   * Wakes the runners for jobs written with `db`. PostgreSQL delivers a NOTIFY at commit (this process
   * hears it too); on SQLite this process wakes once `db` committed (at once outside a transaction).
   */
  private async wakeRunners(types: string[], db: Knex = this.knex) {
    const wake = () => {
      for (const type of types) this.events.emit('jobs.enqueued', { type })
    }
    if (db === this.knex) wake()
    if (this.dialect === 'postgresql') await db.raw(`select pg_notify(?, ?)`, [NOTIFY_CHANNEL, types.join(',')])
    else if (db !== this.knex) {
      const committed = (db as Knex & { executionPromise?: Promise<unknown> }).executionPromise
      if (committed) committed.then(wake, () => {})
      else wake()
    }
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

/** a job row as the drivers return it (JSON text, epoch numbers on SQLite) as a JobRow */
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

export interface SettleChange {
  state: 'finished' | 'failed' | 'cancelled' | 'queued'
  result?: unknown
  error?: string | null
  runAt?: Date
  progress?: { progress: number; success: number; failure: number }
  /**
   * the attempt is not counted (with state 'queued' and `runAt`: a job handed back after a database
   * outage or a full disk, which is no failure of the job's); written in the runner's batches like
   * any other outcome, so it is kept and retried with them
   */
  uncount?: boolean
}

/** the `locked_by` of a queued job handed back from runner `workerId`: its claims pass it over */
const releasedMark = (workerId: string) => `released:${workerId}`

/**
 * The runner's statements, run straight on the driver (core/db/hot.ts). Lists of jobs travel as
 * one JSON parameter, so each statement has one text whatever the batch size and stays prepared.
 */
function hotStatements(knex: Knex, dialect: Dialect) {
  const pg = dialect === 'postgresql'
  const stmt = (name: string, sql: string) => new HotStatement(knex, dialect, `mamkit_jobs_${name}`, sql)
  // the JSON list of claimed types, as a set to test `type` against
  const types = pg ? 'select value from json_array_elements_text(?::json)' : 'select value from json_each(?)'
  // the JSON list of claim tokens the runner still holds (never swept)
  const tokens = types
  const claim = (runnable: string, index: string) => `update ${JOBS_TABLE}
      set state = 'running', attempts = attempts + 1, locked_by = ?, lease_until = ?,
          started_at = coalesce(started_at, ?), updated_at = ?
    where id in (
      select id from ${JOBS_TABLE} ${index}
       where ${runnable} and type in (${types})
       order by priority desc, id
       limit ? ${pg ? 'for update skip locked' : ''})
    returning *`
  // one record per job: id and claim token, then what to write
  const records = pg
    ? `json_to_recordset(?::json) as v(id int, token text, state text, set_result bool, result text, set_error bool, error text,
         progress float8, success int, failure int, run_at float8, uncount bool)`
    : `(select json_extract(value, '$.id') as id, json_extract(value, '$.token') as token, json_extract(value, '$.state') as state,
         json_extract(value, '$.set_result') as set_result, json_extract(value, '$.result') as result,
         json_extract(value, '$.set_error') as set_error, json_extract(value, '$.error') as error,
         json_extract(value, '$.progress') as progress, json_extract(value, '$.success') as success,
         json_extract(value, '$.failure') as failure, json_extract(value, '$.run_at') as run_at,
         json_extract(value, '$.uncount') as uncount
        from json_each(?)) as v`
  const j = pg ? 'j' : JOBS_TABLE
  // PostgreSQL cannot infer a parameter's type inside CASE
  const time = pg ? '?::timestamptz' : '?'
  const target = pg ? `${JOBS_TABLE} j` : JOBS_TABLE
  const settle = (returning: string) => `update ${target}
      set state = v.state,
          result = case when v.set_result then v.result else ${j}.result end,
          error = case when v.set_error then v.error else ${j}.error end,
          progress = coalesce(v.progress, ${j}.progress),
          success = coalesce(v.success, ${j}.success),
          failure = coalesce(v.failure, ${j}.failure),
          run_at = ${pg ? `coalesce(to_timestamp(v.run_at / 1000.0), j.run_at)` : `coalesce(v.run_at, ${JOBS_TABLE}.run_at)`},
          attempts = ${j}.attempts - case when v.uncount then 1 else 0 end,
          locked_by = null, lease_until = null,
          finished_at = case when v.state = 'queued' then null else ${time} end,
          updated_at = ?
     from ${records}
    where ${j}.id = v.id and ${j}.locked_by = v.token and ${j}.state = 'running'
    returning ${returning}`
  const beats = pg
    ? `json_to_recordset(?::json) as v(id int, token text, progress float8, success int, failure int)`
    : `(select json_extract(value, '$.id') as id, json_extract(value, '$.token') as token, json_extract(value, '$.progress') as progress,
         json_extract(value, '$.success') as success, json_extract(value, '$.failure') as failure from json_each(?)) as v`
  const pairs = pg
    ? `json_to_recordset(?::json) as v(id int, token text, run_at float8)`
    : `(select json_extract(value, '$.id') as id, json_extract(value, '$.token') as token, json_extract(value, '$.run_at') as run_at from json_each(?)) as v`
  return {
    claim: stmt('claim', claim(`state = 'queued' and run_at <= ? and (locked_by is null or locked_by <> ?)`, pg ? '' : 'indexed by jobs_queued_index')),
    claimLapsed: stmt('claim_lapsed', claim(`state = 'running' and lease_until < ? and locked_by not in (${tokens})`, '')),
    settle: stmt('settle', settle(pg ? 'j.id, j.state' : `${JOBS_TABLE}.id, ${JOBS_TABLE}.state`)),
    settleFull: stmt('settle_full', settle(pg ? 'j.*' : '*')),
    heartbeat: stmt(
      'heartbeat',
      `update ${target}
          set lease_until = ?, updated_at = ?, progress = v.progress, success = v.success, failure = v.failure
         from ${beats}
        where ${j}.id = v.id and ${j}.locked_by = v.token and ${j}.state = 'running'
        returning ${j}.id, ${j}.cancel_requested`,
    ),
    release: stmt(
      'release',
      `update ${target}
          set state = 'queued', locked_by = null, lease_until = null, attempts = ${j}.attempts - 1, updated_at = ?,
              run_at = ${pg ? `coalesce(to_timestamp(v.run_at / 1000.0), j.run_at)` : `coalesce(v.run_at, ${JOBS_TABLE}.run_at)`}
         from ${pairs}
        where ${j}.id = v.id and ${j}.locked_by = v.token and ${j}.state = 'running'`,
    ),
  }
}
