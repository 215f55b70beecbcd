import type { EntityManager } from '../db/orm.js'
import type { User } from './entities.js'
import { serializeUser } from './accounts.js'

export type UserJson = ReturnType<typeof serializeUser> & Record<string, unknown>

/** Adds fields to serialised users in bulk (one query per decorator for a whole list). */
export type UserDecorator = (em: EntityManager, users: User[], json: UserJson[]) => Promise<void>

/**
 * The user JSON of wire.md is assembled from several plugins: the core gives the account, the
 * identity plugin adds `own_team_id` and `teams`. Resolved as `userViews`.
 */
export class UserViews {
  private readonly decorators: UserDecorator[] = []

  add(decorator: UserDecorator): void {
    this.decorators.push(decorator)
  }

  async render(em: EntityManager, users: User[]): Promise<UserJson[]> {
    const json = users.map((u) => serializeUser(u) as UserJson)
    for (const decorate of this.decorators) await decorate(em, users, json)
    return json
  }

  async one(em: EntityManager, user: User): Promise<UserJson> {
    return (await this.render(em, [user]))[0]
  }
}
