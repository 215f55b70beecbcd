import { link, lstat, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, waitForJob, type TestServer } from '../../../core/testing/index.js'
import { exists, row } from '../projects/fixtures.js'
import type { StorageJournal } from '../../../core/storage/journal.js'
import { projectWithFiles } from './fixtures.js'

/** folder operations of the projects plugin move the asset rows with their files (issue 18 item 1) */

const FILES = {
  'notes.txt': 'notes',
  'Media/Day 1/clip.mov': 'clip one',
  'Media/Day 1/Cam B/b.mov': 'cam b',
  'Media/Day 10/other.mov': 'day ten',
  'MEDIA/Day 1/twin.mov': 'case twin',
  '01_Media/keep.txt': 'keep',
}

const assetRows = async (s: TestServer, projectId: number) =>
  Object.fromEntries(
    (await s.runtime.db.knex('assets').where({ project_id: projectId }).select('id', 'path', 'folder', 'name', 'online', 'description')).map((r: any) => [r.path, { ...r, id: Number(r.id), online: Boolean(r.online) }]),
  )

/** every row names an existing file with the content it was registered with */
async function assertRowsFollowFiles(t: any, s: TestServer, p: { id: number; path: string }, contentById: Map<number, string>) {
  for (const r of Object.values(await assetRows(s, p.id)) as any[]) {
    t.ok(r.online, `${r.path} is online`)
    t.equal(r.folder, path.posix.dirname(r.path) === '.' ? '' : path.posix.dirname(r.path), `${r.path}: folder column`)
    t.equal(r.name, path.posix.basename(r.path), `${r.path}: name column`)
    t.equal(await readFile(path.join(p.path, r.path), 'utf8').catch(() => null), contentById.get(r.id), `${r.path}: the row names its own file`)
  }
}

onEachDatabase(t, 'move_contents and rename_folder move the asset rows with their files', async (t, s) => {
  const { p, assets } = await projectWithFiles(s, 'Moves', FILES)
  const contentById = new Map(assets.map((a: any) => [a.id as number, (FILES as Record<string, string>)[a.path]]))
  const id = (p: string) => assets.find((a: any) => a.path === p).id as number
  const notes = id('notes.txt')
  t.equal((await s.request('PUT', `/assets/${notes}`, { token: s.user.token, json: { description: 'read me first' } })).status, 200)

  // a file into a folder (the case of the issue: source=notes.txt destination=01_Media)
  const moved = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, form: { source: 'notes.txt', destination: '01_Media' } })
  t.equal(moved.status, 200)
  t.match(await row(s, 'assets', { id: notes }), { path: '01_Media/notes.txt', folder: '01_Media', name: 'notes.txt', description: 'read me first' })
  const shown = await s.request('GET', `/assets/${notes}`, { token: s.user.token })
  t.match(shown.body.asset, { id: notes, path: '01_Media/notes.txt', folder: '01_Media', online: true, description: 'read me first' })
  const byPath = await s.request('GET', '/assets/by_path', { token: s.user.token, query: { project_id: String(p.id), path: '01_Media/notes.txt' } })
  t.equal(byPath.body.asset?.id, notes, 'found at its new path')

  // a folder renamed: everything below it follows, `Day 10` and the case twin `MEDIA` do not
  const renamed = await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Media/Day 1', name: 'Day One' } })
  t.equal(renamed.status, 200)
  t.match(await row(s, 'assets', { id: id('Media/Day 1/clip.mov') }), { path: 'Media/Day One/clip.mov', folder: 'Media/Day One', name: 'clip.mov' })
  t.match(await row(s, 'assets', { id: id('Media/Day 1/Cam B/b.mov') }), { path: 'Media/Day One/Cam B/b.mov', folder: 'Media/Day One/Cam B', name: 'b.mov' })
  t.match(await row(s, 'assets', { id: id('Media/Day 10/other.mov') }), { path: 'Media/Day 10/other.mov', folder: 'Media/Day 10' })
  t.match(await row(s, 'assets', { id: id('MEDIA/Day 1/twin.mov') }), { path: 'MEDIA/Day 1/twin.mov', folder: 'MEDIA/Day 1' })

  // several sources, files and folders, into a new nested folder
  const many = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: ['Media/Day One', '01_Media/notes.txt'], destination: 'Archive/2024' } })
  t.equal(many.status, 200)
  t.match(await row(s, 'assets', { id: id('Media/Day 1/Cam B/b.mov') }), { path: 'Archive/2024/Day One/Cam B/b.mov', folder: 'Archive/2024/Day One/Cam B' })
  t.match(await row(s, 'assets', { id: notes }), { path: 'Archive/2024/notes.txt', folder: 'Archive/2024', description: 'read me first' })
  // and back to the project root
  t.equal((await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'Archive/2024/Day One', destination: '' } })).status, 200)
  t.match(await row(s, 'assets', { id: id('Media/Day 1/clip.mov') }), { path: 'Day One/clip.mov', folder: 'Day One' })
  await assertRowsFollowFiles(t, s, p, contentById)
  const listed = await s.request('GET', `/projects/${p.id}/assets`, { token: s.user.token, query: { folder: 'Day One', recursive: 'true' } })
  t.same(listed.body.assets.map((a: any) => a.path), ['Day One/clip.mov', 'Day One/Cam B/b.mov'])

  // reindex finds nothing new and nothing vanished: no second asset, the description stays
  const job = await waitForJob(s, s.user.token, (await s.request('PUT', `/projects/${p.id}/reindex`, { token: s.user.token })).body.job.id)
  t.same(job.result, { files: Object.keys(FILES).length, offline: 0 })
  t.equal(Object.keys(await assetRows(s, p.id)).length, Object.keys(FILES).length, 'no asset was made twice')
  t.equal((await row(s, 'assets', { id: notes })).description, 'read me first')
})

