import type { CustomMetadataService, MetadataValues } from './service.js'
import type { MetadataAdmin } from './admin.js'

export type { MetadataOwner, MetadataValues } from './service.js'

import { createServiceRef } from '../../core/index.js'
/** The custom-metadata plugin's services, for plugins that list `custom-metadata` in their dependsOn (or optionalDependsOn). */
export const customMetadataServices = {
  /** values of an owner (project, asset, gallery): list, validated update, removal with the owner */
  values: createServiceRef<MetadataValues>('custom-metadata.values'),
  /** sets, fields, options and values with their rules (the plugin's own routes) */
  service: createServiceRef<CustomMetadataService>('custom-metadata.service'),
  admin: createServiceRef<MetadataAdmin>('custom-metadata.admin'),
} as const
