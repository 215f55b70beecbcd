import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import type { AwilixContainer } from 'awilix'
import type { Logger } from 'pino'
import { Piscina } from 'piscina'
import type { MamConfig } from '../config.js'
import type { EventBus } from '../events.js'
import { CONTROL_PREFIX, type JobQueue, type SettleChange } from './queue.js'
import type { JobContext, JobRow } from './types.js'
import type { RegisteredJob } from '../plugin/loader.js'
import { coreServices, type ServiceRef } from '../plugin/services.js'
import { faultOf } from '../errors.js'

interface Running {
  row: JobRow
  /** this claim's lease token (the row's `locked_by`): every write about the job is fenced by it */
  token: string
  abort: AbortController
  /** why `abort` fired: the handler's outcome is recorded accordingly */
  stopReason?: 'cancelled' | 'shutdown' | 'lease-lost'
  progress: { progress: number; success: number; failure: number }
  /** the handler's run and the write of its outcome */
  done: Promise<void>
}

interface Completion {
  entry: Running
  change: SettleChange
  resolve(settled: boolean): void
}

const MAX_BACKOFF_MS = 5 * 60_000
/**
 * A job that met a fault of the machine is handed back without counting an attempt, to run again
 * after a while: the database returns within seconds (or the claim fails until it does); a full
 * disk needs someone to free space (config.jobs.diskFullRetryMs)
 */
const DATABASE_RETRY_MS = 1000
/** outcomes written per statement at most */
const MAX_BATCH = 1000
/** how long a lone free slot waits for others before it is claimed for */
const GATHER_MS = 2

/** a job this process runs now (JobRunner.runningJobs) */
export interface RunningJob {
  id: number
  type: string
  attempt: number
  startedAt: Date | null
  progress: number
}

/**
 * What a plugin may steer of this process's runner (the view farm): claiming on and off, how many
 * jobs at once and of which types, a drained reload, detaching, and a hook on the runner's own
 * heartbeat tick. `JobService.runner()` gives it; the runtime owns start and close.
 */
export type JobRunnerControl = Pick<
  JobRunner,
  'workerId' | 'state' | 'beatMs' | 'pause' | 'resume' | 'configure' | 'limits' | 'runningJobs' | 'jobTypes' | 'onBeat' | 'onControl' | 'restart' | 'detach'
>

/**
 * Claims jobs from the durable queue and runs them: handlers on the main thread (they own DB
 * access), CPU work in a shared piscina pool. Wakes on enqueue in this process, on NOTIFY from
 * other PostgreSQL clients, and on a poll timer as the fallback that also picks up lapsed leases.
 *
 * Round trips are shared: one claim takes as many jobs as there are free slots, the outcomes of
 * handlers that end while a write is under way (or in the same turn of the event loop) are written
 * together in one statement, and one heartbeat statement extends every lease this process holds.
 * A slot is free again once its handler has ended: the next claim does not wait for the outcome's
 * write, only for the batch it joined to be under way.
 */
export class JobRunner {
  // locked_by is 100 characters: the host name is cut so that a claim token always fits
  readonly workerId = `${hostname().slice(0, 60)}:${process.pid}:${randomBytes(3).toString('hex')}`
  private claims = 0
  /** handlers running */
  private readonly running = new Map<number, Running>()
  /** handlers that ended, their outcome not written yet */
  private readonly settling = new Map<number, Running>()
  private pending: Completion[] = []
  private flushing?: Promise<void>
  private flushScheduled = false
  private pool?: Piscina
  private timer?: NodeJS.Timeout
  private heartbeatTimer?: NodeJS.Timeout
  /** the heartbeat under way */
  private beating?: Promise<void>
  /** jobs whose outcome is being written now: the heartbeat leaves their rows alone */
  private readonly inFlight = new Set<number>()
  private gatherTimer?: NodeJS.Timeout
  private stopped = true
  private claiming?: Promise<void>
  private wakeAgain = false
  /** the next claim first fails jobs whose lease lapsed too often (set at start and by the poll timer) */
  private sweepDue = true
  private unsubscribe?: () => void
  /** when the last claim round ended (readiness: a runner whose rounds stopped is stuck) */
  private lastRoundAt = 0
  /**
   * Outcomes whose batch met a database outage (or a database on a full disk): their jobs stay in
   * `settling` (their claim tokens held, so the sweep leaves them alone) and they are written at the
   * start of each round before anything is claimed: a finished job is recorded finished once the
   * database returns instead of running again when its lease lapses.
   */
  private kept: Completion[] = []
  /** the next claim round first queues a run of each recurring type that has none (after start) */
  private recurringDue = false
  /** set while claim rounds fail: logged once per outage, not on every poll */
  private outage?: { since: number }
  /** set while heartbeats fail: logged once, not on every beat */
  private heartbeatFailing = false
  /** claiming off (view farm stop/pause): running jobs go on and their outcomes are written */
  private paused = false
  /** claiming off while restart() drains the runner (a pause asked meanwhile outlives it) */
  private draining = false
  /** claiming off for good: the node was detached (revoked) from the farm */
  private detached = false
  /** jobs at once: config.jobs.concurrency unless configure() set another */
  private concurrency: number
  /** the types this process accepts (configure()); undefined: every type it knows */
  private accepted?: ReadonlySet<string>
  private readonly beatListeners = new Set<() => void>()
  private readonly controlListeners = new Set<(topic: string) => void>()

