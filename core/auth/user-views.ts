import type { EntityManager } from '../db/orm.js'
import type { Principal } from './principal.js'
import { serializeUser, type UserView } from './accounts.js'
import { andThen, eachInTurn, type MaybePromise } from '../db/rows.js'

export type UserJson = ReturnType<typeof serializeUser> & Record<string, unknown>

/**
 * Adds fields to serialised users in bulk (one query per decorator for a whole list). `em` gives
 * the request's EntityManager (forked on first call): a GET path that read a plain row (GET
 * /session) does not fork one unless a decorator needs it. A decorator that had nothing to wait
 * for may return nothing instead of a promise (`PreparedRead.now`): GET /session then answers
 * synchronously.
 */
export type UserDecorator = (em: () => EntityManager, users: readonly UserView[], json: UserJson[]) => MaybePromise<void>

/** who is shown the users: an email goes to administrators and to its own user only (SECURITY.md) */
export type UserViewer = Pick<Principal, 'userId' | 'isAdmin'>

/**
 * The user JSON of wire.md is assembled from several plugins: the core gives the account, the
 * identity plugin adds `own_team_id` and `teams`. Resolved as `userViews`.
 */
export class UserViews {
  private readonly decorators: UserDecorator[] = []

  add(decorator: UserDecorator): void {
    this.decorators.push(decorator)
  }

  /** the users' JSON; a promise only when a decorator had to wait */
  render(em: EntityManager | (() => EntityManager), users: readonly UserView[], viewer: UserViewer): MaybePromise<UserJson[]> {
    const json = users.map((u) => serializeUser(u) as UserJson)
    const lazy = typeof em === 'function' ? em : () => em
    return andThen(eachInTurn(this.decorators, (decorate) => decorate(lazy, users, json)), () => {
      if (!viewer.isAdmin) for (const u of json) if (u.id !== viewer.userId) delete (u as Partial<UserJson>).email
      return json
    })
  }

  one(em: EntityManager | (() => EntityManager), user: UserView, viewer: UserViewer): MaybePromise<UserJson> {
    return andThen(this.render(em, [user], viewer), (json) => json[0])
  }
}
