import { projectServices } from '../projects/refs.js'
import { customMetadataServices } from './refs.js'
import { entities } from './entities.js'
import { migrations } from './migrations.js'
import { CustomMetadataService } from './service.js'
import { MetadataAdmin } from './admin.js'
import { registerRoutes } from './routes.js'
import { defineJobs } from './jobs.js'
import { projectCreateHook } from './project-hook.js'

export { customMetadataServices } from './refs.js'
export type { MetadataOwner, MetadataValues } from './refs.js'

import { coreServices, definePlugin } from '../../core/index.js'
/** Custom metadata (§4.10): sets, fields, select options, values on projects, assets and galleries, generator fields. */
export const customMetadataPlugin = definePlugin({
  name: 'custom-metadata',
  title: 'Custom metadata',
  version: '1.0.0',
  description: "A facility's own fields (client, episode, rights …) on projects, assets and galleries: typed and validated, mandatory fields, generated numbers, bulk updates, history",
  dependsOn: ['projects', 'assets'],
  entities,
  migrations,
  capabilities: { 'metadata.manage': 'Create, change and delete custom metadata sets, fields and select options' },
  register(api) {
    api.provide(customMetadataServices.service, (r) => new CustomMetadataService(r(coreServices.knex), r(coreServices.db).dialect))
    api.provide(customMetadataServices.values, (r) => r(customMetadataServices.service))
    api.provide(customMetadataServices.admin, (r) => new MetadataAdmin(r(coreServices.knex), r(customMetadataServices.service)))
    registerRoutes(api)
    defineJobs(api)
  },
  start({ resolve }) {
    // project creation reads the custom metadata: mandatory fields, generated numbers, the name
    resolve(projectServices.service).createHooks.add(projectCreateHook(resolve(customMetadataServices.service)))
  },
})
