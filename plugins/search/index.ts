import { Type } from 'typebox'
import { identityServices } from '../identity/refs.js'
import { METADATA_PROPERTIES } from '../assets/index.js'
import { searchServices } from './refs.js'
import { DEFAULT_PROPERTIES, migrations, reindex } from './migrations.js'
import { SearchService } from './service.js'
import { SearchTextSchema } from './entities.js'
import { registerSearchRoutes } from './routes.js'

export { searchServices } from './refs.js'
export type { SearchService, AssetText } from './service.js'

import { coreServices, defineJob, definePlugin } from '../../core/index.js'
const Settings = Type.Object(
  {
    /** technical properties (GET /settings/metadata_properties) indexed for words and usable as `property:value` */
    properties: Type.Array(Type.Unsafe<string>({ type: 'string', enum: METADATA_PROPERTIES.map((p) => p.name) }), { default: DEFAULT_PROPERTIES, uniqueItems: true, maxItems: 50 }),
  },
  { default: {} },
)

/** the index rebuilt after the list of searchable properties changed */
export const Reindex = defineJob('search.reindex', Type.Object({}))

/** §4.22 GET /search: assets and projects by words, phrases and field:value, in one access-filtered query. */
export const searchPlugin = definePlugin({
  name: 'search',
  title: 'Search',
  version: '1.0.0',
  description: 'Full-text search over asset names, paths, technical properties, custom metadata and projects (PostgreSQL tsvector + GIN, SQLite FTS5)',
  dependsOn: ['identity', 'projects', 'assets', 'custom-metadata'],
  migrations,
  entities: [SearchTextSchema],
  settings: Settings,
  register(api) {
    api.provide(searchServices.service, (r) => new SearchService(r(coreServices.knex), r(coreServices.db).dialect, r(identityServices.accessRights), () => api.settings().properties))
    api.jobs.define(Reindex, {
      kind: 'generic',
      concurrency: 1,
      async handler(ctx) {
        const db = ctx.resolve(coreServices.db)
        return { documents: await reindex(db.knex, db.dialect, ['asset'], ctx.signal) }
      },
    })
    registerSearchRoutes(api)
  },
  async start({ resolve }) {
    const db = resolve(coreServices.db)
    const jobs = resolve(coreServices.jobs)
    // the triggers read the property list from a table: keep it what the setting says, and reindex when it changes
    const sync = async (properties: string[]) => {
      const current = (await db.knex('search_properties').select('name')).map((r: any) => r.name as string).sort()
      const wanted = [...new Set(properties)].sort()
      if (current.join('\n') === wanted.join('\n')) return false
      await db.knex.transaction(async (trx) => {
        await trx('search_properties').delete()
        if (wanted.length) await trx('search_properties').insert(wanted.map((name) => ({ name })))
      })
      return true
    }
    const settings = resolve(coreServices.settings)
    if (await sync((settings.get('search') as { properties: string[] }).properties)) await jobs.enqueue(Reindex.type, {})
    settings.onChange((plugin, value) => {
      if (plugin !== 'search') return
      void sync((value as { properties: string[] }).properties).then((changed) => (changed ? jobs.enqueue(Reindex.type, {}) : undefined))
    })
  },
})
