import type { EntityManager } from '../../core/index.js'

/**
 * Limits other plugins put on the number of user accounts (the platform plugin's license:
 * `max_users`). Added in the plugin's `start`. `POST /users` and `POST /users/invite` run them in
 * the transaction that creates the account, before it is written; a limit throws a MamError to
 * refuse, and may lock inside that transaction so that two creations cannot both pass one count.
 */
export type UserLimit = (em: EntityManager) => Promise<void>

export class UserLimits {
  private readonly limits: UserLimit[] = []
  add(limit: UserLimit): void {
    this.limits.push(limit)
  }
  async check(em: EntityManager): Promise<void> {
    for (const limit of this.limits) await limit(em)
  }
}
