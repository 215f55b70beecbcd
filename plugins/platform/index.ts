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
        new LicenseService(resolve(coreServices.knex), resolve(coreServices.features), resolve(coreServices.plugins), machineIdOf(api.config.secretKey), () => api.settings().license.public_key, api.log),
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
  },
})
