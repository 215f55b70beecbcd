import { identityServices } from '../identity/refs.js'
import { mountAccessRightRoutes } from '../identity/index.js'
import { migrations } from './migrations.js'
import { galleryEntities } from './entities.js'
import { galleryServices } from './refs.js'
import { GALLERY, GalleryService } from './service.js'
import { ReviewService } from './review.js'
import { PresetService } from './presets.js'
import { GuestShares } from './shares.js'
import { galleryEvents } from './events.js'
import { DEFAULT_WATERMARK_FONT, WatermarkService, defineWatermarkJob } from './watermark.js'
import { assetServices } from '../assets/refs.js'
import { Type } from 'typebox'
import { registerGalleryRoutes } from './routes.js'
import { registerReviewRoutes } from './review-routes.js'
import { registerPresetRoutes } from './preset-routes.js'

export { galleryServices } from './refs.js'
export { GALLERY, GUEST } from './service.js'
export { Gallery, GalleryEntry, GalleryFolder, GalleryShare, GalleryStylePreset, ReviewApprover, ReviewHistory, ReviewRequest, ReviewRequestItem, ReviewStatus, GalleryWatermark } from './entities.js'
export type { MetadataOwner, MetadataValues } from './metadata.js'

import { coreServices, definePlugin } from '../../core/index.js'
const Settings = Type.Object({
  /** the TrueType font of text burnt into guests' proxies (fonts-dejavu-core's DejaVu Sans by default) */
  watermark_font: Type.String({ minLength: 1, default: DEFAULT_WATERMARK_FONT }),
})

/** Galleries (§4.16): curated assets and uploads in virtual folders, review and approval, style presets, sharing by email with guest links. */
export const galleriesPlugin = definePlugin({
  name: 'galleries',
  title: 'Galleries',
  version: '1.0.0',
  description: 'Galleries of project assets and uploads, review and approval by users and guest links, style presets, sharing by email',
  dependsOn: ['identity', 'projects', 'assets'],
  optionalDependsOn: ['custom-metadata'],
  migrations,
  entities: galleryEntities,
  events: galleryEvents,
  settings: Settings,
  register(api) {
    api.provide(galleryServices.service, (r) => new GalleryService(r(coreServices.knex), r(identityServices.accessRights), r(identityServices.teams)))
    api.provide(galleryServices.review, (r) => new ReviewService(r(coreServices.knex), r(coreServices.outbox)))
    api.provide(galleryServices.presets, (r) => new PresetService(r(coreServices.knex), r(coreServices.config).dataDir))
    api.provide(galleryServices.shares, (r) => new GuestShares(r(coreServices.knex), () => r(identityServices.mailer)))
    api.provide(galleryServices.watermarks, (r) => new WatermarkService(r(coreServices.knex), () => r(assetServices.proxyStore), () => r(coreServices.jobs), () => (api.settings() as { watermark_font: string }).watermark_font))
    defineWatermarkJob(api)
    const shares = api.use(galleryServices.shares)
    api.credentials.add({
      name: 'gallery-guest-link',
      extract: (ctx, query, body) => shares().resolver().extract(ctx, query, body),
      resolve: (raw, ctx) => shares().resolver().resolve(raw, ctx),
    })
    registerGalleryRoutes(api)
    registerReviewRoutes(api)
    registerPresetRoutes(api)
    mountAccessRightRoutes(api, '/galleries', GALLERY)
  },
})
