import { refreshAssets } from './migrations.js'

import type { Logger } from 'pino'
import type { Knex } from '../../core/index.js'

/** documents rebuilt per transaction: a crash or a concurrent sweeper loses at most this batch's work, never its marks */
const BATCH = 2000

/**
 * Rebuilds the documents that bulk value changes marked dirty (`search_dirty`, PostgreSQL; see
 * DEFER_ABOVE in migrations.ts). Each batch takes its marks with `FOR UPDATE SKIP LOCKED` and deletes
 * them in the transaction that rebuilds the documents: two processes share the work, and a crash
 * rolls the marks back for the next sweep. Returns how many documents it rebuilt.
 */
export async function sweepDirty(knex: Knex): Promise<number> {
  let n = 0
  for (;;) {
    const done = await knex.transaction(async (trx) => {
      const taken = await trx.raw(
        `DELETE FROM search_dirty WHERE (kind, object_id) IN (SELECT kind, object_id FROM search_dirty ORDER BY kind, object_id LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING object_id`,
        [BATCH],
      )
      const ids = (taken.rows as Array<{ object_id: number }>).map((r) => Number(r.object_id))
      await refreshAssets(trx, 'postgresql', ids)
      return ids.length
    })
    n += done
    if (done < BATCH) return n
  }
}

/**
 * Sweeps every `everyMs` while the process runs (each process: the marks are shared safely), so a
 * bulk update is found by its new values within about a second of its commit. A timer, not a job per
 * bulk update: the trigger that marks cannot enqueue, and the marks themselves are the durable queue.
 */
export class DirtySweeper {
  private timer: NodeJS.Timeout | null = null
  private running: Promise<unknown> | null = null

  constructor(
    private readonly knex: Knex,
    private readonly log: Logger,
    private readonly everyMs = 500,
  ) {}

  start(): void {
    if (this.timer) return
    this.timer = setInterval(() => void this.sweepNow(), this.everyMs)
    this.timer.unref()
  }

  /** one sweep unless one is under way (then that one) */
  sweepNow(): Promise<unknown> {
    this.running ??= sweepDirty(this.knex)
      .catch((err: Error) => this.log.warn({ err: err.message }, 'search: sweeping dirty documents failed; retried on the next tick'))
      .finally(() => (this.running = null))
    return this.running
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    await this.running
  }
}
