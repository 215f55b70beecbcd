import { lstat, mkdir, readFile, rename } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, createProject, type TestServer } from '../../../core/testing/index.js'
import type { StorageJournal } from '../../../core/storage/journal.js'
import { exists, listTree, row } from './fixtures.js'

/** renaming a project and moving it into the trash move its folder with its row, also beside other requests and across a crash */

const identity = async (p: string) => {
  const info = await lstat(p, { bigint: true })
  return { dev: String(info.dev), ino: String(info.ino) }
}

/** the entry a process that died during a relocation leaves (lease long lapsed) */
async function deadRelocation(s: TestServer, payload: Record<string, unknown>) {
  const past = new Date(Date.now() - 60_000)
  await s.runtime.db.knex('storage_journal').insert({
    kind: 'projects.relocate',
    scope: `project:${payload.projectId}`,
    exclusive: true,
    payload: JSON.stringify(payload),
    owner: 'a-process-that-died',
    lease_until: past,
    created_at: past,
    updated_at: past,
  })
}

onEachDatabase(t, 'renaming a project beside uploads into it: every asset row stays on its file', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Moving house' })
  const replies = await Promise.all([
    ...Array.from({ length: 10 }, (_, i) => upload(s, s.user.token, p.id, [{ name: `clip ${i}.mov`, data: `clip ${i}` }], { path: 'Media' })),
    s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'New house' } }),
    ...Array.from({ length: 10 }, (_, i) => upload(s, s.user.token, p.id, [{ name: `late ${i}.mov`, data: `late ${i}` }], { path: 'Media' })),
  ])
  t.same(replies.map((r) => r.status), Array(21).fill(200).map((_, i) => (i === 10 ? 200 : 201)))
  // folder operations beside a rename wait for it too
  const [made, renamedAgain] = await Promise.all([
    s.request('PUT', `/projects/${p.id}/create_folder`, { token: s.user.token, json: { path: 'Exports' } }),
    s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'Moving house' } }),
  ])
  t.same([made.status, renamedAgain.status], [200, 200])
  t.equal((await s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'New house' } })).status, 200)
  const root = path.join(path.dirname(p.path), 'New house')
  t.notOk(await exists(p.path), 'the old folder is gone, not made again by a late upload')
  const rows = await s.runtime.db.knex('assets').where({ project_id: p.id }).select('path', 'name')
  t.equal(rows.length, 20)
  for (const r of rows) t.equal(await readFile(path.join(root, r.path), 'utf8'), r.name.replace('.mov', ''), `${r.path} is where its row says`)
  t.same((await listTree(root)).length, 22, 'twenty files in Media, and Exports')
  t.ok(await exists(path.join(root, 'Exports')))
})

onEachDatabase(t, 'two projects renamed to one name at once: one wins, the other keeps its folder', async (t, s) => {
  const a = await createProject(s, s.user, { name: 'First' })
  const b = await createProject(s, s.user, { name: 'Second' })
  await upload(s, s.user.token, a.id, [{ name: 'a.txt', data: 'a' }])
  await upload(s, s.user.token, b.id, [{ name: 'b.txt', data: 'b' }])
  const [ra, rb] = await Promise.all([a, b].map((p) => s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'Same' } })))
  t.same([ra.status, rb.status].sort(), [200, 409])
  const loser = ra.status === 409 ? { reply: ra, p: a, file: 'a.txt' } : { reply: rb, p: b, file: 'b.txt' }
  assertProblem(t, loser.reply, 409, ['name'])
  t.ok(await exists(path.join(loser.p.path, loser.file)), "the loser's folder is where it was")
  t.equal((await row(s, 'projects', { id: loser.p.id })).folder, path.basename(loser.p.path))
  t.ok(await exists(path.join(path.dirname(a.path), 'Same', ra.status === 200 ? 'a.txt' : 'b.txt')), "the winner's folder has its file")
  t.equal(Number((await s.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n), 0)
})

onEachDatabase(t, 'a rename or trash cut short by a crash is repaired from where the folder is', async (t, s) => {
  const root = path.join(s.dataDir, 'storage', 'default')
  const journal = () => s.runtime.container.resolve<StorageJournal>('storageJournal')

  // the row was renamed, the folder not yet moved: the old row comes back
  const stayed = await createProject(s, s.user, { name: 'Stayed' })
  await s.runtime.db.knex('projects').where({ id: stayed.id }).update({ folder: 'Stayed 2', name: 'Stayed 2' })
  await mkdir(path.join(root, 'Stayed 2')) // the empty folder that claimed the name
  await deadRelocation(s, { projectId: stayed.id, purpose: 'rename', storage: 'default', from: 'Stayed', to: 'Stayed 2', names: ['Stayed', 'Stayed 2'], ...(await identity(stayed.path)) })
  // the row was renamed and the folder moved: the new row stays
  const moved = await createProject(s, s.user, { name: 'Moved' })
  const movedId = await identity(moved.path)
  await s.runtime.db.knex('projects').where({ id: moved.id }).update({ folder: 'Moved 2', name: 'Moved 2' })
  await rename(moved.path, path.join(root, 'Moved 2'))
  await deadRelocation(s, { projectId: moved.id, purpose: 'rename', storage: 'default', from: 'Moved', to: 'Moved 2', names: ['Moved', 'Moved 2'], ...movedId })
  // marked deleted, the folder not yet in the trash: the project comes back
  const kept = await createProject(s, s.user, { name: 'Kept' })
  const trash = `.mamkit-trash/${kept.uuid}`
  await s.runtime.db.knex('projects').where({ id: kept.id }).update({ folder: trash, trash_folder: 'Kept', deleted: true, deleted_at: new Date() })
  await deadRelocation(s, { projectId: kept.id, purpose: 'trash', storage: 'default', from: 'Kept', to: trash, names: ['Kept', 'Kept'], ...(await identity(kept.path)) })

  t.equal(await journal().reconcile(), 3)
  t.match(await row(s, 'projects', { id: stayed.id }), { folder: 'Stayed', name: 'Stayed' })
  t.notOk(await exists(path.join(root, 'Stayed 2')), 'the empty claim folder is gone')
  t.match(await row(s, 'projects', { id: moved.id }), { folder: 'Moved 2', name: 'Moved 2' })
  t.match(await row(s, 'projects', { id: kept.id }), { folder: 'Kept', trash_folder: null })
  t.notOk(Boolean((await row(s, 'projects', { id: kept.id })).deleted))
  for (const p of [stayed, kept]) t.equal((await s.request('GET', `/projects/${p.id}`, { token: s.user.token })).status, 200)
  t.equal((await s.request('PUT', `/projects/${stayed.id}/create_folder`, { token: s.user.token, json: { path: 'Works' } })).status, 200)
  t.ok(await exists(path.join(root, 'Stayed', 'Works')))
})
