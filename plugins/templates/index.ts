import path from 'node:path'
import { asFunction } from 'awilix'
import { definePlugin } from '../../core/plugin/contract.js'
import type { MamConfig } from '../../core/config.js'
import { TemplateSchema } from './entities.js'
import { migrations } from './migrations.js'
import { registerTemplateRoutes } from './routes.js'
import { TemplateService } from './service.js'

export { TemplateService } from './service.js'
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
    api.provide('templates', asFunction(({ config }: { config: MamConfig }) => new TemplateService(path.join(config.dataDir, 'templates'))).singleton())
    registerTemplateRoutes(api)
  },
})
