import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import type { AwilixContainer } from 'awilix'
import type { Logger } from 'pino'
import { Piscina } from 'piscina'
import type { MamConfig } from '../config.js'
import type { EventBus } from '../events.js'
import type { JobQueue } from './queue.js'
import type { JobContext, JobRow } from './types.js'
import type { RegisteredJob } from '../plugin/loader.js'
import type { ServiceRef } from '../plugin/services.js'

interface Running {
  row: JobRow
  abort: AbortController
  /** why `abort` fired: the handler's outcome is recorded accordingly */
  stopReason?: 'cancelled' | 'shutdown' | 'lease-lost'
  progress: { progress: number; success: number; failure: number }
  done: Promise<void>
}

const MAX_BACKOFF_MS = 5 * 60_000

/**
 * Claims jobs from the durable queue and runs them: handlers on the main thread (they own DB
 * access), CPU work in a shared piscina pool. Wakes on enqueue in this process, on NOTIFY from
 * other PostgreSQL clients, and on a poll timer as the fallback that also picks up lapsed leases.
 */
export class JobRunner {
  readonly workerId = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
  private readonly running = new Map<number, Running>()
  private pool?: Piscina
  private timer?: NodeJS.Timeout
  private stopped = true
  private claiming?: Promise<void>
  private wakeAgain = false
  /** the next claim first fails jobs whose lease lapsed too often (set at start and by the poll timer) */
  private sweepDue = true
  private unsubscribe?: () => void
  /** when the last claim round ended (readiness: a runner whose rounds stopped is stuck) */
  private lastRoundAt = 0

  constructor(
    private readonly queue: JobQueue,
    private readonly jobs: Map<string, RegisteredJob>,
    private readonly container: AwilixContainer,
    private readonly config: MamConfig,
    private readonly events: EventBus,
    private readonly log: Logger,
    private readonly isPluginActive: (plugin: string) => boolean,
  ) {}

  start(): void {
    if (!this.stopped) return
    this.stopped = false
    this.unsubscribe = this.events.on('jobs.enqueued', () => this.wake())
    this.timer = setInterval(() => {
      this.sweepDue = true
      this.wake()
    }, this.config.jobs.pollMs)
    this.timer.unref()
    this.wake()
  }

  /** whether this process runs jobs, how many it runs now, and when its last claim round ended (0: none yet) */
  state(): { started: boolean; running: number; lastRoundAt: number } {
    return { started: !this.stopped, running: this.running.size, lastRoundAt: this.lastRoundAt }
  }

  /** called for NOTIFY from another process */
  wake(): void {
    if (this.stopped) return
    if (this.claiming) {
      this.wakeAgain = true
      return
    }
    this.claiming = this.claimAndRun()
      .then(() => {
        this.lastRoundAt = Date.now()
      })
      .catch((err) => this.log.error({ err }, 'claiming jobs failed'))
      .finally(() => {
        this.claiming = undefined
        if (this.wakeAgain) {
          this.wakeAgain = false
          this.wake()
        }
      })
  }

  private async claimAndRun() {
    const free = this.config.jobs.concurrency - this.running.size
    if (free <= 0) return
    const types = [...this.jobs.values()]
      .filter((j) => this.isPluginActive(j.plugin))
      .filter((j) => !j.concurrency || this.countRunning(j.type) < j.concurrency)
      .map((j) => j.type)
    const sweep = this.sweepDue
    this.sweepDue = false
    const rows = await this.queue.claim(this.workerId, types, free, this.config.jobs.leaseMs, sweep)
    // close() began while the claim was under way: hand the jobs back instead of starting them
    if (this.stopped) return this.queue.release(this.workerId, rows.map((r) => r.id))
    for (const row of rows) {
      const def = this.jobs.get(row.type)!
      if (def.concurrency && this.countRunning(row.type) >= def.concurrency) {
        await this.queue.release(this.workerId, [row.id])
        continue
      }
      this.execute(row, def)
    }
  }

  private countRunning(type: string) {
    let n = 0
    for (const r of this.running.values()) if (r.row.type === type) n++
    return n
  }