  constructor(
    private readonly queue: JobQueue,
    private readonly jobs: Map<string, RegisteredJob>,
    private readonly container: AwilixContainer,
    private readonly config: MamConfig,
    private readonly events: EventBus,
    private readonly log: Logger,
    private readonly isPluginActive: (plugin: string) => boolean,
  ) {
    this.concurrency = config.jobs.concurrency
  }

  start(): void {
    if (!this.stopped) return
    this.stopped = false
    this.recurringDue = true
    this.unsubscribe = this.events.on('jobs.enqueued', () => this.wake())
    this.timer = setInterval(() => {
      this.sweepDue = true
      this.wake()
    }, this.config.jobs.pollMs)
    this.timer.unref()
    this.heartbeatTimer = setInterval(() => {
      this.heartbeat()
      this.tellBeat()
    }, this.beatMs())
    this.heartbeatTimer.unref()
    this.wake()
    this.tellBeat()
  }

  /** the heartbeat's interval: leases are extended three times per lease at least */
  beatMs(): number {
    return Math.max(50, Math.min(this.config.jobs.leaseMs / 3, 2000))
  }

  /**
   * whether this process runs jobs, how many it runs now, when its last claim round ended (0: none
   * yet), and whether claiming is off (paused, draining for a restart, or detached)
   */
  state(): { started: boolean; running: number; lastRoundAt: number; paused: boolean; draining: boolean; detached: boolean } {
    return { started: !this.stopped, running: this.running.size, lastRoundAt: this.lastRoundAt, paused: this.paused, draining: this.draining, detached: this.detached }
  }

  /** stops claiming; the jobs that run go on to their end (a drain) */
  pause(): void {
    this.paused = true
  }

  /** claims again after pause() (not after detach()) */
  resume(): void {
    if (!this.paused) return
    this.paused = false
    this.wake()
  }

  /**
   * Jobs at once and the types claimed, applied from the next claim round: a lower limit lets the
   * jobs that run finish, `types: null` accepts every type this process knows again.
   */
  configure(change: { concurrency?: number; types?: readonly string[] | null }): void {
    if (change.concurrency !== undefined) {
      if (!Number.isInteger(change.concurrency) || change.concurrency < 1) throw new RangeError(`concurrency must be a positive integer, not ${change.concurrency}`)
      this.concurrency = change.concurrency
    }
    if (change.types !== undefined) this.accepted = change.types === null ? undefined : new Set(change.types)
    this.wake()
  }

  /** the limits in force: jobs at once, and the accepted types (null: all) */
  limits(): { concurrency: number; types: string[] | null } {
    return { concurrency: this.concurrency, types: this.accepted ? [...this.accepted] : null }
  }

  /** every job type this process can run (those of switched-off plugins included) */
  jobTypes(): string[] {
    return [...this.jobs.keys()]
  }

  /** the jobs whose handlers run here now */
  runningJobs(): RunningJob[] {
    return [...this.running.values()].map((e) => ({ id: e.row.id, type: e.row.type, attempt: e.row.attempts, startedAt: e.row.started_at, progress: e.progress.progress }))
  }

  /**
   * Calls `listener` when the runner starts and on every heartbeat tick after (the tick that extends
   * the leases: no timer of its own). Returns the unsubscribe function.
   */
  onBeat(listener: () => void): () => void {
    this.beatListeners.add(listener)
    return () => this.beatListeners.delete(listener)
  }

