import type { Knex } from '@mikro-orm/knex'
import { MamError } from '../errors.js'
import type { RegisteredJob } from '../plugin/loader.js'
import type { JobQueue } from './queue.js'
import type { EnqueueOptions, JobRow } from './types.js'

/** What handlers and plugins use (resolved as `jobs`): enqueue by type, read, cancel. */
export class JobService {
  constructor(
    private readonly queue: JobQueue,
    private readonly definitions: Map<string, RegisteredJob>,
  ) {}

  enqueue<P>(type: string, payload: P, options?: EnqueueOptions): Promise<JobRow> {
    return this.queue.enqueue(type, this.kindOf(type), payload, this.withLimit(type, options))
  }

  /** many jobs in few statements (a batch of registered files, a project's assets) */
  enqueueMany(jobs: Array<{ type: string; payload: unknown; options?: EnqueueOptions }>): Promise<JobRow[]> {
    return this.queue.enqueueMany(jobs.map((j) => ({ type: j.type, kind: this.kindOf(j.type), payload: j.payload, options: this.withLimit(j.type, j.options) })))
  }

  /**
   * A job that drains a table (sends what is due) is queued to run by `options.runAt`, written with
   * `db` so it commits with the rows it will process; an already queued one that runs by then serves.
   * See `JobQueue.ensureQueued`.
   */
  ensureQueued<P>(db: Knex, type: string, payload: P, options?: EnqueueOptions): Promise<void> {
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

  cancel(id: number): Promise<JobRow | null> {
    return this.queue.cancel(id)
  }
}
