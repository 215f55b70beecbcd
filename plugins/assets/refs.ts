import { createServiceRef } from '../../core/plugin/services.js'
import type { AssetService } from './service.js'
import type { Ingest } from './ingest.js'
import type { ProxyStore } from './proxy-store.js'

/** The assets plugin's services, for plugins that list `assets` in their dependsOn. */
export const assetServices = {
  /** assets: access checks (`readable`/`writable` take the principal), registration, files */
  service: createServiceRef<AssetService>('assets.service'),
  /** uploads and registration of new files under the storage journal */
  ingest: createServiceRef<Ingest>('assets.ingest'),
  /** encrypted proxies, posters and thumbnails of assets */
  proxyStore: createServiceRef<ProxyStore>('assets.proxyStore'),
} as const