  /**
   * Calls `listener` with the topic of every control command (`JobService.notifyControl`): from
   * other processes through PostgreSQL NOTIFY, from this process at once.
   */
  onControl(listener: (topic: string) => void): () => void {
    this.controlListeners.add(listener)
    const off = this.events.on('jobs.control', (topic) => listener(String(topic)))
    return () => {
      off()
      this.controlListeners.delete(listener)
    }
  }

  /** a NOTIFY on the jobs channel (from the runtime's listener): a control command, or jobs to claim */
  notified(payload: string): void {
    if (!payload.startsWith(CONTROL_PREFIX)) return this.wake()
    const topic = payload.slice(CONTROL_PREFIX.length)
    for (const listener of this.controlListeners) this.safely(() => listener(topic))
  }

  private tellBeat() {
    for (const listener of this.beatListeners) this.safely(listener)
  }

  private safely(listener: () => void) {
    try {
      listener()
    } catch (err) {
      this.log.error({ err }, 'a job runner listener failed')
    }
  }

  /**
   * Drains and reloads: stops claiming, waits for every running job to end and its outcome to be
   * written, replaces the worker thread pool, and claims again (unless paused or detached
   * meanwhile). Nothing is handed back, so no job is lost or run twice.
   */
  async restart(): Promise<void> {
    this.draining = true
    try {
      await this.settleAll()
      const pool = this.pool
      this.pool = undefined
      await pool?.destroy()
    } finally {
      this.draining = false
      this.wake()
    }
  }

  /** waits until no handler runs and no outcome waits for its write */
  private async settleAll() {
    await this.claiming
    while (this.running.size || this.settling.size) {
      const entries = [...this.running.values(), ...this.settling.values()]
      // an outcome kept through an outage resolves once the database is back and it is written
      await Promise.allSettled(entries.map((e) => e.done))
    }
  }

  /**
   * Stops claiming for good (the node was revoked) and hands back what runs here, as a shutdown
   * does, without counting the attempt: other processes retry those jobs. The process goes on
   * serving requests.
   */
  async detach(deadlineMs = 10_000): Promise<void> {
    if (this.detached) return
    this.detached = true
    await this.claiming
    const entries = [...this.running.values(), ...this.settling.values()]
    for (const e of this.running.values()) this.stop(e, 'shutdown')
    await this.handBack(entries, deadlineMs)
  }

  /** called for NOTIFY from another process */
  wake(): void {
    if (this.stopped) return
    // a single slot freed while the others run (short jobs ending one by one): wait a moment so
    // that the slots freed meanwhile share one claim instead of one claim each
    const free = this.concurrency - this.running.size
    if (free > 0 && free < this.concurrency / 4 && this.running.size > 0) {
      this.gatherTimer ??= setTimeout(() => {
        this.gatherTimer = undefined
        this.claimNow()
      }, GATHER_MS)
      return
    }
    this.claimNow()
  }

  private claimNow(): void {
    if (this.stopped) return
    if (this.claiming) {
      this.wakeAgain = true
      return
    }
    this.claiming = this.claimAndRun()
      .then(() => {
        this.lastRoundAt = Date.now()
        if (this.outage) this.log.warn({ pausedMs: Date.now() - this.outage.since }, 'database writable again; jobs resume')
        this.outage = undefined
      })
      .catch((err) => {
        const fault = faultOf(err)
        if (!fault) return this.log.error({ err }, 'claiming jobs failed')
        // an outage (or a database on a full disk) pauses the runner: nothing is claimed or failed until a round succeeds
        if (!this.outage) this.log.warn({ err: { message: err?.message, code: err?.code }, fault }, 'the database cannot be written; jobs paused until it can')
        this.outage ??= { since: Date.now() }
        this.lastRoundAt = Date.now() // a paused runner is not a stuck one; readiness reports the database itself
      })
      .finally(() => {
        this.claiming = undefined
        if (this.wakeAgain) {
          this.wakeAgain = false
          this.claimNow()
        }
      })
  }

