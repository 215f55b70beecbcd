import type { SearchService } from './service.js'

import { createServiceRef } from '../../core/index.js'
/** The search plugin's services, for plugins that list `search` in their dependsOn. */
export const searchServices = {
  /** one query over assets and projects (names, paths, technical properties, custom metadata), access-filtered in SQL */
  service: createServiceRef<SearchService>('search.service'),
} as const
