import t from 'tap'
import { coreServices } from '../../../core/index.js'
import { onEachDatabase } from '../../../core/testing/index.js'
import { assetJsonOfRow, serializeAsset, viewOfRow } from '../../../plugins/assets/asset-json.js'
import { paths, setup } from './fixtures.js'

/** the listing's one-step serialiser answers what the two-step one (GET /assets/:id, ingest) answers */

const owner = { id: 7, name: 'Owner' }
const sqliteRow = {
  id: 3, project_id: 7, uuid: 'u-3', name: 'clip.mov', type: 'video', path: 'A/clip.mov', folder: 'A', size: 1234, duration: 12.5, online: 1,
  metadata: '{"clip_name":"Clip 3","audio_channels":2}', analysis_state: 'ready', analysis_error: null, proxy_state: 'ready', proxy_error: null,
  proxy_version: 2, proxies: '{"lowres":"lowres.mp4","poster":"poster.jpg"}', description: 'said', crc32: 'abcd0123', sha256: null,
  mtime: 1764000000000, created_at: 1764000001000, updated_at: '1764000002000',
}
const pgRow = {
  ...sqliteRow, id: '3', size: '1234', online: false, metadata: { width: 10 }, proxies: null, proxy_version: '0', description: null, type: 'image',
  duration: null, mtime: null, created_at: new Date(1764000001000), updated_at: new Date(1764000002000),
}

t.test('assetJsonOfRow is serializeAsset(viewOfRow) for SQLite and PostgreSQL rows', async (t) => {
  for (const row of [sqliteRow, pgRow, { ...sqliteRow, type: 'audio', metadata: null, description: '' }]) {
    t.same(JSON.parse(JSON.stringify(assetJsonOfRow(row, owner))), JSON.parse(JSON.stringify(serializeAsset(viewOfRow(row, owner)))))
    t.strictSame(Object.keys(assetJsonOfRow(row, owner)), Object.keys(serializeAsset(viewOfRow(row, owner))), 'the same keys in the same order')
  }
})

onEachDatabase(t, 'a listed asset is the asset GET /assets/:id answers; page sizes written into SQL and bound ones page alike', async (t, s) => {
  const { p, reader } = await setup(s)
  const list = (query: Record<string, string>) => s.request('GET', `/projects/${p.id}/assets`, { token: reader.token, query })
  const listed = await list({ recursive: 'true' })
  t.equal(listed.status, 200)
  for (const a of listed.body.assets) {
    const one = await s.request('GET', `/assets/${a.id}`, { token: reader.token })
    t.same(a, one.body.asset, a.path)
  }
  // per_page 1 and 100 are written into the statement (limitSql), 3 and 7 bound: the same walk
  const all = paths(listed)
  for (const perPage of ['1', '3', '7', '100']) {
    const walked: string[] = []
    for (let page = 1; walked.length < all.length && page <= all.length; page++) {
      const reply = await list({ recursive: 'true', per_page: perPage, page: String(page) })
      t.equal(reply.headers.get('x-total-count'), String(all.length), `per_page ${perPage} page ${page}: the count`)
      walked.push(...paths(reply))
    }
    t.same(walked, all, `per_page ${perPage}: every asset once, in order`)
  }
  // knex's own limits (first(), limit()) are written as numbers on SQLite and still limit
  const knex = s.runtime.container.resolve<any>(coreServices.knex.id)
  const two = await knex('assets').where('project_id', p.id).orderBy('id').limit(2).select('id')
  t.equal(two.length, 2)
  const first = await knex('assets').where('project_id', p.id).orderBy('id').first('id')
  t.equal(Number(first.id), Number(two[0].id))
  const offsetOnly = await knex('assets').where('project_id', p.id).orderBy('id').offset(1).select('id')
  t.equal(offsetOnly.length, all.length - 1, 'an offset without a limit still reads the rest')
  if (s.db === 'sqlite') t.match(knex('assets').limit(2).toSQL().sql, /limit 2\b/, 'SQLite: the LIMIT in the text, not bound')
})