  private async claimAndRun() {
    await this.writeKept() // throws while the database is still away: nothing is claimed meanwhile
    if (this.paused || this.draining || this.detached) return
    if (this.recurringDue) {
      // once per start (again after a failed round): the chains of recurring jobs exist
      await this.queue.ensureRecurring([...this.jobs.values()].filter((j) => j.recurring && this.isPluginActive(j.plugin)).map((j) => j.type))
      this.recurringDue = false
    }
    const free = this.concurrency - this.running.size
    if (free <= 0) return
    // outcomes wait for their write: run no further ahead of the database (the write's end wakes us)
    if (this.settling.size >= this.concurrency * 4) return
    const types = [...this.jobs.values()]
      .filter((j) => this.isPluginActive(j.plugin))
      .filter((j) => !this.accepted || this.accepted.has(j.type))
      .filter((j) => !j.concurrency || this.countRunning(j.type) < j.concurrency)
      .map((j) => j.type)
    const sweep = this.sweepDue
    this.sweepDue = false
    const token = `${this.workerId}:${(++this.claims).toString(36)}`
    // leases this runner still holds may have lapsed during an outage: never swept here
    const held = [...this.running.values(), ...this.settling.values()].map((e) => e.token)
    const rows = await this.queue.claim(token, types, free, this.config.jobs.leaseMs, sweep, held)
    // close() or detach() began while the claim was under way: hand the jobs back instead of starting them
    if (this.stopped || this.detached) return this.queue.release(rows.map((r) => ({ id: r.id, token })))
    const over: Array<{ id: number; token: string }> = []
    for (const row of rows) {
      const def = this.jobs.get(row.type)!
      // a run of this job is still here though its row was handed back meanwhile (the view farm
      // released this node's jobs, or its lease lapsed): that run has lost its lease and stops;
      // the job goes back for the next claim instead of running twice in this process
      const earlier = this.running.get(row.id) ?? this.settling.get(row.id)
      if (earlier) {
        if (this.running.get(row.id) === earlier) this.stop(earlier, 'lease-lost')
        over.push({ id: row.id, token })
        continue
      }
      if (def.concurrency && this.countRunning(row.type) >= def.concurrency) over.push({ id: row.id, token })
      else this.execute(row, def, token)
    }
    await this.queue.release(over)
  }

  private countRunning(type: string) {
    let n = 0
    for (const r of this.running.values()) if (r.row.type === type) n++
    return n
  }

  private execute(row: JobRow, def: RegisteredJob, token: string) {
    const abort = new AbortController()
    const entry: Running = { row, token, abort, progress: { progress: row.progress, success: row.success, failure: row.failure }, done: Promise.resolve() }
    const log = this.log.child({ job: row.id, type: row.type, attempt: row.attempts })
    const container = this.container
    let scope: AwilixContainer | undefined
    // most handlers of a busy queue never touch DI: the scope is made on first use
    const scoped = () => (scope ??= container.createScope())
    const ctx: JobContext = {
      id: row.id,
      type: row.type,
      payload: row.payload,
      attempt: row.attempts,
      signal: abort.signal,
      progress: (fraction) => (entry.progress.progress = Math.max(0, Math.min(1, fraction))),
      count: (success, failure) => Object.assign(entry.progress, { success, failure }),
      runWorker: (file, task, options) => this.workerPool().run(task, { filename: fileURLToPath(file), signal: options?.cooperative ? undefined : abort.signal }),
      get scope() {
        return scoped()
      },
      get em() {
        return scoped().resolve<JobContext['em']>(coreServices.em.id)
      },
      resolve: (ref: string | ServiceRef<unknown>) => scoped().resolve(typeof ref === 'string' ? ref : ref.id),
      log,
    }
    this.running.set(row.id, entry)
    log.info('job started')
    entry.done = (async () => {
      let change: SettleChange | null
      let err: Error | undefined
      try {
        if (row.cancel_requested) throw Object.assign(new Error('cancelled'), { name: 'AbortError' })
        const result = await def.handler(ctx)
        // work that completed counts even if a stop arrived meanwhile; the lease fence settles races
        change = { state: 'finished', result: result ?? null, error: null, progress: entry.progress }
      } catch (e) {
        err = e as Error
        change = this.failure(entry, err)
      }
      this.running.delete(row.id)
      if (!change) return this.wake() // lease lost or shutdown: another run, here or elsewhere, takes over
      this.settling.set(row.id, entry)
      this.wake()
      const settled = await this.complete(entry, change) // flush() takes the entry out of `settling`
      if (!settled) return
      if (change.state === 'finished') log.info('job finished')
      else if (change.state === 'cancelled') log.info('job cancelled')
      else if (change.uncount)
        log.warn({ err: { message: err?.message, code: (err as any)?.code }, fault: faultOf(err), retryInMs: change.runAt!.getTime() - Date.now() }, 'job met a fault of the machine; handed back without counting the attempt')
      else if (change.state === 'queued') log.warn({ err, retryInMs: change.runAt!.getTime() - Date.now() }, 'job failed; will retry')
      else log.error({ err }, 'job failed')
    })()
  }

