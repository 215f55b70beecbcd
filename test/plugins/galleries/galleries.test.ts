import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer, type TestUser } from '../../helpers/index.js'
import { waitForAsset } from '../../helpers/media.js'
import { createProject, readerAndStranger, teamWith, writeTree } from '../projects/fixtures.js'

/** galleries CRUD, entries from projects and uploads, virtual folders, attributes, team rights; both databases */

async function project(s: TestServer, files: Record<string, string>) {
  const p = await createProject(s, s.user, { name: `Source ${Math.random().toString(36).slice(2, 8)}` })
  await writeTree(p.path, files)
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: Object.keys(files) } })
  if (added.status !== 201) throw new Error(added.text)
  return { p, ids: Object.fromEntries(added.body.assets.map((a: any) => [a.path, a.id])) as Record<string, number> }
}

const createGallery = async (s: TestServer, user: TestUser, name: string) => {
  const r = await s.request('POST', '/galleries', { token: user.token, json: { gallery: { name } } })
  if (r.status !== 201) throw new Error(r.text)
  return r.body.gallery as { id: number; name: string }
}

onEachDatabase(t, 'galleries: create, read, update, delete, list, access and races', async (t, s) => {
  const knex = s.runtime.db.knex
  assertProblem(t, await s.request('POST', '/galleries', { json: { gallery: { name: 'x' } } }), 401)
  assertProblem(t, await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: {} } }), 422, ['gallery[name]'])
  assertProblem(t, await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: '   ' } } }), 422, ['gallery[name]'])
  assertProblem(t, await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'x', gallery_style_preset_id: 999 } } }), 422, ['gallery[gallery_style_preset_id]'])
  t.equal(Number((await knex('galleries').count({ n: '*' }).first())!.n), 0, 'nothing created by refused requests')

  // wrap: top-level attributes are taken as gallery[...]
  const created = await s.request('POST', '/galleries', { token: s.user.token, json: { name: 'Client A', description: 'first cut' } })
  t.equal(created.status, 201)
  t.match(created.body.gallery, { name: 'Client A', description: 'first cut', asset_count: 0, gallery_style_preset: null })
  const g = created.body.gallery
  assertProblem(t, await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Client A' } } }), 409, ['gallery[name]'])

  // two creates of one name at once: one wins, the other is a 409, one row
  const race = await Promise.all([1, 2].map(() => s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Raced' } } })))
  t.same(race.map((r) => r.status).sort(), [201, 409])
  t.equal(Number((await knex('galleries').where({ name: 'Raced' }).count({ n: '*' }).first())!.n), 1)

  const reader = await s.createUser('greader')
  const stranger = await s.createUser('gstranger')
  assertProblem(t, await s.request('GET', `/galleries/${g.id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/galleries/99999', { token: s.user.token }), 404)
  t.same((await s.request('GET', '/galleries', { token: stranger.token })).body.galleries, [])
  // the six team routes (identity's): give a team read
  const team = await teamWith(s, 'gallery readers', reader)
  const granted = await s.request('PUT', `/galleries/${g.id}/teams`, { token: s.user.token, json: { team_id: team, read: true } })
  t.equal(granted.status, 200)
  t.ok(granted.body.teams.some((x: any) => x.team_id === team && x.read && !x.write))
  t.match((await s.request('GET', `/galleries/${g.id}/effective_access_rights`, { token: reader.token })).body.hash[String(reader.id)], { team_id: team, read: true, write: false })
  t.equal((await s.request('GET', `/galleries/${g.id}`, { token: reader.token })).status, 200)
  t.same((await s.request('GET', '/galleries', { token: reader.token })).body.galleries.map((x: any) => x.name), ['Client A'])
  assertProblem(t, await s.request('PUT', `/galleries/${g.id}`, { token: reader.token, json: { gallery: { name: 'Mine' } } }), 403)
  assertProblem(t, await s.request('DELETE', `/galleries/${g.id}`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/galleries/${g.id}/teams`, { token: reader.token, json: { team_id: team, write: true } }), 403)

  const list = await s.request('GET', '/galleries', { token: s.user.token, query: { per_page: '1' } })
  t.equal(list.headers.get('x-total-count'), '2')
  t.equal(list.body.galleries.length, 1)
  t.equal((await s.request('GET', '/galleries', { token: s.admin.token, query: { query: 'raced' } })).body.galleries[0].name, 'Raced')

  const renamed = await s.request('PUT', `/galleries/${g.id}`, { token: s.user.token, json: { gallery: { name: 'Client A v2', description: null } } })
  t.match(renamed.body.gallery, { name: 'Client A v2', description: null })
  assertProblem(t, await s.request('PUT', `/galleries/${g.id}`, { token: s.user.token, json: { gallery: { name: 'Raced' } } }), 409, ['gallery[name]'])
  assertProblem(t, await s.request('PUT', `/galleries/${g.id}`, { token: s.user.token, json: { gallery: { rating: 3 } } }), 422)

  const deleted = await s.request('DELETE', `/galleries/${g.id}`, { token: s.user.token })
  t.equal(deleted.status, 200, deleted.text)
  t.equal(deleted.body?.gallery?.id, g.id)
  assertProblem(t, await s.request('GET', `/galleries/${g.id}`, { token: s.user.token }), 404)
  t.equal(Number((await knex('access_rights').where({ object_type: 'gallery', object_id: g.id }).count({ n: '*' }).first())!.n), 0, 'its rights are gone')

  // custom metadata through the custom-metadata module: values owned by the gallery
  const other = (await s.request('GET', '/galleries', { token: s.user.token })).body.galleries[0]
  const set = await s.request('POST', '/custom_metadata_sets', { token: s.admin.token, json: { name: 'Review', applies_to: 'both' } })
  t.equal(set.status, 201, set.text)
  const field = await s.request('POST', '/custom_metadata_fields', { token: s.admin.token, json: { name: 'Client', type: 'text', maxlen: 10, custom_metadata_set_id: set.body.custommetadataset.id } })
  t.equal(field.status, 201, field.text)
  const saved = await s.request('PUT', `/galleries/${other.id}/update_metadata`, { token: s.user.token, json: { custom_metadata: { Client: 'ACME' } } })
  t.equal(saved.status, 200, saved.text)
  t.match(saved.body.array, [{ custom_metadata_field_id: field.body.custommetadatafield.id, value: 'ACME' }])
  t.match((await s.request('GET', `/galleries/${other.id}/custom_metadata`, { token: s.user.token })).body.array, [{ value: 'ACME' }], 'read back')
  assertProblem(t, await s.request('PUT', `/galleries/${other.id}/update_metadata`, { token: s.user.token, json: { custom_metadata: { Client: 'far too long a name' } } }), 422)
  t.match((await s.request('GET', `/galleries/${other.id}/custom_metadata`, { token: s.user.token })).body.array, [{ value: 'ACME' }], 'a refused value changes nothing')

  // without the module (search depends on it, so it goes first): 404 naming it
  for (const module of ['search', 'custom-metadata']) {
    const off = await s.request('PUT', '/settings/deactivate_module', { token: s.admin.token, json: { module } })
    t.equal(off.status, 200, off.text)
  }
  for (const [m, p] of [['GET', 'custom_metadata'], ['PUT', 'update_metadata']] as const) {
    const r = await s.request(m, `/galleries/${other.id}/${p}`, { token: s.user.token, json: m === 'PUT' ? { custom_metadata: { a: 1 } } : undefined })
    assertProblem(t, r, 404)
    t.match(r.body.detail, /custom-metadata/)
  }
})

onEachDatabase(t, 'galleries: assets from projects, folders, counts, renames, moves, attributes', async (t, s) => {
  const knex = s.runtime.db.knex
  const { p, ids } = await project(s, { 'a.txt': 'a', 'b.txt': 'b', 'Sub/c.txt': 'c', 'Sub/a.txt': 'a2' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const g = await createGallery(s, s.user, 'Review')
  const add = (token: string, json: unknown) => s.request('POST', `/galleries/${g.id}/addassets`, { token, json })

  assertProblem(t, await add(s.user.token, { asset_ids: [] }), 422, ['asset_ids'])
  assertProblem(t, await add(s.user.token, { asset_ids: [ids['a.txt'], 99999] }), 404, ['asset_ids[1]'])
  assertProblem(t, await add(s.user.token, { asset_ids: [ids['a.txt']], path: '../up' }), 422, ['path'])
  assertProblem(t, await add(s.user.token, { asset_ids: [ids['a.txt']], path: 'bad:name' }), 422, ['path'])
  t.equal(Number((await knex('gallery_entries').count({ n: '*' }).first())!.n), 0, 'refused adds wrote nothing')

  // a gallery writer who cannot read the project cannot add its assets
  const own = await createGallery(s, stranger, 'Stranger gallery')
  assertProblem(t, await s.request('POST', `/galleries/${own.id}/addassets`, { token: stranger.token, json: { asset_ids: [ids['a.txt']] } }), 404, ['asset_ids'])
  // a reader of the project may add to a gallery they write
  const readerGallery = await createGallery(s, reader, 'Reader gallery')
  t.equal((await s.request('POST', `/galleries/${readerGallery.id}/addassets`, { token: reader.token, json: { asset_ids: [ids['a.txt']] } })).status, 201)

  const added = await add(s.user.token, { asset_ids: [ids['a.txt'], ids['b.txt']] })
  t.equal(added.status, 201)
  t.same(added.body.assets.map((a: any) => a.gallery_path).sort(), ['a.txt', 'b.txt'])
  t.notOk('project_id' in added.body.assets[0], 'no project in a gallery entry')
  t.notOk('path' in added.body.assets[0], 'no storage path in a gallery entry')
  // same name in one folder: the second becomes "a (2).txt"
  const more = await add(s.user.token, { asset_ids: [ids['Sub/a.txt'], ids['Sub/c.txt']], path: 'Selects/Day 1' })
  t.same(more.body.assets.map((a: any) => a.gallery_path).sort(), ['Selects/Day 1/a.txt', 'Selects/Day 1/c.txt'])
  const again = await add(s.user.token, { asset_ids: [ids['a.txt']], path: 'Selects' })
  t.equal(again.body.assets[0].gallery_path, 'a.txt', 'an asset is in a gallery once; adding it again leaves it where it is')

  const list = async (query: Record<string, string> = {}, token = s.user.token) => s.request('GET', `/galleries/${g.id}/assets`, { token, query })
  t.same((await list()).body.assets.map((a: any) => a.name), ['a.txt', 'b.txt'])
  t.same((await list({ path: 'Selects/Day 1' })).body.assets.map((a: any) => a.name), ['a.txt', 'c.txt'])
  t.equal((await list({ recursive: 'true' })).body.assets.length, 4)
  const page = await list({ recursive: 'true', per_page: '3' })
  t.equal(page.headers.get('x-total-count'), '4')
  const next = await list({ recursive: 'true', per_page: '3', after: page.headers.get('x-next-after')! })
  t.equal(next.body.assets.length, 1)
  assertProblem(t, await list({ path: 'Nope' }), 404)
  assertProblem(t, await list({}, stranger.token), 404)
  const count = async (path?: string) => (await s.request('GET', `/galleries/${g.id}/count_assets`, { token: s.user.token, query: path === undefined ? {} : { path } })).body.hash.count
  t.equal(await count(), 4)
  t.equal(await count('Selects'), 2, 'count_assets counts a folder recursively')
  t.equal(await count('Selects/Day 1'), 2)

  // folders
  const put = (what: string, json: unknown, token = s.user.token) => s.request('PUT', `/galleries/${g.id}/${what}`, { token, json })
  t.equal((await put('create_folder', { path: 'Empty/Deep' })).status, 200)
  assertProblem(t, await put('create_folder', { path: 'Empty/Deep' }), 409, ['path'])
  assertProblem(t, await put('create_folder', { path: '.hidden' }), 422, ['path'])
  assertProblem(t, await put('create_folder', { path: 'x' }, reader.token), 404)
  const racing = await Promise.all([1, 2].map(() => put('create_folder', { path: 'Twin' })))
  t.same(racing.map((r) => r.status).sort(), [200, 409], 'two creates of one folder: one wins')

  assertProblem(t, await put('rename_folder', { path: 'Selects', name: 'a/b' }), 422, ['name'])
  assertProblem(t, await put('rename_folder', { path: 'Selects', name: 'Empty' }), 409, ['name'])
  assertProblem(t, await put('rename_folder', { path: 'Missing', name: 'X' }), 404)
  t.equal((await put('rename_folder', { path: 'Selects', name: 'Picks' })).status, 200)
  t.same((await list({ path: 'Picks/Day 1' })).body.assets.map((a: any) => a.gallery_path), ['Picks/Day 1/a.txt', 'Picks/Day 1/c.txt'])
  t.equal(await count('Picks'), 2)

  assertProblem(t, await put('move_contents', { source: ['Picks', 'Nope.txt'], destination: 'Empty' }), 404)
  assertProblem(t, await put('move_contents', { source: 'Picks', destination: 'Picks/Day 1' }), 422, ['source'])
  t.equal(await count('Picks'), 2, 'a refused move moved nothing')
  t.equal((await put('move_contents', { source: ['Picks/Day 1', 'b.txt'], destination: 'Empty' })).status, 200)
  t.same((await list({ path: 'Empty' })).body.assets.map((a: any) => a.gallery_path), ['Empty/b.txt'])
  t.equal(await count('Empty'), 3)
  // a clash is a 409 and nothing moves
  await add(s.user.token, { asset_ids: [ids['Sub/a.txt']] })
  assertProblem(t, await put('move_contents', { source: 'a.txt', destination: 'Empty/Day 1' }), 409)

  assertProblem(t, await put('rename_asset', { asset_id: ids['a.txt'], name: 'x/y' }), 422, ['name'])
  t.equal((await put('rename_asset', { asset_id: ids['Sub/c.txt'], name: 'c.txt' })).status, 200, 'renaming to its own name is fine')
  const r1 = await put('rename_asset', { asset_id: ids['a.txt'], name: 'Hero shot.txt' })
  t.equal(r1.body.asset.gallery_path, 'Hero shot.txt')
  t.ok(await knex('assets').where({ id: ids['a.txt'], name: 'a.txt' }).first(), 'the file and asset keep their name')
  assertProblem(t, await put('rename_asset', { asset_id: ids['Sub/c.txt'], name: 'a.txt' }), 409, ['name'])
  assertProblem(t, await put('rename_asset', { asset_id: 99999, name: 'z' }), 404)

  // attributes, all or nothing
  const bulk = (json: unknown, token = s.user.token) => s.request('PUT', `/galleries/${g.id}/asset_attributes/bulk_update`, { token, json })
  assertProblem(t, await bulk({ asset_attributes: [{ asset_id: ids['a.txt'], rating: 6 }] }), 422)
  assertProblem(t, await bulk({ asset_attributes: [{ asset_id: ids['a.txt'], rating: 4 }, { asset_id: 99999, rating: 1 }] }), 404, ['asset_attributes[1][asset_id]'])
  t.equal((await knex('gallery_entries').where({ asset_id: ids['a.txt'], gallery_id: g.id }).first()).rating, null, 'nothing changed')
  const set = await bulk({ asset_attributes: [{ asset_id: ids['a.txt'], rating: 4, label: 'hero', color: '#ff0000', selected: 'true', client_note: 'love it' }, { asset_id: ids['b.txt'], rating: 0 }] })
  t.equal(set.status, 200)
  t.match(set.body.assets.find((a: any) => a.id === ids['a.txt']), { rating: 4, label: 'hero', color: '#ff0000', selected: true, client_note: 'love it', attributes: { rating: 4 } })
  assertProblem(t, await bulk({ asset_attributes: [{ asset_id: ids['a.txt'], rating: 1 }] }, reader.token), 404)

  // removing the asset from its project removes it from the gallery
  const before = await count()
  await knex('assets').where({ id: ids['b.txt'] }).delete()
  t.equal(await count(), before - 1, 'the entry went with its asset')
})

onEachDatabase(t, 'galleries: uploads straight into a gallery go through the assets pipeline', async (t, s) => {
  const knex = s.runtime.db.knex
  const g = await createGallery(s, s.user, 'Uploads')
  const reader = await s.createUser('upreader')
  const form = (names: string[], path?: string) => {
    const f = new FormData()
    if (path) f.append('path', path)
    for (const n of names) f.append('file', new Blob([Buffer.from(`content of ${n}`)]), n)
    return f
  }
  assertProblem(t, await s.request('POST', `/galleries/${g.id}/inject_uploads`, { token: s.user.token, multipart: new FormData() }), 422, ['file'])
  assertProblem(t, await s.request('POST', `/galleries/${g.id}/inject_uploads`, { token: reader.token, multipart: form(['a.txt']) }), 404)
  const up = await s.request('POST', `/galleries/${g.id}/inject_uploads`, { token: s.user.token, multipart: form(['notes.txt', 'notes.txt'], 'Client') })
  t.equal(up.status, 201, up.text)
  t.same(up.body.assets.map((a: any) => a.gallery_path).sort(), ['Client/notes (2).txt', 'Client/notes.txt'])
  t.ok(up.body.assets.every((a: any) => a.uploaded === true))
  const gal = await knex('galleries').where({ id: g.id }).first()
  t.ok(gal.uploads_project_id, 'the gallery has its uploads project')
  t.equal(Number((await knex('access_rights').where({ object_type: 'project', object_id: gal.uploads_project_id }).count({ n: '*' }).first())!.n), 0, 'nobody but administrators sees the uploads project')
  t.same((await s.request('GET', '/projects', { token: s.user.token })).body.projects.map((p: any) => p.id).filter((id: number) => id === gal.uploads_project_id), [])
  // analysed like any asset (the admin reads the project)
  const analysed = await waitForAsset(s, s.admin.token, up.body.assets[0].id)
  t.match(analysed, { analysis_state: 'ready', type: 'other' })
  // a second upload reuses the project
  t.equal((await s.request('POST', `/galleries/${g.id}/inject_uploads`, { token: s.user.token, multipart: form(['n1.txt']) })).status, 201)
  t.equal(Number((await knex('galleries').where({ id: g.id }).first()).uploads_project_id), Number(gal.uploads_project_id))
  t.equal((await s.request('GET', `/galleries/${g.id}/count_assets`, { token: s.user.token })).body.hash.count, 3)
  // two first uploads into a fresh gallery at once make one uploads project and keep both files
  const g2 = await createGallery(s, s.user, 'Uploads 2')
  const both = await Promise.all([1, 2].map((i) => s.request('POST', `/galleries/${g2.id}/inject_uploads`, { token: s.user.token, multipart: form([`n${i}.txt`]) })))
  t.same(both.map((r) => r.status), [201, 201], both.map((r) => r.text).join(' '))
  t.equal((await s.request('GET', `/galleries/${g2.id}/count_assets`, { token: s.user.token })).body.hash.count, 2)
})
