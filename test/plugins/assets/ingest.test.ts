import { readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, waitForAsset, createProject, readerAndStranger } from '../../../core/testing/index.js'
import { exists, listTree, row, writeTree } from '../projects/fixtures.js'

/** inject_uploads and addassets: files into the tree, assets out; every refusal leaves nothing behind */

const uploadsDir = (s: { dataDir: string }) => path.join(s.dataDir, 'tmp', 'uploads')
const tempUploads = async (s: { dataDir: string }) => (await readdir(uploadsDir(s)).catch(() => [])).length

onEachDatabase(t, 'inject_uploads: files land in the folder, clashes get free names, the answer lists the assets', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Uploads' })
  const { reader, stranger } = await readerAndStranger(s, p.id)

  const first = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', data: 'first clip' }, { name: 'notes.txt', data: 'some notes' }], { path: 'Media/Day 1' })
  t.equal(first.status, 201)
  t.equal(first.body.assets.length, 2)
  // the order of the answer is not promised (the parts are collected as they finish): by name
  const clip = first.body.assets.find((a: any) => a.name === 'clip.mov')
  const notes = first.body.assets.find((a: any) => a.name === 'notes.txt')
  t.match(clip, {
    id: Number,
    uuid: String,
    name: 'clip.mov',
    path: 'Media/Day 1/clip.mov',
    folder: 'Media/Day 1',
    project_id: p.id,
    project_name: 'Uploads',
    size: 10,
    online: true,
    file_names: ['clip.mov'],
    analysis_state: /^(pending|processing|ready)$/,
    proxy_state: 'pending',
    created_at: String,
  })
  t.notOk('proxy_key_enc' in clip, 'no key material in the JSON')
  t.equal(await readFile(path.join(p.path, 'Media/Day 1/clip.mov'), 'utf8'), 'first clip')
  t.equal(await readFile(path.join(p.path, 'Media/Day 1/notes.txt'), 'utf8'), 'some notes')
  const r = await row(s, 'assets', { id: clip.id })
  t.match(r, { path: 'Media/Day 1/clip.mov', folder: 'Media/Day 1', name: 'clip.mov' })
  t.equal(Number(r.size), 10)
  t.equal(Number(r.project_id), p.id)
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 20, 'the project grows by the uploaded bytes')
  t.equal(await tempUploads(s), 0, 'no temp files left')

  // a clash never overwrites: the next free name, also between files of one request
  const again = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', data: 'second' }], { path: 'Media/Day 1' })
  t.equal(again.status, 201)
  t.match(again.body.assets, [{ name: 'clip (2).mov', path: 'Media/Day 1/clip (2).mov' }])
  const twice = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', data: 'third' }, { name: 'clip.mov', data: 'fourth' }], { path: 'Media/Day 1' })
  t.same(twice.body.assets.map((a: any) => a.name).sort(), ['clip (3).mov', 'clip (4).mov'])
  t.equal(await readFile(path.join(p.path, 'Media/Day 1/clip.mov'), 'utf8'), 'first clip', 'the original is untouched')
  t.same([await readFile(path.join(p.path, 'Media/Day 1/clip (3).mov'), 'utf8'), await readFile(path.join(p.path, 'Media/Day 1/clip (4).mov'), 'utf8')].sort(), ['fourth', 'third'])

  // the client's file name is a name only: no folders, no escape, no hidden files
  const odd = await upload(s, s.user.token, p.id, [{ name: '../../escape.txt', data: 'x' }, { name: '.hidden', data: 'y' }])
  t.equal(odd.status, 201)
  t.same(odd.body.assets.map((a: any) => a.path).sort(), ['_hidden', 'escape.txt'])
  t.notOk(await exists(path.join(p.path, '..', 'escape.txt')))
  t.same(await listTree(p.path), ['Media/', 'Media/Day 1/', 'Media/Day 1/clip (2).mov', 'Media/Day 1/clip (3).mov', 'Media/Day 1/clip (4).mov', 'Media/Day 1/clip.mov', 'Media/Day 1/notes.txt', '_hidden', 'escape.txt'])

  // analysis runs in the background: text is "other", with no proxies to wait for
  const analysed = await waitForAsset(s, s.user.token, notes.id)
  t.match(analysed, { type: 'other', analysis_state: 'ready' })

  // refusals: nothing written, temp files removed
  const before = await listTree(p.path)
  const count = Number((await s.runtime.db.knex('assets').count({ n: '*' }))[0].n)
  const one = [{ name: 'late.txt', data: 'late' }]
  assertProblem(t, await upload(s, undefined, p.id, one), 401)
  assertProblem(t, await upload(s, reader.token, p.id, one), 403)
  assertProblem(t, await upload(s, stranger.token, p.id, one), 404)
  assertProblem(t, await upload(s, s.admin.token, 99999, one), 404)
  assertProblem(t, await upload(s, s.user.token, p.id, []), 422, ['file'])
  for (const bad of ['../outside', '/etc', 'a\0b', 'Media/../../x']) {
    assertProblem(t, await upload(s, s.user.token, p.id, one, { path: bad }), 422, ['path'])
  }
  assertProblem(t, await upload(s, s.user.token, p.id, one, { colour: 'red' }), 422, ['colour'])
  // a target that is a file, not a folder
  assertProblem(t, await upload(s, s.user.token, p.id, one, { path: 'escape.txt' }), 422, ['path'])
  // a folder symlink that leads out of the storage
  await symlink(s.dataDir, path.join(p.path, 'Media', 'out'))
  assertProblem(t, await upload(s, s.user.token, p.id, one, { path: 'Media/out' }), 403, ['path'])
  t.same(await listTree(p.path), [...before, 'Media/out'].sort(), 'the tree is unchanged')
  t.equal(Number((await s.runtime.db.knex('assets').count({ n: '*' }))[0].n), count, 'no rows added')
  t.equal(await tempUploads(s), 0, 'refused uploads leave no temp files')
})