  /** what a handler's error makes of the job; null when nothing is to be written */
  private failure(entry: Running, err: Error): SettleChange | null {
    const { row } = entry
    const reason = entry.stopReason ?? (row.cancel_requested ? 'cancelled' : undefined)
    if (reason === 'lease-lost' || reason === 'shutdown') return null
    if (reason === 'cancelled') return { state: 'cancelled', error: 'cancelled on request', progress: entry.progress }
    // the database went away or a disk is full: not the job's failure, handed back with no attempt counted
    const fault = faultOf(err)
    if (fault) {
      const retryInMs = fault === 'insufficient_storage' ? this.config.jobs.diskFullRetryMs : DATABASE_RETRY_MS
      return { state: 'queued', runAt: new Date(Date.now() + retryInMs), uncount: true, progress: entry.progress }
    }
    // the row's limit: set from the definition at enqueue unless the caller chose one (claim() uses it too)
    const message = err?.message || String(err)
    if (row.attempts < row.max_attempts && !(err as any)?.permanent) {
      const delay = Math.min(1000 * 2 ** row.attempts, MAX_BACKOFF_MS)
      return { state: 'queued', error: message, runAt: new Date(Date.now() + delay), progress: entry.progress }
    }
    return { state: 'failed', error: message, progress: entry.progress }
  }

  /** joins the next batch of outcomes; true once written, false when the job was no longer this claim's */
  private complete(entry: Running, change: SettleChange): Promise<boolean> {
    return new Promise((resolve) => {
      this.pending.push({ entry, change, resolve })
      this.scheduleFlush()
    })
  }

  /**
   * One write at a time: outcomes that arrive while it is under way wait and go together in the
   * next one (as a database's group commit does), those of one turn of the event loop go together.
   */
  private scheduleFlush() {
    if (this.flushing || this.flushScheduled) return
    this.flushScheduled = true
    setImmediate(() => {
      this.flushScheduled = false
      this.flushing = this.flush().finally(() => {
        this.flushing = undefined
        if (this.pending.length) this.scheduleFlush()
      })
    })
  }

  private async flush() {
    // A heartbeat under way may hold some of these rows (a handler that ended after it was sent).
    // Not waiting for it keeps a stuck heartbeat from holding up every outcome; should the two lock
    // shared rows in opposite orders, PostgreSQL ends one as a deadlock and the loop below writes again.
    const batch = this.pending.splice(0, MAX_BATCH)
    if (!batch.length) return
    for (const c of batch) this.inFlight.add(c.entry.row.id)
    const jobs = this.jobsOf(batch)
    for (let attempt = 1; ; attempt++) {
      try {
        const done = await this.queue.settleMany(jobs)
        this.settled(batch, done)
        return
      } catch (err) {
        for (const c of batch) this.inFlight.delete(c.entry.row.id)
        if (faultOf(err) && !this.stopped) {
          // the database is away: the outcomes are kept (their jobs still held) and written first
          // by the next claim round that reaches it, before anything new is claimed
          if (!this.kept.length) this.log.warn({ err: { message: (err as Error)?.message, code: (err as any)?.code }, jobs: batch.length }, 'the database cannot be written; outcomes of jobs are recorded once it can')
          this.kept.push(...batch)
          return
        }
        // fenced by the claim tokens, so writing again is safe; a write that keeps failing (not an
        // outage, or while closing) must not crash the process: the jobs are no longer held here,
        // their leases lapse and they run again
        if (attempt < 4 && !this.stopped) {
          this.log.warn({ err, attempt }, 'recording the outcome of jobs failed; trying again')
          await new Promise((r) => setTimeout(r, 50 * 2 ** attempt))
          continue
        }
        this.log.error({ err, jobs: jobs.map((j) => j.id) }, 'recording the outcome of jobs failed')
        this.settled(batch, batch.map(() => false))
        return
      }
    }
  }

  private jobsOf(batch: Completion[]) {
    return batch.map(({ entry, change }) => ({ id: entry.row.id, token: entry.token, row: entry.row, ...change }))
  }

  /** a batch's write ended: each completion learns whether it was this claim's, and its slot is free */
  private settled(batch: Completion[], done: boolean[]) {
    batch.forEach((c, i) => {
      this.inFlight.delete(c.entry.row.id)
      c.resolve(done[i])
    })
    // the slots are free now, not once each job's own continuation ran (the claim below counts them)
    for (const c of batch) if (this.settling.get(c.entry.row.id) === c.entry) this.settling.delete(c.entry.row.id)
    this.wake()
  }

