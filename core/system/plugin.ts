import { definePlugin } from '../plugin/contract.js'
import { ApiKeySchema, AuthTokenSchema, RoleSchema, UserSchema, User } from '../auth/entities.js'
import { createUser, ensureBuiltinRoles } from '../auth/accounts.js'
import { SERVER_VERSION } from '../version.js'
import { coreMigrations } from './migrations.js'
import { coreEvents } from './events.js'
import { FANOUT_JOB } from '../outbox.js'
import { coreServices } from '../plugin/services.js'
import { registerSessionRoutes } from './session-routes.js'
import { registerApiKeyRoutes } from './api-key-routes.js'
import { registerFeatureRoutes } from './feature-routes.js'
import { registerStatusRoutes } from './status-routes.js'

/** Versions of external tools in use (ffmpeg …), filled by the plugins that find them; shown by GET /version. */
export const toolVersions = new Map<string, string>()

/** The part of the core that speaks HTTP: login, API keys, features, version, job status. Always on. */
export const corePlugin = definePlugin({
  name: 'core',
  title: 'Core',
  version: SERVER_VERSION,
  description: 'Authentication, API keys, modules, versions and job status',
  required: true,
  entities: [RoleSchema, UserSchema, ApiKeySchema, AuthTokenSchema],
  migrations: coreMigrations,
  capabilities: { admin: 'Administrative privileges: everything' },
  events: coreEvents,
  register(api) {
    const outbox = api.use(coreServices.outbox)
    api.jobs.define(FANOUT_JOB, {
      maxAttempts: 1000, // the outbox gives up a poisoned batch itself; the job must outlive SMTP or a consumer's outage
      concurrency: 1,
      async handler(ctx) {
        let handed = 0
        for (;;) {
          if (ctx.signal.aborted) break
          const n = await outbox().fanOut()
          handed += n
          if (n === 0) break
        }
        await outbox().prune()
        return { events: handed }
      },
    })
    registerSessionRoutes(api)
    registerApiKeyRoutes(api)
    registerFeatureRoutes(api, () => Object.fromEntries(toolVersions))
    registerStatusRoutes(api)
  },
  async start({ resolve, log }) {
    const em = resolve(coreServices.em)
    await ensureBuiltinRoles(em)
    const password = process.env.MAMKIT_ADMIN_PASSWORD
    if (password && (await em.count(User)) === 0) {
      await createUser(em, { username: 'admin', password, admin: true }).catch((err) => {
        if (err?.code !== 'conflict') throw err // a second process created it first
      })
      log.info('created the administrator "admin" from MAMKIT_ADMIN_PASSWORD')
    }
  },
})