  private execute(row: JobRow, def: RegisteredJob) {
    const abort = new AbortController()
    const entry: Running = { row, abort, progress: { progress: row.progress, success: row.success, failure: row.failure }, done: Promise.resolve() }
    const log = this.log.child({ job: row.id, type: row.type, attempt: row.attempts })
    const scope = this.container.createScope()
    const ctx: JobContext = {
      id: row.id,
      type: row.type,
      payload: row.payload,
      attempt: row.attempts,
      signal: abort.signal,
      progress: (fraction) => (entry.progress.progress = Math.max(0, Math.min(1, fraction))),
      count: (success, failure) => Object.assign(entry.progress, { success, failure }),
      runWorker: (file, task) => this.workerPool().run(task, { filename: fileURLToPath(file), signal: abort.signal }),
      scope,
      get em() {
        return scope.resolve<JobContext['em']>('em')
      },
      resolve: (ref: string | ServiceRef<unknown>) => scope.resolve(typeof ref === 'string' ? ref : ref.id),
      log,
    }
    const heartbeatMs = Math.max(50, Math.min(this.config.jobs.leaseMs / 3, 2000))
    const heartbeat = setInterval(async () => {
      try {
        const beat = await this.queue.heartbeat(row.id, this.workerId, this.config.jobs.leaseMs, entry.progress)
        if (!beat) this.stop(entry, 'lease-lost')
        else if (beat.cancelRequested) this.stop(entry, 'cancelled')
      } catch (err) {
        log.warn({ err }, 'heartbeat failed')
      }
    }, heartbeatMs)
    this.running.set(row.id, entry)
    log.info('job started')
    entry.done = (async () => {
      try {
        if (row.cancel_requested) throw Object.assign(new Error('cancelled'), { name: 'AbortError' })
        const result = await def.handler(ctx)
        // work that completed counts even if a stop arrived meanwhile; the lease fence settles races
        await this.queue.settle(row.id, this.workerId, { state: 'finished', result: result ?? null, error: null, progress: entry.progress })
        log.info('job finished')
      } catch (err) {
        // a failed write (database unreachable) must not crash the process: the lease lapses and the job is retried
        await this.recordFailure(entry, err as Error, log).catch((e) => log.error({ err: e }, 'recording the outcome of a job failed'))
      } finally {
        clearInterval(heartbeat)
        this.running.delete(row.id)
        this.wake()
      }
    })()
  }

  private async recordFailure(entry: Running, err: Error, log: Logger) {
    const { row } = entry
    const reason = entry.stopReason ?? (row.cancel_requested ? 'cancelled' : undefined)
    if (reason === 'lease-lost' || reason === 'shutdown') return // another run, here or elsewhere, takes over
    if (reason === 'cancelled') {
      await this.queue.settle(row.id, this.workerId, { state: 'cancelled', error: 'cancelled on request', progress: entry.progress })
      log.info('job cancelled')
      return
    }
    // the row's limit: set from the definition at enqueue unless the caller chose one (claim() uses it too)
    const maxAttempts = row.max_attempts
    const message = err?.message || String(err)
    if (row.attempts < maxAttempts && !(err as any)?.permanent) {
      const delay = Math.min(1000 * 2 ** row.attempts, MAX_BACKOFF_MS)
      await this.queue.settle(row.id, this.workerId, { state: 'queued', error: message, runAt: new Date(Date.now() + delay), progress: entry.progress })
      log.warn({ err, retryInMs: delay }, 'job failed; will retry')
    } else {
      await this.queue.settle(row.id, this.workerId, { state: 'failed', error: message, progress: entry.progress })
      log.error({ err }, 'job failed')
    }
  }

  private stop(entry: Running, reason: NonNullable<Running['stopReason']>) {
    if (entry.stopReason) return
    entry.stopReason = reason
    entry.abort.abort(new Error(reason))
  }

  private workerPool(): Piscina {
    this.pool ??= new Piscina({ maxThreads: this.config.jobs.threads, minThreads: 0, idleTimeout: 30_000 })
    return this.pool
  }

  /** Stops claiming, aborts what runs, and hands it back to the queue for another process or the next start. */
  async close(deadlineMs = 10_000): Promise<void> {
    if (this.stopped && this.running.size === 0) return
    this.stopped = true
    clearInterval(this.timer)
    this.unsubscribe?.()
    await this.claiming // a claim under way hands its jobs back itself
    const entries = [...this.running.values()]
    for (const e of entries) this.stop(e, 'shutdown')
    await Promise.race([Promise.allSettled(entries.map((e) => e.done)), new Promise((r) => setTimeout(r, deadlineMs).unref())])
    await this.queue.release(this.workerId, entries.map((e) => e.row.id)).catch((err) => this.log.error({ err }, 'releasing jobs failed'))
    await this.pool?.destroy()
    this.pool = undefined
  }
}