onEachDatabase(t, 'inject_uploads respects freeze (423) and quota (507), removing the temp file', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Bounded' })
  t.equal((await upload(s, s.user.token, p.id, [{ name: 'a.bin', data: Buffer.alloc(100) }])).status, 201)

  // project quota: 100 used of 150
  t.equal((await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: 150 } })).status, 200)
  const refused = await upload(s, s.user.token, p.id, [{ name: 'b.bin', data: Buffer.alloc(60) }])
  assertProblem(t, refused, 507)
  t.match(refused.body, { code: 'insufficient_storage', quota: 150, size: 100 })
  t.notOk(await exists(path.join(p.path, 'b.bin')), 'nothing moved into the tree')
  t.equal(await tempUploads(s), 0, 'the temp file is removed')
  t.notOk(await row(s, 'assets', { name: 'b.bin' }))
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 100)
  t.equal((await upload(s, s.user.token, p.id, [{ name: 'b.bin', data: Buffer.alloc(50) }])).status, 201, 'exactly up to the quota fits')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 150)
  await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: null } })

  // the quota of a team that writes the project
  const own = Number((await row(s, 'teams', { owner_id: s.user.id })).id)
  t.equal(Number((await row(s, 'teams', { id: own })).space_used), 150, "the uploads count in the team's space")
  t.equal((await s.request('PUT', `/teams/${own}`, { token: s.admin.token, json: { team: { quota: 160 } } })).status, 200)
  const teamRefused = await upload(s, s.user.token, p.id, [{ name: 'c.bin', data: Buffer.alloc(20) }])
  assertProblem(t, teamRefused, 507)
  t.match(teamRefused.body, { code: 'insufficient_storage', team_id: own, quota: 160 })
  t.equal(await tempUploads(s), 0)
  t.notOk(await exists(path.join(p.path, 'c.bin')))
  await s.request('PUT', `/teams/${own}`, { token: s.admin.token, json: { team: { quota: null } } })

  // frozen: refused for everyone, the tree and rows unchanged
  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  for (const who of [s.user, s.admin]) {
    const frozen = await upload(s, who.token, p.id, [{ name: 'd.bin', data: 'd' }])
    assertProblem(t, frozen, 423)
    t.match(frozen.body, { code: 'locked', frozen_by: { id: s.user.id } })
  }
  t.equal(await tempUploads(s), 0)
  t.same(await listTree(p.path), ['a.bin', 'b.bin'])
  t.equal((await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })).status, 200)
  t.equal((await upload(s, s.user.token, p.id, [{ name: 'd.bin', data: 'd' }])).status, 201)
})

