import type { GalleryService } from './service.js'
import type { ReviewService } from './review.js'
import type { PresetService } from './presets.js'
import type { GuestShares } from './shares.js'
import type { WatermarkService } from './watermark.js'

import { createServiceRef } from '../../core/index.js'
/** The galleries plugin's services, for plugins that list `galleries` in their dependsOn. */
export const galleryServices = {
  /** galleries, their entries and virtual folders; access checks for users and guest links */
  service: createServiceRef<GalleryService>('galleries.service'),
  /** review requests, approvers' decisions and the overall status by rule */
  review: createServiceRef<ReviewService>('galleries.review'),
  presets: createServiceRef<PresetService>('galleries.presets'),
  /** email shares and the guest links they carry */
  shares: createServiceRef<GuestShares>('galleries.shares'),
  /** guests' proxies with the style preset's watermark burnt in, made by a job and cached */
  watermarks: createServiceRef<WatermarkService>('galleries.watermarks'),
} as const