onEachDatabase(t, 'a move onto a path an asset row still claims is refused before anything moves', async (t, s) => {
  const { p } = await projectWithFiles(s, 'Claimed', { 'a.txt': 'a', 'Old/a.txt': 'old a', 'Dir/x.txt': 'x' })
  // the file behind Old/a.txt vanished outside mamkit: its row stays, offline, keeping its description
  await rm(path.join(p.path, 'Old', 'a.txt'))
  const before = await assetRows(s, p.id)
  const refused = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: ['Dir', 'a.txt'], destination: 'Old' } })
  assertProblem(t, refused, 409, ['source[1]'])
  t.ok(await exists(path.join(p.path, 'a.txt')), 'the file did not move')
  t.ok(await exists(path.join(p.path, 'Dir/x.txt')), 'neither did the folder listed before it')
  t.same(await assetRows(s, p.id), before, 'no row changed')
  // sources that overlap, and a destination that is a file, are refused as well
  const move = (json: object) => s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json })
  assertProblem(t, await move({ source: ['Dir', 'Dir/x.txt'], destination: 'New' }), 422, ['source[1]'])
  assertProblem(t, await move({ source: ['Dir/x.txt', 'Dir'], destination: 'New' }), 422, ['source[1]'])
  assertProblem(t, await move({ source: 'a.txt', destination: 'Dir/x.txt' }), 422, ['destination'])
  t.notOk(await exists(path.join(p.path, 'New')))
  // renaming a folder onto a name whose rows are still registered (offline) is refused as well
  await rename(path.join(p.path, 'Dir'), path.join(p.path, 'Gone'))
  await writeFile(path.join(p.path, 'Gone', 'y.txt'), 'y')
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rename_folder`, { token: s.user.token, json: { path: 'Gone', name: 'Dir' } }), 409, ['name'])
  t.ok(await exists(path.join(p.path, 'Gone/y.txt')))
})

onEachDatabase(t, 'concurrent folder operations in one project leave every row on its file', async (t, s) => {
  const files: Record<string, string> = {}
  for (const d of ['A', 'B', 'C', 'D']) for (let i = 0; i < 5; i++) files[`${d}/f${i}.txt`] = `${d}${i}`
  for (let i = 0; i < 10; i++) files[`loose${i}.txt`] = `loose ${i}`
  const { p, assets } = await projectWithFiles(s, 'Busy', files)
  const contentById = new Map(assets.map((a: any) => [a.id as number, files[a.path]]))
  const put = (route: string, json: object) => s.request('PUT', `/projects/${p.id}/${route}`, { token: s.user.token, json })
  // folders into each other and back, files into folders that are moving, all at once
  const replies = await Promise.all([
    put('move_contents', { source: 'A', destination: 'B' }),
    put('move_contents', { source: 'B', destination: 'C' }),
    put('rename_folder', { path: 'D', name: 'D2' }),
    put('move_contents', { source: 'C', destination: 'D2' }),
    ...Array.from({ length: 10 }, (_, i) => put('move_contents', { source: `loose${i}.txt`, destination: ['A', 'B', 'C', 'D', 'D2'][i % 5] })),
    put('rename_folder', { path: 'B', name: 'B2' }),
  ])
  for (const r of replies) t.ok([200, 404, 409, 422].includes(r.status), `answered ${r.status}${r.status === 200 ? '' : `: ${r.body?.detail}`}`)
  t.ok(replies.filter((r) => r.status === 200).length >= 5, 'most operations succeeded')
  await assertRowsFollowFiles(t, s, p, contentById)
  t.equal(Object.keys(await assetRows(s, p.id)).length, Object.keys(files).length)
})

/** a journal entry as a process that died mid-move leaves it (its lease long lapsed) */
async function deadMoveEntry(s: TestServer, projectId: number, moves: object[]) {
  const past = new Date(Date.now() - 60_000)
  await s.runtime.db.knex('storage_journal').insert({
    kind: 'projects.move',
    scope: `project:${projectId}`,
    exclusive: true,
    payload: JSON.stringify({ projectId, moves }),
    owner: 'a-process-that-died',
    lease_until: past,
    created_at: past,
    updated_at: past,
  })
}

onEachDatabase(t, 'a move cut short by a crash is repaired from what is on disk', async (t, s) => {
  const files = { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c', 'Dir/d.txt': 'd', 'Dir2/e.txt': 'e', 'f.txt': 'f' }
  const { p, assets } = await projectWithFiles(s, 'Crashed', files)
  const contentById = new Map(assets.map((a: any) => [a.id as number, (files as Record<string, string>)[a.path]]))
  const idOf = (rel: string) => assets.find((a: any) => a.path === rel).id as number
  const file = (rel: string) => path.join(p.path, rel)
  const identity = async (rel: string) => {
    const info = await lstat(file(rel), { bigint: true })
    return { dev: String(info.dev), ino: String(info.ino) }
  }
  const moves = [
    { from: 'a.txt', to: 'Dest/a.txt', isFolder: false, ...(await identity('a.txt')) },
    { from: 'b.txt', to: 'Dest/b.txt', isFolder: false, ...(await identity('b.txt')) },
    { from: 'Dir', to: 'Dest/Dir', isFolder: true, ...(await identity('Dir')) },
    { from: 'c.txt', to: 'Dest/c.txt', isFolder: false, ...(await identity('c.txt')) },
    { from: 'Dir2', to: 'Dest/Dir2', isFolder: true, ...(await identity('Dir2')) },
  ]
  // b.txt and Dir moved, a.txt linked under its new name but the old one not removed yet, the name
  // Dest/Dir2 claimed by the empty folder but Dir2 not renamed yet, c.txt untouched
  await mkdir(file('Dest'))
  await link(file('a.txt'), file('Dest/a.txt'))
  await link(file('b.txt'), file('Dest/b.txt'))
  await rm(file('b.txt'))
  await rename(file('Dir'), file('Dest/Dir'))
  await mkdir(file('Dest/Dir2'))
  await deadMoveEntry(s, p.id, moves)

  t.equal(await s.runtime.container.resolve<StorageJournal>('storageJournal').reconcile(), 1, 'one entry repaired')
  t.equal(Number((await s.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n), 0, 'the entry is gone')
  t.match(await row(s, 'assets', { id: idOf('a.txt') }), { path: 'Dest/a.txt', folder: 'Dest' })
  t.notOk(await exists(file('a.txt')), 'the half-done file move is finished')
  t.match(await row(s, 'assets', { id: idOf('b.txt') }), { path: 'Dest/b.txt' })
  t.match(await row(s, 'assets', { id: idOf('Dir/d.txt') }), { path: 'Dest/Dir/d.txt', folder: 'Dest/Dir' })
  t.match(await row(s, 'assets', { id: idOf('c.txt') }), { path: 'c.txt' }, 'what did not move keeps its row')
  t.match(await row(s, 'assets', { id: idOf('Dir2/e.txt') }), { path: 'Dir2/e.txt' })
  t.notOk(await exists(file('Dest/Dir2')), 'the empty folder that claimed the name is removed')
  await assertRowsFollowFiles(t, s, p, contentById)

  // an entry of a dead process in the same project is repaired by the next move there, before it moves anything
  await link(file('f.txt'), file('Dest/f.txt'))
  await deadMoveEntry(s, p.id, [{ from: 'f.txt', to: 'Dest/f.txt', isFolder: false, ...(await identity('f.txt')) }])
  const next = await s.request('PUT', `/projects/${p.id}/move_contents`, { token: s.user.token, json: { source: 'c.txt', destination: 'Dest' } })
  t.equal(next.status, 200)
  t.match(await row(s, 'assets', { id: idOf('f.txt') }), { path: 'Dest/f.txt' })
  t.match(await row(s, 'assets', { id: idOf('c.txt') }), { path: 'Dest/c.txt' })
  t.notOk(await exists(file('f.txt')))
  await assertRowsFollowFiles(t, s, p, contentById)
  t.equal(Number((await s.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n), 0)
})
