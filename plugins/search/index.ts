import { Type } from 'typebox'
import { identityServices } from '../identity/refs.js'
import { METADATA_PROPERTIES, assetServices } from '../assets/index.js'
import { searchServices } from './refs.js'
import { DEFAULT_PROPERTIES, migrations, reindex } from './migrations.js'
import { SearchService } from './service.js'
import { DirtySweeper } from './sweep.js'
import { SearchTextSchema } from './entities.js'
import { registerSearchRoutes } from './routes.js'

export { searchServices } from './refs.js'
export type { SearchService, AssetText } from './service.js'

import { coreServices, defineJob, definePlugin } from '../../core/index.js'
const Settings = Type.Object(
  {
    /** technical properties (GET /settings/metadata_properties) indexed for words and usable as `property:value` */
    properties: Type.Array(Type.Unsafe<string>({ type: 'string', enum: METADATA_PROPERTIES.map((p) => p.name) }), { default: DEFAULT_PROPERTIES, uniqueItems: true, maxItems: 50 }),
    /**
     * how many matches are ranked together: a term with more matches is ranked window by window, the
     * newest this many first (README "Order"); at most this many, and the order is exact relevance
     */
    rankWindow: Type.Integer({ minimum: 1, maximum: 100_000, default: 1000 }),
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
    api.provide(searchServices.service, (r) => new SearchService(r(coreServices.knex), r(coreServices.db).dialect, r(identityServices.accessRights), () => api.settings().properties, () => api.settings().rankWindow))
    api.provide(searchServices.sweeper, (r) => new DirtySweeper(r(coreServices.knex), r(coreServices.log)), { dispose: (sweeper) => sweeper.stop() })
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
    // bulk value changes mark documents dirty instead of rebuilding them in their statement (PostgreSQL)
    if (db.dialect === 'postgresql') {
      const sweeper = resolve(searchServices.sweeper)
      sweeper.start()
      // marks left by a process that stopped before its sweep
      await sweeper.sweepNow()
    }
    const settings = resolve(coreServices.settings)
    const whitelist = () => (settings.get('search') as { properties: string[] }).properties
    // GET /settings/metadata_properties (assets) flags the whitelisted ones `searchable`; PUT /settings changes the list
    resolve(assetServices.propertyUses).add({ flag: 'searchable', names: whitelist })
    if (await sync(whitelist())) await jobs.enqueue(Reindex.type, {})
    settings.onChange((plugin, value) => {
      if (plugin !== 'search') return
      void sync((value as { properties: string[] }).properties).then((changed) => (changed ? jobs.enqueue(Reindex.type, {}) : undefined))
    })
  },
})
