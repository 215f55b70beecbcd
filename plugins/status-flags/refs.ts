import { createServiceRef } from '../../core/index.js'
import type { StatusFlagService } from './service.js'

/** The status-flags plugin's services, for plugins that list `status-flags` in their dependsOn. */
export const statusFlagServices = {
  service: createServiceRef<StatusFlagService>('status-flags.service'),
} as const
