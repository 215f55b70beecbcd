import { mkdtempSync, rmSync } from 'node:fs'
import { mkdir, readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, grant, readerAndStranger, waitForJob } from '../../../core/testing/index.js'
import { exists, listTree, makeTemplate, row } from './fixtures.js'

const media = mkdtempSync(path.join(tmpdir(), 'mamkit-media-'))
t.teardown(() => rmSync(media, { recursive: true, force: true }))

onEachDatabase(
  t,
  'create and validate projects',
  async (t, s) => {
    const storageRoot = path.join(s.dataDir, 'storage', 'default')
    const tpl = await makeTemplate(s, { name: 'Basic', files: { 'Media/': null, 'Docs/readme.txt': 'hello' } })

    assertProblem(t, await s.request('POST', '/projects', { json: { name: 'Anonymous' } }), 401)
    assertProblem(t, await s.request('POST', '/projects/validate', { json: { name: 'Anonymous' } }), 401)

    // validate: answers and changes nothing
    const valid = await s.request('POST', '/projects/validate', { token: s.user.token, json: { project: { name: 'Trailer', template_id: tpl.id } } })
    t.equal(valid.status, 200)
    t.same(valid.body, { hash: { valid: true, name: 'Trailer', storage: 'default', folder: 'Trailer', template_id: tpl.id } })
    t.notOk(await exists(path.join(storageRoot, 'Trailer')), 'validate creates no folder')
    t.equal(Number((await s.runtime.db.knex('projects').count({ n: '*' }))[0].n), 0, 'validate creates no row')

    // create, JSON nested under project
    const created = await s.request('POST', '/projects', { token: s.user.token, json: { project: { name: 'Trailer', template_id: tpl.id, custom_metadata: { client: 'ACME' } } } })
    t.equal(created.status, 201)
    const p = created.body.project
    t.match(p, {
      id: Number,
      uuid: /^[0-9a-f-]{36}$/,
      name: 'Trailer',
      storage: 'default',
      // absolute server paths are for administrators: others see the folder inside the storage
      folder: 'Trailer',
      path: 'Trailer',
      template_id: tpl.id,
      is_library_project: false,
      custom_metadata: { client: 'ACME' },
      frozen: false,
      created_by: s.user.id,
      deleted: false,
      size: 5,
    })
    t.equal((await s.request('GET', `/projects/${p.id}`, { token: s.admin.token })).body.project.path, path.join(storageRoot, 'Trailer'), 'an administrator sees the absolute path')
    p.path = path.join(storageRoot, 'Trailer')
    t.same(await listTree(p.path), ['Docs/', 'Docs/readme.txt', 'Media/'])
    const dbRow = await row(s, 'projects', { id: p.id })
    t.equal(dbRow.folder, 'Trailer')
    t.equal(Number(dbRow.created_by_id), s.user.id)
    const own = await row(s, 'teams', { owner_id: s.user.id })
    const right = await row(s, 'access_rights', { object_type: 'project', object_id: p.id, team_id: own.id })
    t.ok(right && Boolean(right.write) && Boolean(right.read), "the creator's own team can write the project")
    t.same((await readdir(storageRoot)).filter((n) => n !== 'Trailer'), ['.mamkit-trash'], 'no staging folder is left behind')
    t.same(await readdir(path.join(storageRoot, '.mamkit-trash')), [], 'staging area empty')

    // create, form with top-level names and templatename, on another storage
    const onMedia = await s.request('POST', '/projects', { token: s.user.token, form: { name: `Promo ${s.db}`, templatename: 'Basic', storage: 'media_1', is_library_project: 'true' } })
    t.equal(onMedia.status, 201)
    t.match(onMedia.body.project, { storage: 'media_1', path: `Promo ${s.db}` })
    t.equal(onMedia.body.project.is_library_project, true)
    t.equal((await s.request('GET', `/projects/${onMedia.body.project.id}`, { token: s.admin.token })).body.project.path, path.join(media, `Promo ${s.db}`))
    t.same(await listTree(path.join(media, `Promo ${s.db}`)), ['Docs/', 'Docs/readme.txt', 'Media/'])

    // without a template: an empty folder; names with separators become one folder name
    const plain = await createProject(s, s.user, { name: 'a/b: c' })
    t.equal(path.basename(plain.path), 'a_b_ c')
    t.same(await listTree(plain.path), [])

    // bad input names the parameter and changes nothing
    const before = await listTree(storageRoot)
    const count = async () => Number((await s.runtime.db.knex('projects').count({ n: '*' }))[0].n)
    const rows = await count()
    for (const route of ['/projects', '/projects/validate']) {
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: {} }), 422, ['name'])
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { name: '   ' } }), 422, ['name'])
      const unknownStorage = await s.request('POST', route, { token: s.user.token, json: { name: 'X', storage: 'nowhere' } })
      assertProblem(t, unknownStorage, 422, ['storage'])
      t.match(unknownStorage.body.errors[0].message, /^"nowhere" is not a configured storage \(known: default, media_1\); an administrator adds storages with MAMKIT_STORAGES=/, 'says how to add one')
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { name: 'X', template_id: 9999 } }), 422, ['template_id'])
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { name: 'X', templatename: 'Nope' } }), 422, ['templatename'])
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { name: 'X', template_id: 'one' } }), 422, ['template_id'])
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { project: { name: 'X', owner: 1 } } }), 422, ['project[owner]'])
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { name: 'x'.repeat(201) } }), 422, ['name'])
      assertProblem(t, await s.request('POST', route, { token: s.user.token, json: { name: 'Trailer' } }), 409, ['name'])
    }
    t.equal(await count(), rows, 'no row written by refused requests')
    t.same(await listTree(storageRoot), before, 'no folder written by refused requests')

    // a folder that exists on the storage but is no project is not taken over; dot names never reach the trash
    await mkdir(path.join(storageRoot, 'Someone else'))
    assertProblem(t, await s.request('POST', '/projects', { token: s.user.token, json: { name: 'Someone else' } }), 409, ['name'])
    const dotted = await createProject(s, s.user, { name: '.mamkit-trash' })
    t.equal(dotted.path, path.join(storageRoot, '_mamkit-trash'))
  },
  { config: { plugins: { storage: { storages: { media_1: media } } } } },
)

