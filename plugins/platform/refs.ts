import { createServiceRef } from '../../core/plugin/services.js'
import type { SettingsService } from './settings-service.js'
import type { LicenseService } from './license.js'
import type { BrandingService } from './branding.js'

/** The platform plugin's services, for other plugins that depend on it. */
export const platformServices = {
  /** settings of every plugin as GET/PUT /settings change them (audited, live) */
  settings: createServiceRef<SettingsService>('platform.settings'),
  /** the license in force and its installation */
  license: createServiceRef<LicenseService>('platform.license'),
  /** logo, default backgrounds, watermark */
  branding: createServiceRef<BrandingService>('platform.branding'),
}
