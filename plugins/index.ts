import type { PluginDefinition } from '../core/index.js'
import { templatesPlugin } from './templates/index.js'
import { rolesPlugin } from './roles/index.js'
import { identityPlugin } from './identity/index.js'
import { projectsPlugin } from './projects/index.js'
import { editsPlugin } from './edits/index.js'
import { assetsPlugin } from './assets/index.js'
import { statusFlagsPlugin } from './status-flags/index.js'
import { notificationsPlugin } from './notifications/index.js'
import { webhooksPlugin } from './webhooks/index.js'
import { markersPlugin } from './markers/index.js'
import { platformPlugin } from './platform/index.js'
import { transcriptionPlugin } from './transcription/index.js'
import { strategiesPlugin } from './strategies/index.js'
import { customMetadataPlugin } from './custom-metadata/index.js'
import { searchPlugin } from './search/index.js'
import { galleriesPlugin } from './galleries/index.js'
import { schedulesPlugin } from './schedules/index.js'
import { editorProjectsPlugin } from './editor-projects/index.js'
import { sequencesPlugin } from './sequences/index.js'
import { federationPlugin } from './federation/index.js'
import { viewFarmsPlugin } from './view-farms/index.js'

/** Every feature plugin that ships with mamkit, one per line, in no particular order (the loader sorts them). */
export const builtinPlugins: PluginDefinition[] = [
  rolesPlugin,
  identityPlugin,
  templatesPlugin,
  projectsPlugin,
  statusFlagsPlugin,
  assetsPlugin,
  editsPlugin,
  notificationsPlugin,
  webhooksPlugin,
  markersPlugin,
  platformPlugin,
  transcriptionPlugin,
  strategiesPlugin,
  customMetadataPlugin,
  searchPlugin,
  galleriesPlugin,
  schedulesPlugin,
  editorProjectsPlugin,
  sequencesPlugin,
  federationPlugin,
  viewFarmsPlugin,
]

export { templatesPlugin, rolesPlugin, identityPlugin, projectsPlugin, statusFlagsPlugin, assetsPlugin, editsPlugin }
export { notificationsPlugin, webhooksPlugin }
export { markersPlugin }
export { platformPlugin }
export { transcriptionPlugin }
export { strategiesPlugin }
export { galleriesPlugin, customMetadataPlugin, searchPlugin }
export { schedulesPlugin }
export { editorProjectsPlugin }
export { sequencesPlugin }
export { federationPlugin }
export { viewFarmsPlugin }