  /** the outcomes kept through an outage, in one batch; throws (and keeps them) while it lasts */
  private async writeKept() {
    if (!this.kept.length) return
    const batch = this.kept.splice(0)
    for (const c of batch) this.inFlight.add(c.entry.row.id)
    let done: boolean[]
    try {
      done = await this.queue.settleMany(this.jobsOf(batch))
    } catch (err) {
      for (const c of batch) this.inFlight.delete(c.entry.row.id)
      this.kept.unshift(...batch)
      throw err
    }
    this.log.info({ jobs: batch.length }, 'outcomes kept through the outage recorded')
    this.settled(batch, done)
  }

  /**
   * One statement extends the lease of every job this process holds and writes their progress,
   * beside a completion under way (which may take long: a user's jobs write their events with it)
   * but never on its rows.
   */
  private heartbeat() {
    if (this.beating) return
    const entries = [...this.running.values(), ...[...this.settling.values()].filter((e) => !this.inFlight.has(e.row.id))]
    if (!entries.length) return
    this.beating = this.beat(entries).finally(() => (this.beating = undefined))
  }

  private async beat(entries: Running[]) {
    try {
      const held = await this.queue.heartbeat(entries.map((e) => ({ id: e.row.id, token: e.token, ...e.progress })), this.config.jobs.leaseMs)
      for (const e of entries) {
        // a handler that ended meanwhile: its outcome's write decides, fenced like this one
        if (this.running.get(e.row.id) !== e) continue
        const beat = held.get(e.row.id)
        if (!beat) this.stop(e, 'lease-lost')
        else if (beat.cancelRequested) this.stop(e, 'cancelled')
      }
      this.heartbeatFailing = false
    } catch (err) {
      // an outage: the leases are extended again when the database returns (this runner's sweep
      // leaves them alone meanwhile; another process may take a lapsed one, and the next beat says so)
      if (!this.heartbeatFailing) this.log.warn({ err: { message: (err as Error)?.message, code: (err as any)?.code } }, 'heartbeat failed')
      this.heartbeatFailing = true
    }
  }

  private stop(entry: Running, reason: NonNullable<Running['stopReason']>) {
    if (entry.stopReason) return
    entry.stopReason = reason
    entry.abort.abort(new Error(reason))
  }

  /** waits for the stopped handlers (up to the deadline), then releases what is still held */
  private async handBack(entries: Running[], deadlineMs: number) {
    await Promise.race([Promise.allSettled(entries.map((e) => e.done)), new Promise((r) => setTimeout(r, deadlineMs).unref())])
    // what is still held (a handler past the deadline, an outcome not written) goes back; the rest is ended already
    await this.queue.release(entries.map((e) => ({ id: e.row.id, token: e.token }))).catch((err) => this.log.error({ err }, 'releasing jobs failed'))
  }

  private workerPool(): Piscina {
    this.pool ??= new Piscina({ maxThreads: this.config.jobs.threads, minThreads: 0, idleTimeout: 30_000 })
    return this.pool
  }

  /** Stops claiming, aborts what runs, and hands it back to the queue for another process or the next start. */
  async close(deadlineMs = 10_000): Promise<void> {
    if (this.stopped && this.running.size === 0 && this.settling.size === 0) return
    this.stopped = true
    clearInterval(this.timer)
    clearInterval(this.heartbeatTimer)
    clearTimeout(this.gatherTimer)
    this.unsubscribe?.()
    await this.claiming // a claim under way hands its jobs back itself
    const entries = [...this.running.values(), ...this.settling.values()]
    for (const e of this.running.values()) this.stop(e, 'shutdown')
    // outcomes still owed from an outage: a last try; otherwise they go back to the queue below (or,
    // with the database still away, their leases lapse and another process runs the jobs again)
    await this.writeKept().catch((err) => {
      this.log.error({ err: { message: err?.message, code: err?.code }, jobs: this.kept.map((c) => c.entry.row.id) }, 'recording the outcome of jobs failed')
      const lost = this.kept.splice(0)
      this.settled(lost, lost.map(() => false))
    })
    await this.handBack(entries, deadlineMs)
    await this.flushing
    await this.beating
    await this.pool?.destroy()
    this.pool = undefined
  }
}
