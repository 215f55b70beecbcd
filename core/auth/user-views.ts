import type { EntityManager } from '../db/orm.js'
import type { Principal } from './principal.js'
import { serializeUser, type UserView } from './accounts.js'

export type UserJson = ReturnType<typeof serializeUser> & Record<string, unknown>

/**
 * Adds fields to serialised users in bulk (one query per decorator for a whole list). `em` gives
 * the request's EntityManager (forked on first call): a GET path that read a plain row (GET
 * /session) does not fork one unless a decorator needs it.
 */
export type UserDecorator = (em: () => EntityManager, users: readonly UserView[], json: UserJson[]) => Promise<void>

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

  async render(em: EntityManager | (() => EntityManager), users: readonly UserView[], viewer: UserViewer): Promise<UserJson[]> {
    const json = users.map((u) => serializeUser(u) as UserJson)
    const lazy = typeof em === 'function' ? em : () => em
    for (const decorate of this.decorators) await decorate(lazy, users, json)
    if (!viewer.isAdmin) for (const u of json) if (u.id !== viewer.userId) delete (u as Partial<UserJson>).email
    return json
  }

  async one(em: EntityManager | (() => EntityManager), user: UserView, viewer: UserViewer): Promise<UserJson> {
    return (await this.render(em, [user], viewer))[0]
  }
}
