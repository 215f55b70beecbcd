import path from 'node:path'
import { definePlugin, aliasOf, coreServices } from '../../core/index.js'
import { templateServices } from './refs.js'
import { TemplateSchema } from './entities.js'
import { migrations } from './migrations.js'
import { registerTemplateRoutes } from './routes.js'
import { TemplateService } from './service.js'

export { TemplateService } from './service.js'
export { templateServices } from './refs.js'
export { Template } from './entities.js'
export * from './substitution.js'
export { TEMPLATE_TYPES, type TemplateType } from './types.js'

export const templatesPlugin = definePlugin({
  name: 'templates',
  title: 'Templates',
  version: '1.0.0',
  description: 'Project templates: folder trees and substitution patterns applied when projects are created',
  entities: [TemplateSchema],
  migrations,
  capabilities: { 'templates.manage': 'Create, change, duplicate and delete templates' },
  register(api) {
    api.provide(templateServices.service, (r) => new TemplateService(path.join(r(coreServices.config).dataDir, 'templates')))
    api.provide('templates', aliasOf(templateServices.service)) // legacy string key
    registerTemplateRoutes(api)
  },
})
