import { definePlugin, coreServices } from '../../core/index.js'
import { platformEntities } from './entities.js'
import { migrations } from './migrations.js'
import { PlatformSettings } from './schemas.js'
import { platformServices } from './refs.js'
import { SettingsService } from './settings-service.js'
import { LicenseService, machineIdOf } from './license.js'
import { registerSettingsRoutes } from './settings-routes.js'
import { registerLicenseRoutes } from './license-routes.js'
import { registerOperatorRoutes } from './operator-routes.js'
import { registerBrandingRoutes } from './branding-routes.js'
import { BrandingService } from './branding.js'
import { TrafficCounter } from './traffic.js'
import { PlatformMetrics } from './metrics.js'
import { registerIntegrationRoutes } from './integration-routes.js'
import { registerIngestRoutes } from './ingest-routes.js'
import { LibraryIngestService, ingestScan, type IngestTargets } from './ingests.js'
import { identityServices } from '../identity/index.js'
import { projectServices } from '../projects/index.js'
import { assetServices } from '../assets/index.js'

export { platformServices } from './refs.js'
export { SettingsService } from './settings-service.js'
export { LicenseService, machineIdOf, canonicalJson } from './license.js'
export { PlatformSettings } from './schemas.js'

/**
 * What operators and integrators expect of a server they run (spec §4.11, §4.13, §4.17, §4.24):
 * settings of every plugin changed live and audited, machine id and license, branding images,
 * subscriptions and traffic, chat integration, and the operator endpoints (health, readiness,
 * OpenAPI, docs page, metrics). Part of the core set: it cannot be switched off.
 */
export const platformPlugin = definePlugin({
  name: 'platform',
  title: 'Platform',
  version: '1.0.0',
  description: 'Settings, license, machine id, branding, subscriptions, chat integration, health, OpenAPI and metrics',
  required: true,
  // used when loaded (always, with the built-in plugins): license limits on accounts and stored
  // bytes hook into identity and projects, library ingests register files through assets
  optionalDependsOn: ['identity', 'projects', 'assets'],
  entities: platformEntities,
  migrations,
  settings: PlatformSettings,
  register(api) {
    api.provide(
      platformServices.settings,
      (resolve) => new SettingsService(resolve(coreServices.knex), resolve(coreServices.db).dialect, resolve(coreServices.settings), resolve(coreServices.config), api.log),
      { dispose: (s: SettingsService) => s.stop() },
    )
    api.provide(
      platformServices.license,
      (resolve) =>
        new LicenseService(resolve(coreServices.knex), resolve(coreServices.features), resolve(coreServices.plugins), machineIdOf(api.config.secretKey), () => api.settings().license.public_key, api.log, resolve(coreServices.db).dialect),
    )
    api.provide(platformServices.branding, () => new BrandingService(api.config.dataDir))
    api.provide(platformServices.metrics, (resolve) => new PlatformMetrics(resolve(coreServices.knex), resolve(coreServices.events)), { dispose: (m: PlatformMetrics) => m.stop() })
    api.provide(
      platformServices.traffic,
      (resolve) => {
        const metrics = resolve(platformServices.metrics)
        return new TrafficCounter(resolve(coreServices.knex), () => api.settings().subscription.instance, api.log, (kind, bytes) => metrics.servedBytes(kind, bytes))
      },
      { dispose: (t: TrafficCounter) => t.stop() },
    )
    api.provide(
      platformServices.ingests,
      (resolve) => {
        const targets: IngestTargets | undefined = resolve(coreServices.plugins).some((p) => p.name === 'assets')
          ? { ingest: resolve(assetServices.ingest), assets: resolve(assetServices.service), projects: resolve(projectServices.service) }
          : undefined
        return new LibraryIngestService(resolve(coreServices.knex), resolve(coreServices.storages), resolve(coreServices.jobs), resolve(coreServices.features), () => targets, api.config.dataDir, api.log, () => api.settings().library_ingests.poll_ms)
      },
      { dispose: (s: LibraryIngestService) => s.stop() },
    )
    api.jobs.define(ingestScan, {
      concurrency: 2,
      async handler(ctx) {
        return ctx.resolve(platformServices.ingests).scan(ctx.payload.ingestId, ctx.em, new Date(), ctx.signal)
      },
    })
    registerIngestRoutes(api)
    registerSettingsRoutes(api)
    registerIntegrationRoutes(api)
    registerBrandingRoutes(api)
    registerLicenseRoutes(api)
    registerOperatorRoutes(api)
  },
  async start({ resolve }) {
    const settings = resolve(platformServices.settings)
    const license = resolve(platformServices.license)
    await license.load()
    const requests = resolve(coreServices.requests)
    const metrics = resolve(platformServices.metrics)
    const traffic = resolve(platformServices.traffic)
    metrics.start()
    traffic.start()
    requests.add(metrics.observe)
    requests.add(traffic.observe)
    // settings changed in another process, and a license installed there, are picked up here
    await settings.start(async () => license.load())
    const plugins = new Set(resolve(coreServices.plugins).map((p) => p.name))
    if (plugins.has('identity')) resolve(identityServices.userLimits).add(license.assertUserRoom)
    if (plugins.has('projects')) resolve(projectServices.service).spaceLimits.add(license.storageLimit)
    // each process polls; the claim on the ingest row lets one of them queue a due scan
    resolve(platformServices.ingests).start()
  },
})
