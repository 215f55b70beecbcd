import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import { exists, listTree, writeTree } from './fixtures.js'

/** a project with a tree, a directory outside every storage, and a symlink inside the project leading there */
async function setup(s: TestServer, t: any) {
  const p = await createProject(s, s.user, { name: 'Paths' })
  await writeTree(p.path, { 'Media/Day 1/clip.mov': 'clip', 'Media/Day 2/': null, 'notes.txt': 'notes', 'Archive/': null })
  const outside = await mkdtemp(path.join(tmpdir(), 'mamkit-outside-'))
  t.teardown(() => rm(outside, { recursive: true, force: true }))
  await writeTree(outside, { 'secret.txt': 'secret', 'sub/': null })
  await symlink(outside, path.join(p.path, 'escape'))
  await symlink(path.join(p.path, 'Media'), path.join(p.path, 'media-link'))
  const people = await readerAndStranger(s, p.id)
  return { p, outside, ...people }
}

const ATTACKS: Array<[string, string]> = [
  ['..', 'parent'],
  ['../escaped', 'dot-dot'],
  ['Media/../../escaped', 'dot-dot in the middle'],
  ['Media\\..\\..\\escaped', 'backslash dot-dot'],
  ['/tmp/mamkit-absolute', 'absolute'],
  ['C:\\mamkit-absolute', 'drive letter'],
  ['Media/a\u0000b', 'NUL byte'],
  [`Media/${'x'.repeat(300)}`, '300-byte name'],
]

onEachDatabase(t, 'create_folder: nested folders inside the project, attacks refused', async (t, s) => {
  const { p, outside, reader, stranger } = await setup(s, t)
  const root = path.dirname(p.path)
  const storageBefore = await listTree(root)
  const outsideBefore = await listTree(outside)

  const made = await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: 'Media/Day 3/Cam A' } })
  t.equal(made.status, 200)
  t.equal(made.body.project.id, p.id)
  t.ok(await exists(path.join(p.path, 'Media/Day 3/Cam A')), 'nested folders created')
  const byForm = await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, form: { path: 'Exports' } })
  t.equal(byForm.status, 200)
  t.ok(await exists(path.join(p.path, 'Exports')))
  const viaInnerLink = await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: 'media-link/Day 4' } })
  t.equal(viaInnerLink.status, 200, 'a symlink that stays inside the project may be followed')
  t.ok(await exists(path.join(p.path, 'Media/Day 4')))

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: 'Media/Day 1' } }), 409, ['path'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { json: { path: 'X' } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: reader.token, json: { path: 'X' } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: stranger.token, json: { path: 'X' } }), 404)
  assertProblem(t, await s.request('PUT', '/projects/99999/create_folder', { token: s.admin.token, json: { path: 'X' } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: {} }), 422, ['path'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: '' } }), 422, ['path'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: ['a', 'b'] } }), 422, ['path'])
  t.notOk(await exists(path.join(p.path, 'X')))

  for (const [attack, label] of ATTACKS) {
    const reply = await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: attack } })
    assertProblem(t, reply, 422, ['path'])
    t.comment(`${label}: ${reply.body.detail}`)
  }
  // through the symlink that leads out of the project: refused whether the target exists or not
  for (const attack of ['escape/new-folder', 'escape/sub/deeper', 'escape']) {
    const reply = await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: attack } })
    t.ok(reply.status >= 400 && reply.status < 500, `${attack}: refused with ${reply.status}`)
    assertProblem(t, reply, 403, ['path'])
  }
  t.same(await listTree(outside), outsideBefore, 'nothing created outside the project')
  t.notOk(await exists(path.join(root, 'escaped')), 'nothing created beside the project')
  t.notOk(await exists('/tmp/mamkit-absolute'))
  t.same((await listTree(root)).filter((e) => !e.startsWith('Paths/')), storageBefore.filter((e) => !e.startsWith('Paths/')), 'the storage outside the project is unchanged')
})

