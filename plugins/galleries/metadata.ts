import { customMetadataServices } from '../custom-metadata/index.js'

/** galleries keep custom metadata values (owner type `gallery`) when the custom-metadata plugin is loaded and active */
export type { MetadataOwner, MetadataValues } from '../custom-metadata/index.js'
export const metadataValuesRef = customMetadataServices.values
export const CUSTOM_METADATA = 'custom-metadata'
