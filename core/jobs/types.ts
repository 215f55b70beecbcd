import type { AwilixContainer } from 'awilix'
import type { Logger } from 'pino'
import type { EntityManager, Knex } from '../db/orm.js'
import type { ServiceRef } from '../plugin/services.js'

export type JobState = 'queued' | 'running' | 'finished' | 'failed' | 'cancelled'
/** which status endpoint shows the job: /status, /asset_status or /copy_to_status */
export type JobKind = 'generic' | 'project' | 'asset' | 'copy_to'

export interface JobContext<P = unknown> {
  id: number
  type: string
  payload: P
  /** 1 on the first run; higher when a crashed or failed run is retried */
  attempt: number
  /** aborted on cancellation, on shutdown, and when this process lost the job's lease */
  signal: AbortSignal
  /** 0..1; written with the next heartbeat */
  progress(fraction: number): void
  /** counts shown by the asset status endpoints */
  count(success: number, failure: number): void
  /**
   * Runs a CPU-bound function in a piscina worker thread; pass file paths, never file contents.
   * A cancellation (or a shutdown) ends the task by ending its thread: the promise rejects at once,
   * while reads the thread had started may still run. A task that reads a descriptor the job closes
   * afterwards passes `{ cooperative: true }`: it is not ended from outside, it watches the job's
   * cancellation itself (`stopFlagOf(ctx.signal)`, a shared flag) and settles once its reads did, so the job closes nothing in use.
   */
  runWorker<T = unknown>(file: URL, task: unknown, options?: { cooperative?: boolean }): Promise<T>
  /** job-scoped DI container with its own EntityManager */
  scope: AwilixContainer
  em: EntityManager
  /** a service by ref (of the core, the job's plugin or a plugin it depends on) */
  resolve<T>(ref: ServiceRef<T>): T
  /** @deprecated legacy string keys: resolve through a ServiceRef */
  resolve<T = any>(name: string): T
  log: Logger
}

export interface JobDefinition<P = unknown> {
  kind?: JobKind
  /**
   * Does the work. Jobs run at least once: a run cut short by a crash is repeated, so the handler
   * must be idempotent (write to a temporary name, rename into place, check before acting).
   */
  handler(ctx: JobContext<P>): Promise<unknown>
  /** attempts before the job is marked failed (default: config.jobs.maxAttempts) */
  maxAttempts?: number
  /** at most this many of this type run at once in one process */
  concurrency?: number
}

/** a job that runs again and again (`api.jobs.schedule`) */
export interface Recurrence {
  /** the next run is queued to start this long after a run ends */
  everyMs: number
  /** when no run is queued or running (first start, after a cancel): the next starts this long from then */
  firstAfterMs: number
}

export interface EnqueueOptions {
  priority?: number
  runAt?: Date
  maxAttempts?: number
  userId?: number | null
  projectId?: number | null
  editId?: number | null
  assetId?: number | null
  /**
   * written in this transaction: the job exists only if it commits, and runners wake at the commit.
   * For a job that must follow a change (a refresh of what the change touched), queued atomically with it.
   */
  trx?: Knex
}

export interface JobRow {
  id: number
  type: string
  kind: JobKind
  state: JobState
  payload: unknown
  result: unknown
  error: string | null
  progress: number
  attempts: number
  max_attempts: number
  priority: number
  cancel_requested: boolean
  user_id: number | null
  project_id: number | null
  edit_id: number | null
  asset_id: number | null
  success: number
  failure: number
  created_at: Date
  updated_at: Date
  started_at: Date | null
  finished_at: Date | null
}

type Filterable = Pick<JobRow, 'type' | 'kind' | 'state' | 'user_id' | 'project_id' | 'edit_id' | 'asset_id'>
/** columns a job query matches (JobService.list): one value, or any of a list */
export type JobFilter = { [K in keyof Filterable]?: Filterable[K] | Filterable[K][] }
