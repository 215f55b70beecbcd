import { assetEvents } from './events.js'
import { definePlugin, coreServices } from '../../core/index.js'
import { projectServices } from '../projects/refs.js'
import { assetServices } from './refs.js'
import { AssetSchema } from './entities.js'
import { migrations } from './migrations.js'
import { AssetService } from './service.js'
import { registerAssetRoutes } from './routes.js'
import { registerProjectAssetRoutes } from './project-routes.js'
import { defineAssetJobs } from './jobs.js'
import { defineProxyJobs } from './proxy-jobs.js'
import { registerProxyRoutes } from './proxy-routes.js'
import { ProxyStore } from './proxy-store.js'
import { AssetStateSchema } from './downloads.js'
import { defineDownloadJobs } from './download-jobs.js'
import { registerDownloadRoutes } from './download-routes.js'
import { defineHashJobs } from './hash-jobs.js'
import { registerReportRoutes } from './report-routes.js'
import { registerAssetAccessRoutes } from './access-routes.js'
import { AssetShareSchema } from './shares.js'
import { registerShareRoutes } from './share-routes.js'
import { assetPathMoves } from './path-moves.js'
import { Ingest } from './ingest.js'
import { AssetDestroyer } from './destroy.js'
import { PreparedDownloads } from './prepared.js'
import { AssetSettings } from './settings.js'
import { PropertyUses } from './properties.js'

export { Asset } from './entities.js'
export { AssetService } from './service.js'
export type { ProxyStore } from './proxy-store.js'
export { assetServices } from './refs.js'
export type { PreparedDownloads } from './prepared.js'
export { METADATA_PROPERTIES, type PropertyUse, type PropertyUses } from './properties.js'
/** for plugins that serve an asset's files under their own access rules (galleries' guest links) */
export { withOriginal, type Original } from './originals.js'
export { sendProxy } from './proxy-routes.js'
export { sendBody } from './serve-file.js'

/** Assets and the media pipeline (§4.6, §4.9, §4.20): ingest, analysis with ffprobe/sharp, listing. */
export const assetsPlugin = definePlugin({
  name: 'assets',
  title: 'Assets',
  version: '0.1.0',
  description: 'Files of projects as assets: ingest, technical metadata, encrypted proxies, listing',
  // identity is reached through projects too; listed because assets resolves its services (access rights, mail)
  dependsOn: ['projects', 'identity'],
  entities: [AssetSchema, AssetStateSchema, AssetShareSchema],
  migrations,
  events: assetEvents,
  settings: AssetSettings,
  register(api) {
    const { service, ingest, proxyStore } = assetServices
    api.provide(service, (r) => new AssetService(r(projectServices.service), r(coreServices.jobs), r(coreServices.knex)))
    api.provide(ingest, (r) => new Ingest(r(coreServices.knex), r(projectServices.storageJournal), r(projectServices.service), r(service)))
    api.provide(assetServices.destroyer, (r) => new AssetDestroyer(r(coreServices.knex), r(projectServices.storageJournal), r(projectServices.service)))
    api.provide(proxyStore, (r) => new ProxyStore(r(coreServices.config).dataDir, r(coreServices.config).secretKey))
    api.provide(assetServices.downloads, (r) => new PreparedDownloads(r(coreServices.jobs)))
    api.provide(assetServices.propertyUses, () => new PropertyUses())
    registerAssetRoutes(api)
    registerProjectAssetRoutes(api)
    registerProxyRoutes(api)
    registerDownloadRoutes(api)
    registerReportRoutes(api)
    registerAssetAccessRoutes(api)
    registerShareRoutes(api)
    // read on each run: a change over PUT /settings applies to the next encode
    const proxySettings = () => api.settings().proxy
    defineAssetJobs(api.jobs)
    defineDownloadJobs(api.jobs, proxySettings)
    defineHashJobs(api.jobs)
    // one video encode per two cores keeps ffmpeg near its real-time multiple (PERFORMANCE.md)
    defineProxyJobs(api.jobs, api.settings().encodeConcurrency, proxySettings)
  },
  async start({ resolve }) {
    // asset rows move with their files when folders move (PUT /projects/:id/move_contents, rename_folder)
    resolve(projectServices.pathMoveHooks).add(assetPathMoves)
    // uploads cut short by a crash are undone (projects runs the journal's repairs once every plugin started)
    resolve(assetServices.ingest).defineRepair()
    resolve(assetServices.destroyer).defineRepair()
  },
})
