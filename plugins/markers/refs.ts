import { createServiceRef } from '../../core/index.js'
import type { MarkerService } from './service.js'

/** The markers plugin's services, for plugins that list `markers` in their dependsOn. */
export const markerServices = {
  /** marker descriptions of assets: list, create, change, exports */
  service: createServiceRef<MarkerService>('markers.service'),
} as const