onEachDatabase(t, 'users without the projects.create capability get 403', async (t, s) => {
  const role = await s.request('POST', '/roles', { token: s.admin.token, json: { role: { name: 'Viewer', role_matrix: { 'projects.create': false } } } })
  t.equal(role.status, 201)
  const viewer = await s.createUser('viewer')
  t.equal((await s.request('PUT', `/users/${viewer.id}`, { token: s.admin.token, json: { user: { role_id: role.body.role.id } } })).status, 200)
  assertProblem(t, await s.request('POST', '/projects', { token: viewer.token, json: { name: 'Nope' } }), 403)
  assertProblem(t, await s.request('POST', '/projects/validate', { token: viewer.token, json: { name: 'Nope' } }), 403)
  t.notOk(await exists(path.join(s.dataDir, 'storage', 'default', 'Nope')))
})

onEachDatabase(t, 'list, search, show and total size follow access rights', async (t, s) => {
  const a = await createProject(s, s.user, { name: 'Alpha Trailer' })
  await createProject(s, s.user, { name: 'Beta Promo', is_library_project: true })
  const c = await createProject(s, s.admin, { name: 'Gamma 100% Trailer' })
  const d = await createProject(s, s.admin, { name: 'Delta_x' })
  const { reader, stranger } = await readerAndStranger(s, a.id)

  assertProblem(t, await s.request('GET', '/projects'), 401)
  assertProblem(t, await s.request('GET', '/projects/search', { query: { name: 'a' } }), 401)
  assertProblem(t, await s.request(`GET`, `/projects/${a.id}`), 401)
  assertProblem(t, await s.request('GET', '/total_project_size'), 401)

  const names = (reply: any) => reply.body.projects.map((p: any) => p.name)
  const all = await s.request('GET', '/projects', { token: s.admin.token })
  t.equal(all.status, 200)
  t.same(names(all), ['Alpha Trailer', 'Beta Promo', 'Delta_x', 'Gamma 100% Trailer'], 'administrators see every project, by name')
  t.equal(all.headers.get('x-total-count'), '4')
  t.same(names(await s.request('GET', '/projects', { token: s.user.token })), ['Alpha Trailer', 'Beta Promo'], 'users see what their teams can read')
  t.same(names(await s.request('GET', '/projects', { token: reader.token })), ['Alpha Trailer'])
  t.same(names(await s.request('GET', '/projects', { token: stranger.token })), [])

  // filters
  const q = async (query: Record<string, string>, route = '/projects') => names(await s.request('GET', route, { token: s.admin.token, query }))
  t.same(await q({ name: 'trailer' }), ['Alpha Trailer', 'Gamma 100% Trailer'], 'name substring, any case')
  t.same(await q({ name: 'Trailer' }, '/projects/search'), ['Alpha Trailer', 'Gamma 100% Trailer'], 'search by name')
  t.same(await q({ name: '100%' }), ['Gamma 100% Trailer'], '% is literal')
  t.same(await q({ name: 'a_' }), ['Delta_x'], '_ is literal')
  t.same(await q({ library: 'true' }), ['Beta Promo'])
  t.same(await q({ library: 'false' }), ['Alpha Trailer', 'Delta_x', 'Gamma 100% Trailer'])
  t.same(await q({ online: 'true' }), ['Alpha Trailer', 'Delta_x', 'Gamma 100% Trailer'], 'online: not a library')
  t.same(await q({ online: 'false' }), ['Beta Promo'])
  t.same(await q({ archived: 'true' }), [])
  t.same(await q({ archived: 'false' }), ['Alpha Trailer', 'Beta Promo', 'Delta_x', 'Gamma 100% Trailer'])
  t.same(await q({ storage: 'default' }), ['Alpha Trailer', 'Beta Promo', 'Delta_x', 'Gamma 100% Trailer'])
  t.same(await q({ storage: 'other' }), [])
  t.equal((await s.request('PUT', `/projects/${d.id}/freeze`, { token: s.admin.token })).status, 200)
  t.same(await q({ frozen: 'true' }), ['Delta_x'])
  t.same(await q({ frozen: 'false' }), ['Alpha Trailer', 'Beta Promo', 'Gamma 100% Trailer'])
  const frozenOne = (await s.request('GET', '/projects', { token: s.admin.token, query: { frozen: 'true' } })).body.projects[0]
  t.match(frozenOne, { frozen: true, frozen_by_id: s.admin.id })

  // pagination
  const page2 = await s.request('GET', '/projects', { token: s.admin.token, query: { per_page: '3', page: '2' } })
  t.same(names(page2), ['Gamma 100% Trailer'])
  t.equal(page2.headers.get('x-total-count'), '4')
  t.same(await q({ per_page: '2', page: '1' }), ['Alpha Trailer', 'Beta Promo'])
  t.same(await q({ per_page: '2', page: '3' }), [])
  assertProblem(t, await s.request('GET', '/projects', { token: s.admin.token, query: { per_page: '501' } }), 422, ['per_page'])
  assertProblem(t, await s.request('GET', '/projects', { token: s.admin.token, query: { page: '0' } }), 422, ['page'])
  assertProblem(t, await s.request('GET', '/projects', { token: s.admin.token, query: { library: 'maybe' } }), 422, ['library'])
  assertProblem(t, await s.request('GET', '/projects', { token: s.admin.token, query: { colour: 'red' } }), 422, ['colour'])

  // show
  const shown = await s.request('GET', `/projects/${a.id}.json`, { token: reader.token })
  t.equal(shown.status, 200)
  t.match(shown.body.project, { id: a.id, name: 'Alpha Trailer', storage: 'default', path: 'Alpha Trailer', created_by: s.user.id })
  t.notOk(shown.text.includes(s.dataDir), 'no server path for a reader')
  t.match((await s.request('GET', `/projects/${a.id}`, { token: s.admin.token })).body.project, { path: a.path }, 'the absolute path for an administrator')
  assertProblem(t, await s.request('GET', `/projects/${a.id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', `/projects/${c.id}`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', '/projects/99999', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('GET', '/projects/abc', { token: s.admin.token }), 422, ['id'])

  // total size counts what the caller can read
  await s.runtime.db.knex('projects').where({ id: a.id }).update({ size: 1000 })
  await s.runtime.db.knex('projects').where({ id: c.id }).update({ size: 5_000_000_000 })
  t.same((await s.request('GET', '/total_project_size', { token: s.admin.token })).body, { hash: { total_project_size: 5_000_001_000, projects: 4 } })
  t.same((await s.request('GET', '/total_project_size', { token: s.user.token })).body, { hash: { total_project_size: 1000, projects: 2 } })
  t.same((await s.request('GET', '/total_project_size', { token: stranger.token })).body, { hash: { total_project_size: 0, projects: 0 } })
})

onEachDatabase(t, 'update, rename, delete_description, flag_as_project and encoding_priority', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Feature', description: 'first cut' })
  const lib = await createProject(s, s.user, { name: 'Library', is_library_project: true })
  const other = await createProject(s, s.admin, { name: 'Admin only' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const readersTeam = (await row(s, 'teams', { name: 'readers' })).id
  await grant(s, lib.id, readersTeam, { read: true })

  // update
  const updated = await s.request('PUT', `/projects/${p.id}`, {
    token: s.user.token,
    json: { project: { description: 'second cut', alternative_name: 'FT', custom_metadata: { client: 'ACME' }, encoding_priority: 5 } },
  })
  t.equal(updated.status, 200)
  t.match(updated.body.project, { description: 'second cut', alternative_name: 'FT', custom_metadata: { client: 'ACME' }, encoding_priority: 5 })
  const merged = await s.request('PUT', `/projects/${p.id}`, { token: s.user.token, form: { 'custom_metadata[reel]': '7' } })
  t.same(merged.body.project.custom_metadata, { client: 'ACME', reel: '7' }, 'custom metadata is merged')
  const r1 = await row(s, 'projects', { id: p.id })
  t.equal(r1.description, 'second cut')
  t.equal(r1.alternative_name, 'FT')
  t.equal(Number(r1.encoding_priority), 5)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { json: { description: 'x' } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: reader.token, json: { description: 'x' } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: stranger.token, json: { description: 'x' } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${other.id}`, { token: s.user.token, json: { description: 'x' } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: s.user.token, json: { name: 'Other' } }), 422, ['name'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: s.user.token, json: { storage: 'default' } }), 422, ['storage'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: s.user.token, json: { encoding_priority: 101 } }), 422, ['encoding_priority'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: s.user.token, json: { project: { is_library_project: 'perhaps' } } }), 422, ['project[is_library_project]'])
  t.equal((await row(s, 'projects', { id: p.id })).description, 'second cut', 'refused updates change nothing')

  // delete_description
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/delete_description`, { token: reader.token }), 403)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/delete_description`), 401)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/delete_description`, { token: stranger.token }), 404)
  const cleared = await s.request('DELETE', `/projects/${p.id}/delete_description`, { token: s.user.token })
  t.equal(cleared.status, 200)
  t.equal(cleared.body.project.description, null)
  t.equal((await row(s, 'projects', { id: p.id })).description, null)

  // rename moves the folder
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename`, { token: reader.token, json: { name: 'Renamed' } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename`, { token: stranger.token, json: { name: 'Renamed' } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename`, { json: { name: 'Renamed' } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: {} }), 422, ['name'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: '' } }), 422, ['name'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'Library' } }), 409, ['name'])
  t.ok(await exists(p.path), 'refused renames leave the folder')
  await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: 'Media' } })
  const renamed = await s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'Feature Final' } })
  t.equal(renamed.status, 200)
  t.equal(renamed.body.project.name, 'Feature Final')
  t.equal(renamed.body.project.path, 'Feature Final')
  t.notOk(await exists(p.path), 'old folder gone')
  t.same(await listTree(path.join(path.dirname(p.path), 'Feature Final')), ['Media/'], 'contents moved along')
  t.equal((await row(s, 'projects', { id: p.id })).folder, 'Feature Final')
  const sameFolder = await s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, form: { name: 'Feature Final' } })
  t.equal(sameFolder.status, 200, 'renaming to the same name is a no-op')

  // flag_as_project
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/flag_as_project`, { token: s.user.token }), 422, ['id'])
  assertProblem(t, await s.request('PUT', `/projects/${lib.id}/flag_as_project`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${lib.id}/flag_as_project`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${lib.id}/flag_as_project`), 401)
  const flagged = await s.request('PUT', `/projects/${lib.id}/flag_as_project`, { token: s.user.token })
  t.equal(flagged.status, 200)
  t.equal(flagged.body.project.is_library_project, false)
  t.notOk(Boolean((await row(s, 'projects', { id: lib.id })).is_library_project))

  // encoding_priority in bulk: all or nothing
  const bulk = await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [p.id, lib.id], encoding_priority: -3 } })
  t.equal(bulk.status, 200)
  t.same(bulk.body.projects.map((x: any) => [x.id, x.encoding_priority]), [[p.id, -3], [lib.id, -3]])
  const priorities = async () => (await s.runtime.db.knex('projects').orderBy('id').select('encoding_priority')).map((r: any) => Number(r.encoding_priority))
  t.same(await priorities(), [-3, -3, 0])
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { json: { project_ids: [p.id], encoding_priority: 1 } }), 401)
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { token: reader.token, json: { project_ids: [p.id, lib.id], encoding_priority: 9 } }), 403)
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [p.id, other.id], encoding_priority: 9 } }), 404)
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [p.id, 99999], encoding_priority: 9 } }), 404)
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [], encoding_priority: 9 } }), 422, ['project_ids'])
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [p.id], encoding_priority: 'high' } }), 422, ['encoding_priority'])
  assertProblem(t, await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [p.id] } }), 422, ['encoding_priority'])
  t.same(await priorities(), [-3, -3, 0], 'refused bulk changes change nothing')
  const byForm = await s.request('POST', '/projects/encoding_priority', { token: s.admin.token, form: { 'project_ids[]': [String(p.id), String(other.id)], encoding_priority: '2' } })
  t.equal(byForm.status, 200)
  t.same(await priorities(), [2, -3, 2])
})

onEachDatabase(t, 'delete moves the folder into the trash; DELETE /trash purges it', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'T', files: { 'A/b.txt': 'bytes' } })
  const p = await createProject(s, s.user, { name: 'Doomed', template_id: tpl.id })
  const keep = await createProject(s, s.user, { name: 'Kept' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const root = path.dirname(p.path)

  assertProblem(t, await s.request('DELETE', `/projects/${p.id}`), 401)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}`, { token: reader.token }), 403)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('DELETE', '/projects/99999', { token: s.admin.token }), 404)
  t.ok(await exists(p.path), 'refused deletes leave the folder')

  const deleted = await s.request('DELETE', `/projects/${p.id}`, { token: s.user.token })
  t.equal(deleted.status, 200)
  t.equal(deleted.body.project.deleted, true)
  const trashed = path.join(root, '.mamkit-trash', p.uuid)
  t.equal(deleted.body.project.path, `.mamkit-trash/${p.uuid}`)
  t.notOk(await exists(p.path), 'folder left its place')
  t.same(await listTree(trashed), ['A/', 'A/b.txt'], 'folder is in the trash with its contents')
  const r = await row(s, 'projects', { id: p.id })
  t.ok(Boolean(r.deleted))
  t.ok(r.deleted_at)
  t.equal(r.folder, `.mamkit-trash/${p.uuid}`)
  t.equal(r.trash_folder, 'Doomed')

  assertProblem(t, await s.request('GET', `/projects/${p.id}`, { token: s.user.token }), 404, undefined)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: s.admin.token, json: { description: 'x' } }), 404)
  t.same((await s.request('GET', '/projects', { token: s.admin.token })).body.projects.map((x: any) => x.id), [keep.id], 'deleted projects are not listed')
  // the name is free again on the storage
  const again = await createProject(s, s.user, { name: 'Doomed' })
  t.ok(await exists(again.path))

  // purge
  assertProblem(t, await s.request('DELETE', '/trash'), 401)
  assertProblem(t, await s.request('DELETE', '/trash', { token: s.user.token }), 403)
  t.ok(await exists(trashed), 'non-admins purge nothing')
  const purge = await s.request('DELETE', '/trash', { token: s.admin.token })
  t.equal(purge.status, 202)
  t.match(purge.body.job, { id: Number, action: 'projects.purge-trash' })
  const job = await waitForJob(s, s.admin.token, purge.body.job.id)
  t.equal(job.state, 'finished')
  t.same(job.result, { purged: 1 })
  t.notOk(await exists(trashed), 'trash folder removed')
  t.notOk(await row(s, 'projects', { id: p.id }), 'row removed')
  t.notOk(await row(s, 'access_rights', { object_type: 'project', object_id: p.id }), 'rights removed')
  t.ok(await exists(keep.path), 'live projects untouched')
  t.ok(await exists(again.path))
  t.equal(Number((await s.runtime.db.knex('projects').count({ n: '*' }))[0].n), 2)
})
