import { createServiceRef } from '../../core/index.js'
import type { SettingsService } from './settings-service.js'
import type { LicenseService } from './license.js'
import type { BrandingService } from './branding.js'
import type { TrafficCounter } from './traffic.js'
import type { PlatformMetrics } from './metrics.js'
import type { LibraryIngestService } from './ingests.js'

/** The platform plugin's services, for other plugins that depend on it. */
export const platformServices = {
  /** settings of every plugin as GET/PUT /settings change them (audited, live) */
  settings: createServiceRef<SettingsService>('platform.settings'),
  /** the license in force and its installation */
  license: createServiceRef<LicenseService>('platform.license'),
  /** logo, default backgrounds, watermark */
  branding: createServiceRef<BrandingService>('platform.branding'),
  /** bytes served by download, proxy and share routes per instance and month */
  traffic: createServiceRef<TrafficCounter>('platform.traffic'),
  /** the Prometheus registry of this process */
  metrics: createServiceRef<PlatformMetrics>('platform.metrics'),
  /** watched folders feeding library projects, their scans and the poller */
  ingests: createServiceRef<LibraryIngestService>('platform.ingests'),
}
