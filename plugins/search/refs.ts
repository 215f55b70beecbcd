import type { SearchService } from './service.js'
import type { DirtySweeper } from './sweep.js'

import { createServiceRef } from '../../core/index.js'
/** The search plugin's services, for plugins that list `search` in their dependsOn. */
export const searchServices = {
  /** one query over assets and projects (names, paths, technical properties, custom metadata), access-filtered in SQL */
  service: createServiceRef<SearchService>('search.service'),
  /** rebuilds the documents bulk value changes marked dirty (PostgreSQL), about a second after their commit */
  sweeper: createServiceRef<DirtySweeper>('search.sweeper'),
} as const
