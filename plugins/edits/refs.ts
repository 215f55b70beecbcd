import { createServiceRef } from '../../core/index.js'
import type { EditService } from './service.js'

/** The edits plugin's services, for plugins that list `edits` in their dependsOn. */
export const editServices = {
  service: createServiceRef<EditService>('edits.service'),
} as const
