import { identityEvents } from './events.js'
import { definePlugin, aliasOf, andThen, coreServices, eachInTurn, preparedRead, Type, type MamConfig, type MaybePromise } from '../../core/index.js'
import { identityServices } from './refs.js'
import { identityEntities } from './entities.js'
import { migrations } from './migrations.js'
import { TeamService } from './teams-service.js'
import { AccessRightService } from './access-rights.js'
import { Mailer, MailSettingsSchema, mailSettings } from './mailer.js'
import { UserLimits } from './user-limits.js'
import { registerUserRoutes } from './users-routes.js'
import { registerTeamRoutes } from './teams-routes.js'
import { registerSettingsRoutes } from './settings-routes.js'
import { registerSessionContainerRoutes } from './sessions-routes.js'
import { registerProofKeyRoutes } from './proof-keys.js'

export { TeamService } from './teams-service.js'
export { AccessRightService, mountAccessRightRoutes, type ProtectedType, type Right } from './access-rights.js'
export { Team, AccessRight } from './entities.js'
export { Mailer } from './mailer.js'
export { identityServices } from './refs.js'
export { UserLimits, type UserLimit } from './user-limits.js'

/** `plugins.identity`: the SMTP server invitations and other plugins' mail go through */
const Settings = Type.Object({ mail: MailSettingsSchema }, { default: {} })

/**
 * Who someone is and what they may touch: users, teams, access rights, login sessions, proof keys
 * and invitations (spec §4.3, §4.21, §4.23, §4.25). Projects, galleries and sequences mount the
 * access-right routes of `accessRights` under their own prefix.
 */
export const identityPlugin = definePlugin({
  name: 'identity',
  title: 'Users, teams and access rights',
  version: '1.0.0',
  description: 'Users, teams, access rights, login sessions, PKCE proof keys and invitations',
  entities: identityEntities,
  migrations,
  events: identityEvents,
  settings: Settings,
  register(api) {
    api.provide(identityServices.teams, (resolve) => new TeamService(resolve(coreServices.knex)))
    api.provide(identityServices.accessRights, (resolve) => new AccessRightService(resolve(coreServices.knex)))
    api.provide(identityServices.mailer, () => new Mailer(() => mailSettings(api.settings().mail, api.config)))
    api.provide(identityServices.userLimits, () => new UserLimits())
    // legacy string keys, until every plugin resolves by ref
    for (const [key, ref] of Object.entries(identityServices)) api.provide(key, aliasOf(ref))
    registerUserRoutes(api)
    registerTeamRoutes(api)
    registerSettingsRoutes(api)
    registerSessionContainerRoutes(api)
    registerProofKeyRoutes(api)
  },
  async start({ resolve }) {
    const em = resolve(coreServices.em)
    const teams = resolve(identityServices.teams)
    await teams.ensureOwnTeams(em)
    const knex = resolve(coreServices.knex)
    // one user (GET /session, a profile): a prepared statement; a list: one query for the lot
    const membershipsOfOne = preparedRead(knex, 'select m.user_id, t.id, t.name, t.owner_id from team_memberships m join teams t on t.id = m.team_id where m.user_id = ? order by t.name')
    resolve(coreServices.userViews).add((em, users, json) => {
      if (users.length === 0) return
      const ids = users.map((u) => u.id)
      // one user (GET /session, polled): without a promise while SQLite's connection is free
      const memberships: MaybePromise<any[]> =
        ids.length === 1
          ? membershipsOfOne.now(ids)
          : Promise.resolve(knex('team_memberships as m').join('teams as t', 't.id', 'm.team_id').whereIn('m.user_id', ids).orderBy('t.name').select('m.user_id', 't.id', 't.name', 't.owner_id'))
      return andThen(memberships, (rows) =>
        eachInTurn(users, (user, i) => {
          const mine = rows.filter((m: any) => Number(m.user_id) === user.id)
          const put = (own: { id: number; name: string }) => {
            const list = mine.map((m: any) => ({ id: Number(m.id), name: m.name as string }))
            if (!list.some((t) => t.id === Number(own.id))) list.push({ id: Number(own.id), name: own.name })
            json[i].own_team_id = Number(own.id)
            json[i].teams = list
          }
          const own = mine.find((m: any) => Number(m.owner_id) === user.id)
          // users created outside this plugin (the CLI, the core) get their own team on first sight
          return own ? put(own) : teams.ensureOwnTeam(em(), user).then(put)
        }),
      )
    })
  },
})

export type { MamConfig }
