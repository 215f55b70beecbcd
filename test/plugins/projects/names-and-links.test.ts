import { mkdir, readdir, symlink } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, createProject } from '../../../core/testing/index.js'
import { exists, listTree, row, writeTree } from './fixtures.js'

/**
 * Issue 18 items 8, 15 and 24: broken symlinks inside a project are refused with 403 (pointing
 * outside) or 422 (pointing inside), never a 500 and never a write through them; folder, file,
 * project and template names are NFC, and an NFD name on disk is found by its NFC spelling; an
 * uploaded `.hidden.jpg` becomes `_hidden.jpg`, as the README says.
 */

const NFC = 'caf\u00e9'
const NFD = 'cafe\u0301'

onEachDatabase(t, 'broken symlinks answer 403/422; names are NFC; a leading dot of an upload becomes _', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Links' })
  const outside = path.join(s.dataDir, 'outside')
  await mkdir(outside)
  await writeTree(p.path, { 'a.txt': 'a', 'media/': null })
  await symlink(path.join(outside, 'missing'), path.join(p.path, 'dir'))
  await symlink('missing-inside', path.join(p.path, 'inner'))
  await symlink('loop', path.join(p.path, 'loop'))
  const before = await listTree(p.path)
  const put = (route: string, json: unknown) => s.request('PUT', `/projects/${p.id}/${route}`, { token: s.user.token, json })

  for (const target of ['dir', 'dir/sub', 'dir/sub/deeper']) {
    const refused = await put('create_folder', { path: target })
    assertProblem(t, refused, 403, ['path'])
    t.match(refused.body.detail, /path leads outside its storage/)
  }
  for (const target of ['inner', 'inner/sub']) {
    const refused = await put('create_folder', { path: target })
    assertProblem(t, refused, 422, ['path'])
    t.match(refused.body.errors[0].message, /"inner", a symbolic link to something that does not exist/)
  }
  assertProblem(t, await put('create_folder', { path: 'loop/x' }), 422, ['path'])
  assertProblem(t, await put('move_contents', { source: 'a.txt', destination: 'dir' }), 403, ['destination'])
  assertProblem(t, await put('move_contents', { source: 'a.txt', destination: 'inner/x' }), 422, ['destination'])
  assertProblem(t, await upload(s, s.user.token, p.id, [{ name: 'up.txt', data: 'u' }], { path: 'dir' }), 403, ['path'])
  assertProblem(t, await upload(s, s.user.token, p.id, [{ name: 'up.txt', data: 'u' }], { path: 'inner' }), 422, ['path'])
  t.same(await readdir(outside), [], 'nothing was written through a link')
  t.notOk(await exists(path.join(p.path, 'missing-inside')), 'nor inside')
  t.same(await listTree(p.path), before, 'the tree is unchanged')
  t.equal(await s.runtime.db.knex('assets').where({ project_id: p.id }).count({ n: '*' }).then((r) => Number(r[0].n)), 0, 'no asset registered')

  // a long path that is not there is named in the 404, not echoed back whole
  const missing = await put('move_contents', { source: `${'x'.repeat(250)}/${'y'.repeat(250)}/${'z'.repeat(250)}`, destination: 'media' })
  assertProblem(t, missing, 404)
  t.ok(missing.text.length < 1000, `a short problem body (${missing.text.length} bytes)`)
  t.match(missing.body.detail, /… \(752 characters\) not found$/)

  // NFC: the NFD and the NFC spelling of café are one folder
  t.equal((await put('create_folder', { path: `${NFD}/raw` })).status, 200)
  const twin = await put('create_folder', { path: NFC })
  assertProblem(t, twin, 409, ['path'])
  t.equal((await put('create_folder', { path: `${NFC}/raw/day` })).status, 200, 'the NFC spelling finds the folder')
  t.same((await readdir(p.path)).filter((n) => n.normalize('NFC') === NFC), [NFC], 'one folder, named in NFC')
  // a folder made in NFD on disk (a Mac over SMB) is found by its NFC name, not doubled
  await mkdir(path.join(p.path, `r${'e\u0301'}sum${'e\u0301'}`))
  const into = await upload(s, s.user.token, p.id, [{ name: `n${'e\u0301'}.txt`, data: 'n' }, { name: '.hidden.jpg', data: 'h' }], { path: 'r\u00e9sum\u00e9' })
  t.equal(into.status, 201)
  t.same((await readdir(p.path)).filter((n) => n.startsWith('r')).map((n) => n.normalize('NFD') === n), [true], 'no NFC twin of the NFD folder')
  t.same(into.body.assets.map((a: any) => a.name).sort(), ['_hidden.jpg', 'n\u00e9.txt'], 'upload names in NFC; a leading dot becomes _')
  t.same((await readdir(path.join(p.path, `r${'e\u0301'}sum${'e\u0301'}`))).sort(), ['_hidden.jpg', 'n\u00e9.txt'])
  const moved = await put('move_contents', { source: 'a.txt', destination: NFD })
  t.equal(moved.status, 200)
  t.ok(await exists(path.join(p.path, NFC, 'a.txt')), 'move_contents into the NFD spelling lands in the NFC folder')

  // projects and templates: names stored in NFC, the other spelling is taken
  const project = await createProject(s, s.user, { name: `Project ${NFD}` })
  t.equal(project.name, `Project ${NFC}`)
  t.equal((await row(s, 'projects', { id: project.id })).name, `Project ${NFC}`)
  assertProblem(t, await s.request('POST', '/projects', { token: s.user.token, json: { name: `Project ${NFC}` } }), 409)
  const renamed = await s.request('PUT', `/projects/${project.id}/rename`, { token: s.user.token, json: { name: `Renamed ${NFD}` } })
  t.equal(renamed.body.project.name, `Renamed ${NFC}`)
  const template = await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name: `Template ${NFD}`, template_type: 'generic' } } })
  t.equal(template.body.template.name, `Template ${NFC}`)
  assertProblem(t, await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name: `Template ${NFC}`, template_type: 'generic' } } }), 409)
})
