import { definePlugin, aliasOf, coreServices } from '../../core/index.js'
import { statusFlagServices } from './refs.js'
import { ProjectStatusFlagSchema, StatusFlagSchema } from './entities.js'
import { migrations } from './migrations.js'
import { registerStatusFlagRoutes } from './routes.js'
import { StatusFlagService } from './service.js'

export { StatusFlag, ProjectStatusFlag } from './entities.js'
export { StatusFlagService } from './service.js'
export { statusFlagServices } from './refs.js'

/** Coloured status flags on projects (§4.20, §4.22): unscoped ones of this site, scoped ones that came with transferred projects. */
export const statusFlagsPlugin = definePlugin({
  name: 'status-flags',
  title: 'Status flags',
  version: '1.0.0',
  description: 'Coloured status flags that users set on projects; managed by administrators',
  dependsOn: ['projects'],
  entities: [StatusFlagSchema, ProjectStatusFlagSchema],
  migrations,
  register(api) {
    api.provide(statusFlagServices.service, (resolve) => new StatusFlagService(resolve(coreServices.knex)))
    api.provide('statusFlags', aliasOf(statusFlagServices.service)) // legacy string key
    registerStatusFlagRoutes(api)
  },
})
