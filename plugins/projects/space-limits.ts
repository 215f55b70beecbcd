import type { Knex } from '../../core/index.js'

/**
 * Limits other plugins put on the bytes stored in projects beyond project and team quotas (the
 * platform plugin's license: `max_storage_bytes`). Added in the plugin's `start`; a limit throws a
 * MamError to refuse. `ahead` answers early, before an upload's bytes are placed; `charged` runs in
 * the transaction that adds the bytes to a project's size (`chargeSpace`), after that update, and is
 * the check that holds when uploads run side by side.
 */
export interface SpaceLimit {
  ahead?(knex: Knex, extra: number): Promise<void>
  charged?(trx: Knex, extra: number): Promise<void>
}

export class SpaceLimits {
  private readonly limits: SpaceLimit[] = []
  add(limit: SpaceLimit): void {
    this.limits.push(limit)
  }
  async ahead(knex: Knex, extra: number): Promise<void> {
    for (const limit of this.limits) await limit.ahead?.(knex, extra)
  }
  async charged(trx: Knex, extra: number): Promise<void> {
    for (const limit of this.limits) await limit.charged?.(trx, extra)
  }
}
