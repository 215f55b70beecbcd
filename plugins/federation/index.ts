import { coreServices, definePlugin, Type } from '../../core/index.js'
import { identityServices } from '../identity/index.js'
import { statusFlagServices } from '../status-flags/index.js'
import { federationEntities } from './entities.js'
import { Hlc } from './hlc.js'
import { JoinService } from './join.js'
import { pullTransportJob } from './jobs.js'
import { migrations } from './migrations.js'
import { federationServices } from './refs.js'
import { replicatedTypes } from './replicated.js'
import { registerRoutes } from './routes.js'
import { FederationService, type FederationSettings } from './service.js'
import { NonceCache, siteCredentials } from './signing.js'
import { SiteIdentity } from './site.js'
import { CrdtStore } from './store.js'
import { TransportService } from './transports.js'

export { federationServices } from './refs.js'
export type { FederationService } from './service.js'

const Settings = Type.Object(
  {
    /** this site's name in a new federation (default: the host name) */
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** where peers reach this server (default: the origin of the admin's request) */
    baseUrl: Type.Optional(Type.String({ pattern: '^https?://' })),
    /** push to every active peer this often; 0: no timer (tests drive rounds themselves) */
    gossipIntervalMs: Type.Integer({ minimum: 0, default: 5000 }),
    inviteTtlMinutes: Type.Integer({ minimum: 1, default: 1440 }),
    peerTimeoutMs: Type.Integer({ minimum: 100, default: 15_000 }),
    /** skews this site's HLC (tests of clock skew; MAMKIT_CLOCK_OFFSET_MS does the same for a whole server) */
    clockOffsetMs: Type.Integer({ default: 0 }),
  },
  { default: {} },
)

/**
 * Federation (spec §4.15, FEDERATION.md): several full sites merge concurrent edits of shared
 * records (users, roles, teams, status flags, the sites themselves) with no master and no trust
 * in clocks. State-based CRDT records, signed site-to-site requests, delta push plus anti-entropy.
 */
export const federationPlugin = definePlugin({
  name: 'federation',
  title: 'Federation',
  version: '1.0.0',
  description: 'Sites that share users, roles, teams and status flags, merged without clock trust',
  dependsOn: ['identity', 'status-flags'],
  settings: Settings,
  entities: federationEntities,
  migrations,
  register(api) {
    const settings = () => api.settings() as FederationSettings
    const teams = api.use(identityServices.teams)
    const flags = api.use(statusFlagServices.service)
    api.provide(federationServices.service, (r) => {
      const db = r(coreServices.db)
      const config = r(coreServices.config)
      const clockOffset = settings().clockOffsetMs || Number(process.env.MAMKIT_CLOCK_OFFSET_MS ?? 0) || 0
      const hlc = new Hlc({ now: () => Date.now() + clockOffset })
      const identity = new SiteIdentity(db.knex, config.secretKey, settings().name ?? 'mamkit')
      return new FederationService(db, identity, replicatedTypes({ teams, flags }), (rulesOf) => new CrdtStore(db.knex, hlc, rulesOf, db.dialect), settings, r(coreServices.log))
    }, { dispose: (s) => s.stopTimer() })
    api.provide(federationServices.join, (r) => new JoinService(r(federationServices.service), r(coreServices.config).secretKey))
    api.provide(federationServices.transports, (r) => new TransportService(r(coreServices.knex), r(federationServices.service), r(coreServices.config).dataDir))
    const fed = api.use(federationServices.service)
    const nonces = new NonceCache()
    const credentials = siteCredentials((site) => fed().keyOf(site), nonces)
    api.credentials.add(credentials)
    registerRoutes(api, { fed, join: api.use(federationServices.join), transports: api.use(federationServices.transports) })
    api.jobs.define(pullTransportJob, {
      maxAttempts: 5,
      handler: (ctx) => ctx.resolve(federationServices.transports).pull(ctx.payload.transportId, ctx.signal),
    })
  },
  async started({ resolve }) {
    const fed = resolve(federationServices.service)
    await fed.ready()
    await fed.store.restoreClock(fed.replica())
    fed.startTimer()
  },
})