onEachDatabase(t, 'addassets registers files already in the tree; bad paths are refused naming the parameter', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Tree' })
  await writeTree(p.path, { 'A/one.txt': 'one', 'B/C/two.txt': 'two!', 'Empty/': null })
  const { reader, stranger } = await readerAndStranger(s, p.id)

  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: ['A/one.txt', 'B//C/./two.txt'] } })
  t.equal(added.status, 201)
  t.match(added.body.assets, [
    { name: 'one.txt', path: 'A/one.txt', folder: 'A', size: 3, project_id: p.id, online: true, analysis_state: /pending|processing|ready/, proxy_state: 'pending' },
    { name: 'two.txt', path: 'B/C/two.txt', folder: 'B/C', size: 4 },
  ])
  const info = await stat(path.join(p.path, 'A/one.txt'))
  const r = await row(s, 'assets', { id: added.body.assets[0].id })
  t.equal(Number(r.inode), info.ino, 'the inode is recorded')
  t.equal(Number(r.size), 3)

  // registering again is idempotent: same rows
  const again = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, form: { 'paths[]': ['A/one.txt'] } })
  t.equal(again.status, 201)
  t.equal(again.body.assets[0].id, added.body.assets[0].id)
  t.equal(Number((await s.runtime.db.knex('assets').where({ project_id: p.id }).count({ n: '*' }))[0].n), 2)

  const count = async () => Number((await s.runtime.db.knex('assets').count({ n: '*' }))[0].n)
  const n = await count()
  const add = (token: string | undefined, json: unknown) => s.request('POST', `/projects/${p.id}/addassets`, { token, json })
  assertProblem(t, await add(undefined, { paths: ['A/one.txt'] }), 401)
  assertProblem(t, await add(reader.token, { paths: ['A/one.txt'] }), 403)
  assertProblem(t, await add(stranger.token, { paths: ['A/one.txt'] }), 404)
  assertProblem(t, await s.request('POST', '/projects/99999/addassets', { token: s.admin.token, json: { paths: ['A/one.txt'] } }), 404)
  assertProblem(t, await add(s.user.token, {}), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: [] }), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: 'A/one.txt' }), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: ['../Tree/A/one.txt'] }), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: [path.join(p.path, 'A/one.txt')] }), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: ['A/one.txt\0.mov'] }), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: ['A/one.txt', 'A/../../x'] }), 422, ['paths[1]'])
  assertProblem(t, await add(s.user.token, { paths: ['Empty'] }), 422, ['paths'])
  assertProblem(t, await add(s.user.token, { paths: ['A/missing.txt'] }), 404)
  await symlink(path.join(s.dataDir, 'secret.key'), path.join(p.path, 'A', 'key.txt'))
  assertProblem(t, await add(s.user.token, { paths: ['A/key.txt'] }), 403, ['paths'])
  t.equal(await count(), n, 'refused requests add nothing')

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  await writeFile(path.join(p.path, 'A/three.txt'), '3')
  assertProblem(t, await add(s.user.token, { paths: ['A/three.txt'] }), 423)
  t.equal(await count(), n)
})

onEachDatabase(t, 'concurrent uploads cannot overrun a quota together: the charge is checked in the transaction that writes the rows', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Tight' })
  t.equal((await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: 1000 } })).status, 200)
  // ten uploads of 300 bytes each pass the early check side by side; only three fit
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => upload(s, s.user.token, p.id, [{ name: `part${i}.bin`, data: Buffer.alloc(300, i) }])))
  const ok = answers.filter((a) => a.status === 201)
  t.equal(ok.length, 3, 'three uploads fit')
  for (const refused of answers.filter((a) => a.status !== 201)) t.match(refused, { status: 507, body: { code: 'insufficient_storage' } })
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 900, 'the size counts what was accepted')
  t.equal(Number((await s.runtime.db.knex('assets').where({ project_id: p.id }).count({ n: '*' }))[0].n), 3, 'rows for the accepted files only')
  t.same((await readdir(p.path)).filter((n) => n.endsWith('.bin')).length, 3, 'files for the accepted uploads only')
  t.equal(await tempUploads(s), 0, 'no temp files left')

  // a team quota holds the same way
  await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: null } })
  const own = Number((await row(s, 'teams', { owner_id: s.user.id })).id)
  t.equal((await s.request('PUT', `/teams/${own}`, { token: s.admin.token, json: { team: { quota: 1500 } } })).status, 200)
  const more = await Promise.all(Array.from({ length: 6 }, (_, i) => upload(s, s.user.token, p.id, [{ name: `more${i}.bin`, data: Buffer.alloc(200, i) }])))
  t.equal(more.filter((a) => a.status === 201).length, 3, 'three more fit under the team quota of 1500 (900 used)')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 1500)
})
