import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer, type TestUser } from '../../helpers/index.js'
import { createProject, readerAndStranger, waitForJob } from '../projects/fixtures.js'
import { insertAssets, makeField, makeOption, makeSet } from './fixtures.js'

const valueRows = async (s: TestServer) => Number((await s.runtime.db.knex('custom_metadata_values').count({ n: '*' }))[0].n)

async function manager(s: TestServer): Promise<TestUser> {
  const role = await s.request('POST', '/roles', { token: s.admin.token, json: { role: { name: 'Metadata', role_matrix: { 'metadata.manage': true, 'projects.create': true } } } })
  const user = await s.createUser('librarian')
  await s.request('PUT', `/users/${user.id}`, { token: s.admin.token, json: { user: { role_id: role.body.role.id } } })
  return user
}

onEachDatabase(t, 'sets, fields and options: create, list, change, copy, move, in use, delete; access by capability', async (t, s) => {
  assertProblem(t, await s.request('GET', '/custom_metadata_sets'), 401)
  assertProblem(t, await s.request('POST', '/custom_metadata_sets', { token: s.user.token, json: { custom_metadata_set: { name: 'X' } } }), 403)
  const librarian = await manager(s)
  const made = await s.request('POST', '/custom_metadata_sets', { token: librarian.token, form: { 'custom_metadata_set[name]': 'Production', 'custom_metadata_set[applies_to]': 'project' } })
  t.equal(made.status, 201, made.text)
  t.match(made.body.custommetadataset, { name: 'Production', applies_to: 'project', root: true, parent_id: null, custom_metadata_fields: [] })
  const set = made.body.custommetadataset
  const bare = await s.request('POST', '/custom_metadata_sets', { token: s.admin.token, json: { name: 'Shots', applies_to: 'asset' } })
  t.equal(bare.status, 201, 'unwrapped body')
  const shots = bare.body.custommetadataset
  assertProblem(t, await s.request('POST', '/custom_metadata_sets', { token: s.admin.token, json: { custom_metadata_set: { name: ' ', applies_to: 'galaxy' } } }), 422, ['custom_metadata_set[name]', 'custom_metadata_set[applies_to]'])
  assertProblem(t, await s.request('POST', '/custom_metadata_sets', { token: s.admin.token, json: { name: 'Sub', parent_id: 999999 } }), 422, ['parent_id'])

  const client = await s.request('POST', '/custom_metadata_fields', { token: librarian.token, json: { custom_metadata_field: { name: 'client', type: 'text', custom_metadata_set_id: set.id, maxlen: 20, pattern: '[A-Za-z ]+' } } })
  t.equal(client.status, 201, client.text)
  t.same(Object.keys(client.body), ['custommetadatafield'])
  t.match(client.body.custommetadatafield, { name: 'client', type: 'text', custom_metadata_set_id: set.id, mandatory: false, maxlen: 20, pattern: '[A-Za-z ]+', position: 0, use_in_project_name: false, select_field_options: [] })
  const bad: Array<[Record<string, unknown>, string[]]> = [
    [{ name: 'x', type: 'colour', custom_metadata_set_id: set.id }, ['custom_metadata_field[type]']],
    [{ name: 'x', type: 'text' }, ['custom_metadata_field[custom_metadata_set_id]']],
    [{ name: 'x', type: 'text', custom_metadata_set_id: set.id, pattern: '(' }, ['custom_metadata_field[pattern]']],
    [{ name: 'x', type: 'generator', custom_metadata_set_id: set.id, pattern: 'EP-{count}' }, ['custom_metadata_field[pattern]']],
    [{ name: 'x', type: 'generator', custom_metadata_set_id: set.id }, ['custom_metadata_field[pattern]']],
    [{ name: 'x', type: 'number', custom_metadata_set_id: set.id, min: 5, max: 1 }, ['custom_metadata_field[max]']],
    [{ name: 'x', type: 'date', custom_metadata_set_id: set.id, maxlen: 5 }, ['custom_metadata_field[maxlen]']],
    [{ name: 'x', type: 'text', custom_metadata_set_id: shots.id, use_in_project_name: true }, ['custom_metadata_field[use_in_project_name]']],
  ]
  for (const [f, params] of bad) assertProblem(t, await s.request('POST', '/custom_metadata_fields', { token: s.admin.token, json: { custom_metadata_field: f } }), 422, params)
  assertProblem(t, await s.request('POST', '/custom_metadata_fields', { token: s.admin.token, json: { custom_metadata_field: { name: 'client', type: 'text', custom_metadata_set_id: set.id } } }), 409, ['custom_metadata_field[name]'])

  const genre = await makeField(s, { name: 'genre', type: 'select', custom_metadata_set_id: set.id })
  const drama = await makeOption(s, genre.id, 'Drama')
  await makeOption(s, genre.id, 'Comedy')
  assertProblem(t, await s.request('POST', '/select_field_options', { token: s.admin.token, json: { select_field_option: { name: 'Drama', custom_metadata_field_id: genre.id } } }), 409, ['select_field_option[name]'])
  assertProblem(t, await s.request('POST', '/select_field_options', { token: s.admin.token, json: { select_field_option: { name: 'Y', custom_metadata_field_id: client.body.custommetadatafield.id } } }), 422, ['select_field_option[custom_metadata_field_id]'])
  assertProblem(t, await s.request('POST', '/select_field_options', { token: s.user.token, json: { select_field_option: { name: 'Y', custom_metadata_field_id: genre.id } } }), 403)
  const options = await s.request('GET', '/select_field_options', { token: s.user.token, query: { custom_metadata_field_id: String(genre.id) } })
  t.same(Object.keys(options.body), ['selectfieldoption::activerecord_relation'])
  t.same(options.body['selectfieldoption::activerecord_relation'].map((o: any) => o.name), ['Drama', 'Comedy'])

  const sets = await s.request('GET', '/custom_metadata_sets', { token: s.user.token })
  t.same(Object.keys(sets.body), ['array'])
  t.same(sets.body.array.map((x: any) => x.name), ['Production', 'Shots'])
  t.same(sets.body.array[0].custom_metadata_fields.map((f: any) => f.name), ['client', 'genre'])
  t.same(sets.body.array[0].custom_metadata_fields[1].select_field_options.map((o: any) => o.name), ['Drama', 'Comedy'])
  const fields = await s.request('GET', '/custom_metadata_fields', { token: s.user.token, query: { custom_metadata_set_id: String(set.id) } })
  t.same(fields.body.array.map((f: any) => f.name), ['client', 'genre'])
  assertProblem(t, await s.request('GET', '/custom_metadata_fields/999999', { token: s.user.token }), 404)

  // copy keeps the original (and its options); move refuses a name clash
  const copy = await s.request('PUT', `/custom_metadata_fields/${genre.id}/copy`, { token: s.admin.token, json: { custom_metadata_set_id: shots.id } })
  t.equal(copy.status, 201, copy.text)
  t.match(copy.body.custommetadatafield, { name: 'genre', custom_metadata_set_id: shots.id })
  t.same(copy.body.custommetadatafield.select_field_options.map((o: any) => o.name), ['Drama', 'Comedy'])
  const again = await s.request('PUT', `/custom_metadata_fields/${genre.id}/copy`, { token: s.admin.token, json: { custom_metadata_set_id: shots.id } })
  t.equal(again.body.custommetadatafield.name, 'genre (copy)')
  assertProblem(t, await s.request('PUT', `/custom_metadata_fields/${genre.id}/move`, { token: s.admin.token, json: { custom_metadata_set_id: shots.id } }), 409, ['custom_metadata_set_id'])
  const moved = await s.request('PUT', `/custom_metadata_fields/${again.body.custommetadatafield.id}/move`, { token: s.admin.token, json: { custom_metadata_set_id: set.id } })
  t.equal(moved.status, 200, moved.text)
  t.equal(moved.body.custommetadatafield.custom_metadata_set_id, set.id)
  assertProblem(t, await s.request('PUT', `/custom_metadata_fields/${genre.id}/move`, { token: s.user.token, json: { custom_metadata_set_id: shots.id } }), 403)

  const changed = await s.request('PUT', `/custom_metadata_fields/${genre.id}`, { token: s.admin.token, json: { mandatory: true } })
  t.equal(changed.status, 200)
  t.equal(changed.body.custommetadatafield.mandatory, true)
  t.same(Object.keys(changed.body), ['custommetadatafield'])

  // in use: values make deletes 409 unless forced
  const p = await createProject(s, s.user, { name: 'Feature', custom_metadata: { genre: 'Drama' } })
  t.equal((await s.request('GET', `/custom_metadata_fields/${genre.id}/in_use`, { token: s.user.token })).body.hash.in_use, true)
  t.equal((await s.request('GET', `/select_field_options/${drama.id}/in_use`, { token: s.user.token })).body.hash.in_use, true)
  t.equal((await s.request('GET', `/custom_metadata_sets/${set.id}/in_use`, { token: s.user.token })).body.hash.in_use, true)
  t.equal((await s.request('GET', `/custom_metadata_sets/${shots.id}/in_use`, { token: s.user.token })).body.hash.in_use, false)
  assertProblem(t, await s.request('DELETE', `/select_field_options/${drama.id}`, { token: s.admin.token }), 409)
  assertProblem(t, await s.request('DELETE', `/custom_metadata_fields/${genre.id}`, { token: s.admin.token }), 409)
  assertProblem(t, await s.request('DELETE', `/custom_metadata_sets/${set.id}`, { token: s.admin.token }), 409)
  t.equal(await valueRows(s), 1, 'nothing deleted')
  const renamed = await s.request('PUT', `/select_field_options/${drama.id}`, { token: s.admin.token, json: { name: 'Thriller' } })
  t.equal(renamed.body.selectfieldoption.name, 'Thriller')
  t.match((await s.request('GET', `/projects/${p.id}/custom_metadata`, { token: s.user.token })).body.array, [{ custom_metadata_field: { name: 'genre' }, value: 'Thriller' }], 'values show the new name')
  // the mandatory field stops being mandatory before its option goes (a project must keep its mandatory values)
  await s.request('PUT', `/custom_metadata_fields/${genre.id}`, { token: s.admin.token, json: { mandatory: false } })
  t.equal((await s.request('DELETE', `/select_field_options/${drama.id}`, { token: s.admin.token, query: { force: 'true' } })).status, 200)
  t.equal(await valueRows(s), 0, 'forced delete removed the value')
  t.equal((await s.request('DELETE', `/custom_metadata_sets/${shots.id}`, { token: s.admin.token })).status, 200)
  assertProblem(t, await s.request('GET', `/custom_metadata_sets/${shots.id}`, { token: s.user.token }), 404)
  t.equal(Number((await s.runtime.db.knex('custom_metadata_fields').where({ custom_metadata_set_id: shots.id }).count({ n: '*' }))[0].n), 0, 'its fields went with it')
})

