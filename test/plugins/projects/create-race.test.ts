import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase } from '../../../core/testing/index.js'
import { exists, listTree, makeTemplate, row } from './fixtures.js'

/** concurrent POST /projects with one name: one wins, the others change nothing of it (issue 18 item 4) */

onEachDatabase(t, 'concurrent creation of one project name: one 201, the rest 409, the winner keeps its folder', async (t, s) => {
  const storageRoot = path.join(s.dataDir, 'storage', 'default')
  const tpl = await makeTemplate(s, { name: 'Tree', files: { 'Media/': null, 'Docs/readme.txt': 'hello' } })
  for (const n of [2, 20]) {
    const name = `Race ${n}`
    const replies = await Promise.all(Array.from({ length: n }, () => s.request('POST', '/projects', { token: s.user.token, json: { name, template_id: tpl.id } })))
    const won = replies.filter((r) => r.status === 201)
    t.equal(won.length, 1, `${n} requests: one created the project`)
    for (const r of replies.filter((r) => r.status !== 201)) assertProblem(t, r, 409, ['name'])
    const p = { ...won[0].body.project, path: path.join(storageRoot, name) }
    t.same(await listTree(p.path), ['Docs/', 'Docs/readme.txt', 'Media/'], "the winner's folder is complete")
    t.equal(await readFile(path.join(p.path, 'Docs/readme.txt'), 'utf8'), 'hello')
    t.equal(Number((await s.runtime.db.knex('projects').where({ name }).count({ n: '*' }))[0].n), 1, 'one row')
    t.ok(await row(s, 'access_rights', { object_type: 'project', object_id: p.id }), 'the winner has its rights')
    // the folder works: the next operations on it succeed
    t.equal((await s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: 'Exports' } })).status, 200)
    t.ok(await exists(path.join(p.path, 'Exports')))
    t.same(await readdir(path.join(storageRoot, '.mamkit-trash')), [], "the losers' staging folders are gone")
  }
  // without a template the winner's folder is empty: a loser's clean-up must not take it for its own
  const replies = await Promise.all(Array.from({ length: 10 }, () => s.request('POST', '/projects', { token: s.user.token, json: { name: 'Empty race' } })))
  const won = replies.filter((r) => r.status === 201)
  t.equal(won.length, 1)
  t.ok(await exists(path.join(storageRoot, 'Empty race')), "the winner's empty folder stays")
  t.same((await readdir(storageRoot)).sort(), ['.mamkit-trash', 'Empty race', 'Race 2', 'Race 20'])
  t.same(await readdir(path.join(storageRoot, '.mamkit-trash')), [])
  t.equal(Number((await s.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n), 0, 'no journal entry left')
})
