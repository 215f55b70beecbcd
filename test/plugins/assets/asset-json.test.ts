import t from 'tap'
import { coreServices } from '../../../core/index.js'
import { onEachDatabase } from '../../../core/testing/index.js'
import { ASSET_COLUMNS, assetJsonOfRow, assetJsonSql, serializeAsset, viewOfRow } from '../../../plugins/assets/asset-json.js'
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

onEachDatabase(t, 'a listing page is byte for byte JSON.stringify of assetJsonOfRow, PostgreSQL writing it or not (assetJsonSql)', async (t, s) => {
  const { p, reader } = await setup(s)
  const knex = s.runtime.container.resolve<any>(coreServices.knex.id)
  const ids = (await knex('assets').where('project_id', p.id).orderBy(['folder', 'name']).select('id', 'folder', 'name')) as Array<{ id: number; folder: string; name: string }>
  const top = ids.filter((r) => r.folder === '')
  const media = ids.filter((r) => r.folder === 'Media')
  t.ok(top.length >= 2 && media.length >= 2, 'two folders of two assets')
  const pgOnly = s.db === 'postgresql'
  // rows PostgreSQL spells itself: escapes, unicode, numbers, nulls, a clip name that is not a string
  await knex('assets').where('id', top[0].id).update({
    description: 'said "so"\\ \u0001\u001f\t\n\u2028 é 😀',
    type: 'video',
    duration: 12.5,
    metadata: JSON.stringify({ clip_name: 7, audio_channels: 2, nested: { a: [1, 'x', null, true] }, text: 'tab\there' }),
    proxies: JSON.stringify({ poster: 'poster.jpg', 3: 'x', lowres: 'lowres.mp4' }),
    crc32: 'ab"c',
  })
  await knex('assets').where('id', top[1].id).update({ description: '', type: 'audio', duration: 0, metadata: JSON.stringify({ clip_name: null, audio_channels: 0 }), proxies: '{}' })
  const page = async (folder: string) => {
    const reply = await s.request('GET', `/projects/${p.id}/assets`, { token: reader.token, query: { folder } })
    t.equal(reply.status, 200)
    t.match(reply.headers.get('content-type'), /^application\/json; charset=utf-8$/)
    const rows = await knex('assets').where({ project_id: p.id, folder }).orderBy(['folder', 'name']).select(...ASSET_COLUMNS)
    t.equal(reply.text, JSON.stringify({ assets: rows.map((r: any) => assetJsonOfRow(r, { id: p.id, name: 'Listed' })) }), `folder "${folder}": the same bytes`)
    return reply
  }
  await page('')
  if (pgOnly) {
    // and these rows were written by PostgreSQL, not read again as plain rows
    const { json, ok, from } = assetJsonSql('a', `'Listed'::text`)
    const written = await knex.raw(`select ${json} as j, ${ok} as ok from (select ${ASSET_COLUMNS.join(', ')} from assets where project_id = ? and folder = '') a ${from} order by a.folder, a.name`, [p.id])
    t.strictSame(written.rows.map((r: any) => r.ok), top.map(() => true), 'PostgreSQL spells every row of the top folder')
  }
  // rows it leaves to assetJsonOfRow (the whole page is read again as plain rows): JavaScript's coercions and number spellings
  const odd: Array<Record<string, unknown>> = [
    { type: 'video', metadata: JSON.stringify({ audio_channels: '2' }) },
    { type: 'video', metadata: JSON.stringify({ audio_channels: [3] }) },
    { duration: 1e-7 },
    { duration: -0 },
    { duration: 1e21 },
    { size: 2 ** 53 + 2 },
    // JSON columns that are no objects, where today's readers answer them (PostgreSQL's search trigger takes only an object as metadata)
    ...(pgOnly ? [{ proxies: 'null' }, { mtime: new Date('1850-01-01T00:00:00.123Z') }, { duration: Number.NaN }] : [{ proxies: '"ab"' }, { metadata: '[1]' }, { metadata: 'null' }]),
  ]
  for (const change of odd) {
    await knex('assets').where('id', media[0].id).update(change)
    const reply = await page('Media')
    t.equal(reply.body.assets.length, media.length, JSON.stringify(change))
    await knex('assets').where('id', media[0].id).update({ type: 'other', metadata: '{}', proxies: '{}', duration: null, size: 1, mtime: null })
  }
  await page('Media')
})
