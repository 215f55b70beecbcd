import { createServiceRef } from '../../core/index.js'
import type { AssetService } from './service.js'
import type { Ingest } from './ingest.js'
import type { ProxyStore } from './proxy-store.js'
import type { AssetDestroyer } from './destroy.js'
import type { PreparedDownloads } from './prepared.js'
import type { PropertyUses } from './properties.js'

/** The assets plugin's services, for plugins that list `assets` in their dependsOn. */
export const assetServices = {
  /** assets: access checks (`readable`/`writable` take the principal), registration, files */
  service: createServiceRef<AssetService>('assets.service'),
  /** uploads and registration of new files under the storage journal */
  ingest: createServiceRef<Ingest>('assets.ingest'),
  /** encrypted proxies, posters and thumbnails of assets */
  proxyStore: createServiceRef<ProxyStore>('assets.proxyStore'),
  /** removal of files or folders with their rows, finished after a crash */
  destroyer: createServiceRef<AssetDestroyer>('assets.destroyer'),
  /** prepared downloads (AssetState, state_id checks, zip streaming) for other plugins' packages */
  downloads: createServiceRef<PreparedDownloads>('assets.downloads'),
  /** what other plugins do with technical properties (search's whitelist), shown by GET /settings/metadata_properties */
  propertyUses: createServiceRef<PropertyUses>('assets.propertyUses'),
} as const