onEachDatabase(t, 'rename_folder: renames inside the project, attacks refused', async (t, s) => {
  const { p, outside, reader, stranger } = await setup(s, t)
  const outsideBefore = await listTree(outside)

  const renamed = await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Media/Day 1', name: 'Day One' } })
  t.equal(renamed.status, 200)
  t.notOk(await exists(path.join(p.path, 'Media/Day 1')))
  t.equal(await readFile(path.join(p.path, 'Media/Day One/clip.mov'), 'utf8'), 'clip', 'contents moved with the folder')

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Media/Day One', name: 'Day 2' } }), 409, ['name'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Media/Nope', name: 'Other' } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'notes.txt', name: 'n' } }), 422, ['path'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: '.', name: 'Other' } }), 422, ['path'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Media' } }), 422, ['name'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { name: 'x' } }), 422, ['path'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { json: { path: 'Media', name: 'x' } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: reader.token, json: { path: 'Media', name: 'x' } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: stranger.token, json: { path: 'Media', name: 'x' } }), 404)

  // the new name is one name: no separators, no dot-dot, no NUL, not overlong
  for (const name of ['a/b', '..', '../../escaped', '.', 'a\u0000b', 'x'.repeat(300), '/abs']) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Media/Day 2', name } }), 422, ['name'])
  }
  for (const [attack] of ATTACKS) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: attack, name: 'renamed' } }), 422, ['path'])
  }
  for (const attack of ['escape', 'escape/sub']) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: attack, name: 'renamed' } }), 403, ['path'])
  }
  t.ok(await exists(path.join(p.path, 'Media/Day 2')), 'refused renames change nothing')
  t.same(await listTree(outside), outsideBefore, 'nothing renamed outside the project')
  t.notOk(await exists(path.join(path.dirname(p.path), 'escaped')))
})

onEachDatabase(t, 'move_contents: one or many sources into a folder, attacks refused', async (t, s) => {
  const { p, outside, reader, stranger } = await setup(s, t)
  const outsideBefore = await listTree(outside)
  await writeFile(path.join(p.path, 'a.txt'), 'a')
  await writeFile(path.join(p.path, 'b.txt'), 'b')

  const many = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: ['a.txt', 'Media/Day 1'], destination: 'Archive/2024' } })
  t.equal(many.status, 200)
  t.same(await listTree(path.join(p.path, 'Archive')), ['2024/', '2024/Day 1/', '2024/Day 1/clip.mov', '2024/a.txt'], 'moved, destination created')
  t.notOk(await exists(path.join(p.path, 'a.txt')))
  const one = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, form: { source: 'Archive/2024/a.txt', destination: '' } })
  t.equal(one.status, 200, 'one source as a string; empty destination is the project root')
  t.ok(await exists(path.join(p.path, 'a.txt')))
  const byForm = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, form: { 'source[]': ['b.txt'], destination: 'Media' } })
  t.equal(byForm.status, 200)
  t.ok(await exists(path.join(p.path, 'Media/b.txt')))

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'nope.txt', destination: 'Archive' } }), 404)
  await writeFile(path.join(p.path, 'Archive', 'a.txt'), 'other a')
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'a.txt', destination: 'Archive' } }), 409, ['source'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'Archive', destination: 'Archive/2024' } }), 422, ['destination'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: '.', destination: 'Archive' } }), 422, ['source'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: [], destination: 'Archive' } }), 422, ['source'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'a.txt' } }), 422, ['destination'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { json: { source: 'a.txt', destination: 'Media' } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: reader.token, json: { source: 'a.txt', destination: 'Media' } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: stranger.token, json: { source: 'a.txt', destination: 'Media' } }), 404)

  for (const [attack] of ATTACKS) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: attack, destination: 'Media' } }), 422, ['source'])
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'a.txt', destination: attack } }), 422, ['destination'])
    // all sources are checked before any moves
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: ['a.txt', attack], destination: 'Media' } }), 422, ['source[1]'])
  }
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'escape/secret.txt', destination: 'Media' } }), 403, ['source'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'a.txt', destination: 'escape' } }), 403, ['destination'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'a.txt', destination: 'escape/new' } }), 403, ['destination'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: ['a.txt', 'escape/sub'], destination: 'Media' } }), 403, ['source[1]'])

  t.ok(await exists(path.join(p.path, 'a.txt')), 'refused moves leave the sources')
  t.notOk(await exists(path.join(p.path, 'Media/a.txt')))
  t.same(await listTree(outside), outsideBefore, 'nothing moved into or out of the outside directory')
  t.equal(await readFile(path.join(outside, 'secret.txt'), 'utf8'), 'secret')
})