onEachDatabase(t, 'values: every type validated (422 naming the field), all or nothing, history, access, frozen projects, asset values', async (t, s) => {
  const set = await makeSet(s, { name: 'All', applies_to: 'both' })
  const f: Record<string, any> = {}
  for (const [name, extra] of Object.entries({
    title: { type: 'text', maxlen: 10 },
    notes: { type: 'long_text' },
    reel: { type: 'text', pattern: 'R\\d{3}' },
    count: { type: 'number', min: 0, max: 10, integer: true },
    ratio: { type: 'number' },
    shot_on: { type: 'date' },
    at: { type: 'datetime' },
    approved: { type: 'boolean' },
    genre: { type: 'select' },
    tags: { type: 'multi_select' },
    owner: { type: 'user' },
    episode: { type: 'generator', pattern: 'EP-{counter:3}' },
  })) f[name] = await makeField(s, { name, custom_metadata_set_id: set.id, ...extra })
  const drama = await makeOption(s, f.genre.id, 'Drama')
  for (const tag of ['a', 'b', 'c']) await makeOption(s, f.tags.id, tag)
  const p = await createProject(s, s.user, { name: 'Doc' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const url = `/projects/${p.id}/update_metadata`

  const good = {
    title: 'Hello',
    notes: 'line 1\nline 2',
    reel: 'R001',
    [f.count.id]: '7',
    ratio: 1.5,
    shot_on: '2026-02-28',
    at: '2026-03-01T14:30:00+01:00',
    approved: 'true',
    genre: 'Drama',
    tags: ['c', 'a'],
    owner: s.user.username,
    episode: 'EP-042',
  }
  const saved = await s.request('PUT', url, { token: s.user.token, json: { custom_metadata: good } })
  t.equal(saved.status, 200, saved.text)
  t.same(Object.keys(saved.body), ['array'])
  const byName = Object.fromEntries(saved.body.array.map((d: any) => [d.custom_metadata_field.name, d]))
  t.match(byName, {
    title: { value: 'Hello', project_id: p.id, asset_id: null, custom_metadata_field_id: f.title.id, updated_by: s.user.id },
    count: { value: 7 },
    ratio: { value: 1.5 },
    shot_on: { value: '2026-02-28' },
    at: { value: '2026-03-01T13:30:00.000Z' },
    approved: { value: true },
    genre: { value: 'Drama', option_ids: [drama.id] },
    tags: { value: ['a', 'c'] },
    owner: { value: s.user.id, display_value: s.user.username },
    episode: { value: 'EP-042' },
  })
  t.match(byName.title.history, [{ old_value: null, new_value: 'Hello', user_id: s.user.id, username: s.user.username }])

  const before = await s.runtime.db.knex('custom_metadata_values').orderBy('id').select('value')
  const bad: Array<[Record<string, unknown>, string[]]> = [
    [{ title: 'x'.repeat(11) }, ['custom_metadata[title]']],
    [{ reel: 'X1' }, ['custom_metadata[reel]']],
    [{ count: 11 }, ['custom_metadata[count]']],
    [{ count: 2.5 }, ['custom_metadata[count]']],
    [{ ratio: 'many' }, ['custom_metadata[ratio]']],
    [{ shot_on: '2026-02-30' }, ['custom_metadata[shot_on]']],
    [{ at: 'yesterday' }, ['custom_metadata[at]']],
    [{ approved: 'maybe' }, ['custom_metadata[approved]']],
    [{ genre: 'Western' }, ['custom_metadata[genre]']],
    [{ tags: ['a', 'z'] }, ['custom_metadata[tags]']],
    [{ owner: 'nobody-here' }, ['custom_metadata[owner]']],
    [{ episode: 'EP-4' }, ['custom_metadata[episode]']],
    [{ nonsense: 1 }, ['custom_metadata[nonsense]']],
    [{ title: 'ok', count: -1 }, ['custom_metadata[count]']],
  ]
  for (const [values, params] of bad) assertProblem(t, await s.request('PUT', url, { token: s.user.token, json: { custom_metadata: values } }), 422, params)
  t.same(await s.runtime.db.knex('custom_metadata_values').orderBy('id').select('value'), before, 'nothing changed')
  const byId = await s.request('PUT', url, { token: s.user.token, form: { [`custom_metadata[${f.title.id}]`]: 'By id' } })
  t.equal(byId.status, 200, byId.text)
  t.ok(byId.body.array.some((d: any) => d.custom_metadata_field.name === 'title' && d.value === 'By id'), 'a form keyed by field ids keeps the ids (custom_metadata[5]=x)')
  const byQuery = await s.request('PUT', `${url}?custom_metadata[${f.title.id}]=Query`, { token: s.user.token })
  t.equal(byQuery.status, 200, byQuery.text)
  assertProblem(t, await s.request('PUT', url, { token: s.user.token, form: { [`custom_metadata[99999]`]: 'x' } }), 422, ['custom_metadata[99999]'])
  assertProblem(t, await s.request('PUT', url, { token: s.user.token, json: { custom_metadata: ['x'] } }), 422, ['custom_metadata'])
  const form = await s.request('PUT', url, { token: s.user.token, form: { 'custom_metadata[title]': 'Form' } })
  t.equal(form.status, 200, 'forms keyed by name work')

  // clearing, history
  const cleared = await s.request('PUT', url, { token: s.user.token, json: { custom_metadata: { title: null, [f.notes.id]: null } } })
  t.notOk(cleared.body.array.some((d: any) => ['title', 'notes'].includes(d.custom_metadata_field.name)))
  const hist = await s.runtime.db.knex('custom_metadata_history').where({ owner_type: 'project', owner_id: p.id, field_name: 'title' }).orderBy('id').select('old_value', 'new_value')
  t.same(hist, [
    { old_value: null, new_value: 'Hello' },
    { old_value: 'Hello', new_value: 'By id' },
    { old_value: 'By id', new_value: 'Query' },
    { old_value: 'Query', new_value: 'Form' },
    { old_value: 'Form', new_value: null },
  ])

  // access: read for reading, write for writing, 404 for strangers, 423 when frozen
  t.equal((await s.request('GET', `/projects/${p.id}/custom_metadata`, { token: reader.token })).status, 200)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/custom_metadata`), 401)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/custom_metadata`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', url, { token: reader.token, json: { custom_metadata: { title: 'R' } } }), 403)
  assertProblem(t, await s.request('PUT', url, { token: stranger.token, json: { custom_metadata: { title: 'R' } } }), 404)
  assertProblem(t, await s.request('PUT', '/projects/999999/update_metadata', { token: s.user.token, json: { custom_metadata: { title: 'R' } } }), 404)
  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('PUT', url, { token: s.user.token, json: { custom_metadata: { title: 'F' } } }), 423)
  t.equal((await s.request('GET', `/projects/${p.id}/custom_metadata`, { token: s.user.token })).status, 200, 'reads work while frozen')
  t.equal((await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })).status, 200)

  // assets: through their project
  const [assetId] = await insertAssets(s, p.id, 1)
  const a = await s.request('PUT', `/assets/${assetId}/update_metadata`, { token: s.user.token, json: { custom_metadata: { reel: 'R777', genre: drama.id } } })
  t.equal(a.status, 200, a.text)
  t.match(a.body.array, [{ asset_id: assetId, project_id: null, value: 'R777' }, { value: 'Drama' }])
  assertProblem(t, await s.request('PUT', `/assets/${assetId}/update_metadata`, { token: reader.token, json: { custom_metadata: { reel: 'R778' } } }), 403)
  assertProblem(t, await s.request('GET', `/assets/${assetId}/custom_metadata`, { token: stranger.token }), 404)
  t.equal((await s.request('GET', `/assets/${assetId}/custom_metadata`, { token: reader.token })).body.array.length, 2)

  // single values: POST, PUT, DELETE /custom_metadata
  const one = await s.request('POST', '/custom_metadata', { token: s.user.token, json: { custom_metadatum: { custom_metadata_field_id: f.title.id, asset_id: assetId, value: 'Take 1' } } })
  t.equal(one.status, 201, one.text)
  t.match(one.body.custommetadatum, { asset_id: assetId, value: 'Take 1', custom_metadata_field: { name: 'title' } })
  assertProblem(t, await s.request('POST', '/custom_metadata', { token: s.user.token, json: { custom_metadatum: { custom_metadata_field_id: f.title.id, asset_id: assetId, value: 'again' } } }), 422, ['custom_metadatum[custom_metadata_field_id]'])
  assertProblem(t, await s.request('POST', '/custom_metadata', { token: s.user.token, json: { custom_metadatum: { custom_metadata_field_id: f.count.id, asset_id: assetId, value: 'x' } } }), 422, ['custom_metadatum[value]'])
  assertProblem(t, await s.request('POST', '/custom_metadata', { token: reader.token, json: { custom_metadatum: { custom_metadata_field_id: f.count.id, asset_id: assetId, value: 1 } } }), 403)
  const id = one.body.custommetadatum.id
  const put = await s.request('PUT', `/custom_metadata/${id}`, { token: s.user.token, json: { value: 'Take 2' } })
  t.equal(put.body.custommetadatum.value, 'Take 2')
  assertProblem(t, await s.request('PUT', `/custom_metadata/${id}`, { token: s.user.token, json: { value: 'x'.repeat(11) } }), 422, ['value'])
  assertProblem(t, await s.request('PUT', `/custom_metadata/${id}`, { token: reader.token, json: { value: 'x' } }), 403)
  t.equal((await s.request('DELETE', `/custom_metadata/${id}`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('DELETE', `/custom_metadata/${id}`, { token: s.user.token }), 404)

  // generator: peek, check, take
  const peek = await s.request('GET', '/custom_metadata/new', { token: s.user.token, query: { custom_metadata_field_id: String(f.episode.id) } })
  t.match(peek.body.custommetadatum, { value: 'EP-001', valid: true })
  t.match((await s.request('GET', '/custom_metadata/new', { token: s.user.token, query: { field_id: String(f.episode.id), value: 'EP-042' } })).body.custommetadatum, { valid: true, free: false })
  t.match((await s.request('GET', '/custom_metadata/new', { token: s.user.token, query: { field_id: String(f.episode.id), value: 'XX' } })).body.custommetadatum, { valid: false, free: false })
  assertProblem(t, await s.request('GET', '/custom_metadata/new', { token: s.user.token, query: { field_id: String(f.title.id) } }), 422, ['field_id'])
  const took = await s.request('POST', '/custom_metadata', { token: s.user.token, json: { custom_metadatum: { custom_metadata_field_id: f.episode.id, asset_id: assetId } } })
  t.equal(took.body.custommetadatum.value, 'EP-001')
  assertProblem(t, await s.request('PUT', `/assets/${assetId}/update_metadata`, { token: s.user.token, json: { custom_metadata: { notes: 'x', episode: 'EP-042' } } }), 409)

  // scoped sets
  t.same((await s.request('GET', `/projects/${p.id}/scoped_custom_metadata_sets`, { token: reader.token })).body.array.map((x: any) => x.name), ['All'])
  await makeSet(s, { name: 'Remote', applies_to: 'project', project_id: p.id })
  t.same((await s.request('GET', `/projects/${p.id}/scoped_custom_metadata_sets`, { token: reader.token })).body.array.map((x: any) => x.name), ['Remote'])
  t.same((await s.request('GET', '/custom_metadata_sets', { token: reader.token })).body.array.map((x: any) => x.name), ['All'], 'scoped sets are not global')
  assertProblem(t, await s.request('GET', `/projects/${p.id}/scoped_custom_metadata_sets`, { token: stranger.token }), 404)

  // values go with their owner
  await s.runtime.db.knex('assets').where({ id: assetId }).delete()
  t.equal(Number((await s.runtime.db.knex('custom_metadata_values').where({ owner_type: 'asset' }).count({ n: '*' }))[0].n), 0, 'a destroyed asset takes its values')
})

onEachDatabase(t, 'generator: 50 concurrent takers get 50 distinct, gap-free values', async (t, s) => {
  const set = await makeSet(s, { name: 'Numbers', applies_to: 'asset' })
  const gen = await makeField(s, { name: 'number', type: 'generator', custom_metadata_set_id: set.id, pattern: 'EP-{counter:4}' })
  const p = await createProject(s, s.user, { name: 'Race' })
  const ids = await insertAssets(s, p.id, 50)
  const replies = await Promise.all(ids.map((id) => s.request('POST', '/custom_metadata', { token: s.user.token, json: { custom_metadatum: { custom_metadata_field_id: gen.id, asset_id: id } } })))
  t.same(replies.map((r) => r.status), ids.map(() => 201), replies.find((r) => r.status !== 201)?.text ?? 'all created')
  const values = replies.map((r) => r.body.custommetadatum.value).sort()
  t.same(values, Array.from({ length: 50 }, (_, i) => `EP-${String(i + 1).padStart(4, '0')}`), 'EP-0001 … EP-0050, each once')
  t.equal((await s.request('GET', '/custom_metadata/new', { token: s.user.token, query: { field_id: String(gen.id) } })).body.custommetadatum.value, 'EP-0051')
})

onEachDatabase(t, 'project creation: mandatory fields (422 naming each), generated numbers and names composed of values', async (t, s) => {
  const set = await makeSet(s, { name: 'Production', applies_to: 'project' })
  const client = await makeField(s, { name: 'client', type: 'text', custom_metadata_set_id: set.id, mandatory: true, use_in_project_name: true })
  const episode = await makeField(s, { name: 'episode', type: 'generator', custom_metadata_set_id: set.id, pattern: 'EP{counter:2}', use_in_project_name: true })
  await makeField(s, { name: 'budget', type: 'number', custom_metadata_set_id: set.id, mandatory: true })
  const before = Number((await s.runtime.db.knex('projects').count({ n: '*' }))[0].n)
  const missing = await s.request('POST', '/projects', { token: s.user.token, json: { project: { name: 'X' } } })
  assertProblem(t, missing, 422, ['custom_metadata[client]', 'custom_metadata[budget]'])
  assertProblem(t, await s.request('POST', '/projects', { token: s.user.token, json: { project: { custom_metadata: { client: 'ACME', budget: 'lots' } } } }), 422, ['custom_metadata[budget]'])
  t.equal(Number((await s.runtime.db.knex('projects').count({ n: '*' }))[0].n), before, 'no project made')
  const made = await s.request('POST', '/projects', { token: s.user.token, json: { project: { custom_metadata: { client: 'ACME/Corp', budget: 1000, note: 'free-form' } } } })
  t.equal(made.status, 201, made.text)
  t.equal(made.body.project.name, 'ACME_Corp_EP01', 'name from client and episode through the safe-name rules')
  t.same(made.body.project.custom_metadata, { note: 'free-form' }, 'keys that name no field stay free-form')
  const values = await s.request('GET', `/projects/${made.body.project.id}/custom_metadata`, { token: s.user.token })
  t.same(values.body.array.map((d: any) => [d.custom_metadata_field.name, d.value]), [['client', 'ACME/Corp'], ['episode', 'EP01'], ['budget', 1000]])
  // saving a project's metadata keeps its mandatory fields
  assertProblem(t, await s.request('PUT', `/projects/${made.body.project.id}/update_metadata`, { token: s.user.token, json: { custom_metadata: { [client.id]: null } } }), 422, ['custom_metadata[client]'])
  const cid = values.body.array[0].id
  assertProblem(t, await s.request('DELETE', `/custom_metadata/${cid}`, { token: s.user.token }), 422, ['custom_metadata[client]'])
  void episode
})

onEachDatabase(t, 'bulk update: all or nothing, access, a job above 1,000 assets', async (t, s) => {
  const set = await makeSet(s, { name: 'Shots', applies_to: 'asset' })
  const reel = await makeField(s, { name: 'reel', type: 'text', custom_metadata_set_id: set.id })
  const count = await makeField(s, { name: 'count', type: 'number', custom_metadata_set_id: set.id })
  const p = await createProject(s, s.user, { name: 'Bulk' })
  const { reader } = await readerAndStranger(s, p.id)
  const ids = await insertAssets(s, p.id, 1200)
  const small = ids.slice(0, 10)
  const r = await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: small, custom_metadata: { reel: 'A001', count: 3 } } })
  t.equal(r.status, 200, r.text)
  t.match(r.body.hash, { count: 10, changed: 20 })
  t.equal(Number((await s.runtime.db.knex('custom_metadata_values').where({ custom_metadata_field_id: reel.id, text_value: 'A001' }).count({ n: '*' }))[0].n), 10)
  assertProblem(t, await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: small, custom_metadata: { reel: 'B', count: 'x' } } }), 422, ['custom_metadata[count]'])
  assertProblem(t, await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: [small[0], 999999], custom_metadata: { reel: 'B' } } }), 422, ['asset_ids[1]'])
  assertProblem(t, await s.request('POST', '/assets/bulk_update_custom_metadata', { token: reader.token, json: { asset_ids: small, custom_metadata: { reel: 'B' } } }), 403)
  assertProblem(t, await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: Array.from({ length: 10_001 }, (_, i) => i + 1), custom_metadata: { reel: 'B' } } }), 422, ['asset_ids'])
  t.equal(Number((await s.runtime.db.knex('custom_metadata_values').where({ text_value: 'B' }).count({ n: '*' }))[0].n), 0, 'nothing written')
  const cleared = await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: small.slice(0, 5), custom_metadata: { [count.id]: null } } })
  t.match(cleared.body.hash, { count: 5, changed: 5 })
  // the same again changes nothing and records nothing; a form keyed by ids, with an asset_ids[] list
  const historyOf = () => s.runtime.db.knex('custom_metadata_history').whereIn('owner_id', small).where({ owner_type: 'asset' }).orderBy('id').select('owner_id', 'field_name', 'old_value', 'new_value')
  const before = await historyOf()
  t.match((await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: small, custom_metadata: { reel: 'A001', [count.id]: null } } })).body.hash, { count: 10, changed: 5 })
  const rows = (list: any[]) => list.map((h) => [Number(h.owner_id), h.field_name, h.old_value, h.new_value].join(' ')).sort()
  t.same(rows((await historyOf()).slice(before.length)), rows(small.slice(5).map((id) => ({ owner_id: id, field_name: 'count', old_value: '3', new_value: null }))), 'history only for what changed')
  const viaForm = await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, form: { 'asset_ids[]': small.slice(0, 3).map(String), [`custom_metadata[${reel.id}]`]: 'F9', [`custom_metadata[${count.id}]`]: '7' } })
  t.equal(viaForm.status, 200, viaForm.text)
  t.match(viaForm.body.hash, { count: 3, changed: 6 })
  t.same(
    rows((await historyOf()).slice(-6)),
    rows([...small.slice(0, 3).map((id) => ({ owner_id: id, field_name: 'reel', old_value: 'A001', new_value: 'F9' })), ...small.slice(0, 3).map((id) => ({ owner_id: id, field_name: 'count', old_value: null, new_value: '7' }))]),
  )
  const indexed = await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, form: { 'asset_ids[0]': String(small[3]), 'asset_ids[1]': String(small[4]), 'custom_metadata[reel]': 'F9' } })
  t.match(indexed.body.hash, { count: 2, changed: 2 }, 'a list the route declares may come with indices (asset_ids[0]=…)')
  const job = await s.request('POST', '/assets/bulk_update_custom_metadata', { token: s.user.token, json: { asset_ids: ids, custom_metadata: { reel: 'C' } } })
  t.equal(job.status, 202, job.text)
  const done = await waitForJob(s, s.user.token, job.body.job.id, { timeoutMs: 60_000 })
  t.equal(done.state, 'finished', JSON.stringify(done))
  t.equal(Number((await s.runtime.db.knex('custom_metadata_values').where({ custom_metadata_field_id: reel.id, text_value: 'C' }).count({ n: '*' }))[0].n), 1200)
})
