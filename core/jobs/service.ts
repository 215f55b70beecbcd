import type { Knex } from '@mikro-orm/knex'
import { MamError } from '../errors.js'
import { check } from '../http/validation.js'
import { jobTypeName, type JobType } from './define.js'
import type { RegisteredJob } from '../plugin/loader.js'
import type { JobQueue } from './queue.js'
import type { JobRunnerControl } from './runner.js'
import type { EnqueueOptions, JobFilter, JobRow } from './types.js'

/** What handlers and plugins use (resolved as `jobs`): enqueue by type, read, cancel. */
export class JobService {
  private ownRunner?: JobRunnerControl

  constructor(
    private readonly queue: JobQueue,
    private readonly definitions: Map<string, RegisteredJob>,
  ) {}

  /** the runtime hands over this process's runner (once, at boot) */
  attachRunner(runner: JobRunnerControl): void {
    this.ownRunner = runner
  }

  /**
   * This process's job runner, to steer (plugins/view-farms): undefined in a process built without
   * one; `state().started` is false in a process that does not run jobs (`runJobs: false`).
   */
  runner(): JobRunnerControl | undefined {
    return this.ownRunner
  }

  /** hands back the jobs a runner holds, for other processes to retry (see JobQueue.releaseWorker) */
  releaseWorker(workerId: string): Promise<number[]> {
    return this.queue.releaseWorker(workerId)
  }

  /** tells every process's runner control listeners about `topic` (see JobQueue.notifyControl) */
  notifyControl(topic: string): Promise<void> {
    return this.queue.notifyControl(topic)
  }

  /**
   * Queues one job. A type defined with `defineJob` has its payload checked against the schema
   * first: a payload that does not match is a 422 naming the fields (`payload[projectId]`) and
   * nothing is written.
   */
  async enqueue<P>(job: JobType<P> | string, payload: P, options?: EnqueueOptions): Promise<JobRow> {
    const type = jobTypeName(job)
    this.checkPayload(type, payload)
    return this.queue.enqueue(type, this.kindOf(type), payload, this.withLimit(type, options))
  }

  /**
   * many jobs in few statements (a batch of registered files, a project's assets); all are checked
   * before any is written. `within.trx`: written in that transaction, as `EnqueueOptions.trx`.
   */
  async enqueueMany(jobs: Array<{ type: JobType<unknown> | string; payload: unknown; options?: Omit<EnqueueOptions, 'trx'> }>, within: { trx?: Knex } = {}): Promise<JobRow[]> {
    const list = jobs.map((j) => ({ ...j, type: jobTypeName(j.type) }))
    for (const j of list) this.checkPayload(j.type, j.payload)
    return this.queue.enqueueMany(list.map((j) => ({ type: j.type, kind: this.kindOf(j.type), payload: j.payload, options: this.withLimit(j.type, j.options) })), within.trx)
  }

  private checkPayload(type: string, payload: unknown) {
    const compiled = this.definition(type).compiledPayload
    if (!compiled) return
    const errors = check(compiled, payload, true, 'payload')
    if (errors.length) throw new MamError('invalid_parameters', `job ${type}: the payload does not match its schema: ${errors.map((e) => `${e.param} ${e.message}`).join('; ')}`, { errors })
  }

  /**
   * A job that drains a table (sends what is due) is queued to run by `options.runAt`, written with
   * `db` so it commits with the rows it will process; an already queued one that runs by then serves.
   * See `JobQueue.ensureQueued`.
   */
  async ensureQueued<P>(db: Knex, job: JobType<P> | string, payload: P, options?: EnqueueOptions): Promise<void> {
    const type = jobTypeName(job)
    this.checkPayload(type, payload)
    return this.queue.ensureQueued(db, type, this.kindOf(type), payload, this.withLimit(type, options))
  }

  private definition(type: string) {
    const def = this.definitions.get(type)
    if (!def) throw new MamError('internal', `unknown job type "${type}"`)
    return def
  }

  private kindOf(type: string) {
    return this.definition(type).kind ?? 'generic'
  }

  // an explicit `maxAttempts: undefined` must not hide the definition's limit
  private withLimit(type: string, options?: EnqueueOptions): EnqueueOptions {
    return { ...options, maxAttempts: options?.maxAttempts ?? this.definition(type).maxAttempts }
  }

  /** the queued jobs of these projects follow a new encoding priority; returns how many changed */
  reprioritise(projectIds: number[], priority: number): Promise<number> {
    return this.queue.reprioritise(projectIds, priority)
  }

  get(id: number): Promise<JobRow | null> {
    return this.queue.get(id)
  }

  /** the newest `limit` jobs matching every given column, e.g. `{ edit_id, user_id }` */
  list(filter: JobFilter, limit = 50): Promise<JobRow[]> {
    return this.queue.list(filter, limit)
  }

  /** a queued run of a recurring job that is cancelled makes way for the next one (`api.jobs.schedule`) */
  async cancel(id: number): Promise<JobRow | null> {
    const job = await this.queue.cancel(id)
    if (job?.state === 'cancelled' && this.definitions.get(job.type)?.recurring) await this.queue.ensureRecurring([job.type])
    return job
  }
}
