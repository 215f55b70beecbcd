import { createServiceRef } from '../../core/index.js'
import type { TemplateService } from './service.js'

/** The templates plugin's services, for plugins that list `templates` in their dependsOn. */
export const templateServices = {
  service: createServiceRef<TemplateService>('templates.service'),
} as const
