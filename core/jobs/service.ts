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
    const def = this.definitions.get(type)
    if (!def) throw new MamError('internal', `unknown job type "${type}"`)
    // an explicit `maxAttempts: undefined` must not hide the definition's limit
    return this.queue.enqueue(type, def.kind ?? 'generic', payload, { ...options, maxAttempts: options?.maxAttempts ?? def.maxAttempts })
  }

  get(id: number): Promise<JobRow | null> {
    return this.queue.get(id)
  }

  cancel(id: number): Promise<JobRow | null> {
    return this.queue.cancel(id)
  }
}
