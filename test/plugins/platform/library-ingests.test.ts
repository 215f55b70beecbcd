import t from 'tap'
import { mkdtempSync } from 'node:fs'
import { appendFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { assertProblem, createProject, databaseKinds, onEachDatabase, scratchDatabase, startTestServer, waitFor, waitForJob, type TestServer } from '../../../core/testing/index.js'
import { ffmpeg } from '../../helpers/media.js'
import type { LibraryIngestService } from '../../../plugins/platform/ingests.js'

/** a storage of its own for the watched folders (`watch`), beside the default one where projects live */
const WATCH = mkdtempSync(path.join(tmpdir(), 'mamkit-watch-'))
t.teardown(() => rm(WATCH, { recursive: true, force: true }))
const configWith = (pollMs = 1000) => ({ plugins: { storage: { storages: { watch: WATCH } }, platform: { library_ingests: { poll_ms: pollMs } } } })
/** a folder of this run below the watch storage, and paths in it relative to the storage */
async function runFolder() {
  const base = await mkdtemp(path.join(WATCH, 'run-'))
  return { base, rel: (p: string) => path.relative(WATCH, path.join(base, p)) }
}

const service = (s: TestServer) => s.runtime.container.resolve<LibraryIngestService>('platform.ingests')
const library = (s: TestServer, name: string) => createProject(s, s.admin, { name, is_library_project: true })
const count = async (s: TestServer, table: string, where: Record<string, unknown> = {}) => Number((await s.runtime.db.knex(table).where(where).count({ n: '*' }))[0].n)
const assetsOf = async (s: TestServer, projectId: number) => (await s.request('GET', `/projects/${projectId}/assets`, { token: s.admin.token, query: { recursive: 'true' } })).body.assets as Array<Record<string, any>>
const fileStates = async (s: TestServer, id: number) =>
  Object.fromEntries(((await s.request('GET', `/library_ingests/${id}/files`, { token: s.admin.token })).body.library_ingest_files as Array<Record<string, any>>).map((f) => [f.path, f.state]))

/** creates an ingest whose poller stays away (a day's interval): the test drives its scans */
async function createIngest(s: TestServer, fields: Record<string, unknown>) {
  const reply = await s.request('POST', '/library_ingests', { token: s.admin.token, json: { library_ingest: { interval_seconds: 86_400, stable_seconds: 2, ...fields } } })
  if (reply.status !== 202) throw new Error(`ingest: ${reply.status} ${reply.text}`)
  await waitForJob(s, s.admin.token, reply.body.job.id)
  return Number(reply.headers.get('location')!.split('/').pop())
}

onEachDatabase(t, 'library ingests: create answers the first scan job, list, update, delete; admin only; 422 naming the parameter; a name race', async (t, s) => {
  const { base: root, rel } = await runFolder()
  await mkdir(path.join(root, 'drop'))
  const lib = await library(s, 'Library A')
  const plain = await createProject(s, s.admin, 'Not a library')
  const post = (json: unknown, token = s.admin.token) => s.request('POST', '/library_ingests', { token, json })
  const good = { name: 'Drop', storage: 'watch', path: rel('drop'), project_id: lib.id }

  assertProblem(t, await s.request('POST', '/library_ingests', { json: { library_ingest: good } }), 401)
  assertProblem(t, await post({ library_ingest: good }, s.user.token), 403)
  assertProblem(t, await s.request('GET', '/library_ingests', { token: s.user.token }), 403)
  assertProblem(t, await post({ library_ingest: { ...good, storage: 'nowhere' } }), 422, ['library_ingest[storage]'])
  assertProblem(t, await post({ library_ingest: { ...good, path: '../etc' } }), 422, ['library_ingest[path]'])
  assertProblem(t, await post({ library_ingest: { ...good, project_id: plain.id } }), 422, ['library_ingest[project_id]'])
  assertProblem(t, await post({ library_ingest: { ...good, project_id: 999_999 } }), 422, ['library_ingest[project_id]'])
  assertProblem(t, await post({ library_ingest: { ...good, mode: 'teleport' } }), 422, ['library_ingest[mode]'])
  assertProblem(t, await post({ library_ingest: { ...good, stable_seconds: 0 } }), 422, ['library_ingest[stable_seconds]'])
  assertProblem(t, await post({ library_ingest: { ...good, mode: 'in_place' } }), 422, ['library_ingest[path]'])
  // copying from the default storage's root would feed the project's own folder back into it
  assertProblem(t, await post({ library_ingest: { ...good, storage: 'default', path: '' } }), 422, ['library_ingest[path]'])
  assertProblem(t, await post({ library_ingest: { storage: 'watch', path: rel('drop'), project_id: lib.id } }), 422, ['library_ingest[name]'])
  t.equal(await count(s, 'platform_library_ingests'), 0, 'nothing written by refused requests')

  // Rails-style flat parameters are wrapped; the answer is the job of the first scan
  const made = await post({ ...good, interval_seconds: 86_400 })
  t.equal(made.status, 202, made.text)
  t.equal(made.body.job.action, 'platform.library-ingest-scan')
  t.match(made.headers.get('location'), /^\/api\/v1\/library_ingests\/\d+$/)
  const id = Number(made.headers.get('location')!.split('/').pop())
  const scanned = await waitForJob(s, s.admin.token, made.body.job.id)
  t.equal(scanned.state, 'finished')
  t.match(scanned.result, { ingest_id: id, files: 0, registered: 0 })

  const listed = await s.request('GET', '/library_ingests', { token: s.admin.token })
  t.equal(listed.status, 200)
  t.equal(listed.headers.get('x-total-count'), '1')
  t.match(listed.body.array, [{ id, name: 'Drop', project_id: lib.id, ingest_storage: 'watch', ingest_path: rel('drop'), 'ingest_path_exists?': true, enabled: true, options: { mode: 'copy', stable_seconds: 10, interval_seconds: 86_400, mxf_op_atom: false } }])
  t.type(listed.body.array[0].last_scan_at, 'string', 'the first scan ran')

  // the same name twice, also at once: one wins
  assertProblem(t, await post({ library_ingest: good }), 409)
  const [a, b] = await Promise.all([post({ library_ingest: { ...good, name: 'Twin' } }), post({ library_ingest: { ...good, name: 'Twin' } })])
  t.same([a.status, b.status].sort(), [202, 409], 'two creates of one name: one is made')
  t.equal(await count(s, 'platform_library_ingests', { name: 'Twin' }), 1)

  // update: checked whole, 404 for unknown ids
  const put = (ingestId: number, json: unknown, token = s.admin.token) => s.request('PUT', `/library_ingests/${ingestId}`, { token, json })
  const changed = await put(id, { library_ingest: { enabled: false, mode: 'move', mxf_op_atom: true, stable_seconds: 5 } })
  t.equal(changed.status, 200, changed.text)
  t.match(changed.body.libraryingest, { id, enabled: false, options: { mode: 'move', mxf_op_atom: true, stable_seconds: 5 } })
  assertProblem(t, await put(id, { library_ingest: { path: '../../x' } }), 422, ['library_ingest[path]'])
  assertProblem(t, await put(id, { library_ingest: { name: 'Twin' } }), 409)
  assertProblem(t, await put(999_999, { library_ingest: { enabled: true } }), 404)
  assertProblem(t, await put(id, { library_ingest: { enabled: true } }, s.user.token), 403)
  t.match(await s.runtime.db.knex('platform_library_ingests').where({ id }).first(), { name: 'Drop', path: rel('drop'), mode: 'move' }, 'the refused updates changed nothing')

  // a disabled ingest is not scanned by the poller
  await s.runtime.db.knex('platform_library_ingests').where({ id }).update({ next_scan_at: new Date(0) })
  t.equal(await service(s).tick(), 0, 'a disabled ingest is not queued, though due')

  assertProblem(t, await s.request('DELETE', `/library_ingests/${id}`, { token: s.user.token }), 403)
  const removed = await s.request('DELETE', `/library_ingests/${id}`, { token: s.admin.token })
  t.equal(removed.status, 200)
  t.equal(removed.body.libraryingest.id, id)
  assertProblem(t, await s.request('DELETE', `/library_ingests/${id}`, { token: s.admin.token }), 404)
  assertProblem(t, await s.request('GET', `/library_ingests/${id}/files`, { token: s.admin.token }), 404)
}, { config: configWith() })

onEachDatabase(t, 'library ingests: a growing file waits until stable; copy, move and in place on disk; two scans at once register each file once', async (t, s) => {
  const { base: root, rel } = await runFolder()
  const svc = service(s)
  const scan = (id: number, at: number) => svc.scan(id, s.em(), new Date(at))
  const lib = await library(s, 'Library B')
  const projectDir = lib.path as string

  // copy: a file written in steps is registered only once it stayed the same for stable_seconds
  await mkdir(path.join(root, 'copy', 'Day 1'), { recursive: true })
  const copyId = await createIngest(s, { name: 'Copy', storage: 'watch', path: rel('copy'), project_id: lib.id, mode: 'copy' })
  const growing = path.join(root, 'copy', 'Day 1', 'clip.txt')
  let t0 = Date.now() + 1000
  await writeFile(growing, 'a'.repeat(1000))
  t.match(await scan(copyId, t0), { files: 1, registered: 0, waiting: 1 })
  await appendFile(growing, 'b'.repeat(1000))
  t.match(await scan(copyId, t0 + 5000), { registered: 0 }, 'grew since the last poll: waits again')
  await appendFile(growing, 'c'.repeat(1000))
  t.match(await scan(copyId, t0 + 6000), { registered: 0 }, 'still growing')
  t.match(await scan(copyId, t0 + 7000), { registered: 0 }, 'unchanged for 1 s of 2')
  t.equal((await assetsOf(s, lib.id)).length, 0, 'nothing registered while the file grew')
  t.match(await scan(copyId, t0 + 8000), { registered: 1 }, 'unchanged for 2 s: registered')
  const [copied] = await assetsOf(s, lib.id)
  t.match(copied, { path: 'Day 1/clip.txt', size: 3000 })
  t.equal(await readFile(path.join(projectDir, 'Day 1', 'clip.txt'), 'utf8'), await readFile(growing, 'utf8'), 'the project holds a copy')
  t.not((await stat(path.join(projectDir, 'Day 1', 'clip.txt'))).ino, (await stat(growing)).ino, 'a copy, not a link of the watched file')
  t.match(await scan(copyId, t0 + 20_000), { registered: 0 }, 'a copied file is not registered again')
  t.same(await fileStates(s, copyId), { 'Day 1/clip.txt': 'registered' })

  // move: the watched file goes, the asset stays
  await mkdir(path.join(root, 'move'))
  const moveId = await createIngest(s, { name: 'Move', storage: 'watch', path: rel('move'), project_id: lib.id, mode: 'move' })
  await writeFile(path.join(root, 'move', 'take.txt'), 'moved content')
  t0 = Date.now() + 1000
  await scan(moveId, t0)
  t.match(await scan(moveId, t0 + 3000), { registered: 1 })
  t.equal(await stat(path.join(root, 'move', 'take.txt')).catch(() => null), null, 'the watched file is gone')
  t.equal(await readFile(path.join(projectDir, 'take.txt'), 'utf8'), 'moved content')
  await scan(moveId, t0 + 4000)
  t.same(await fileStates(s, moveId), {}, 'what was moved is forgotten')

  // in place: a folder inside the project; files stay where they are
  await mkdir(path.join(projectDir, 'incoming'))
  const storageRoot = s.runtime.container.resolve<any>('core.storages').get('default').root
  const inPlaceId = await createIngest(s, { name: 'In place', storage: 'default', path: path.relative(storageRoot, path.join(projectDir, 'incoming')), project_id: lib.id, mode: 'in_place' })
  await writeFile(path.join(projectDir, 'incoming', 'still.txt'), 'stays here')
  t0 = Date.now() + 1000
  await scan(inPlaceId, t0)
  t.match(await scan(inPlaceId, t0 + 3000), { registered: 1 })
  t.ok(await stat(path.join(projectDir, 'incoming', 'still.txt')), 'the file is where it was')
  t.ok((await assetsOf(s, lib.id)).some((a) => a.path === 'incoming/still.txt'), 'registered at its path in the project')

  // race: two scans at once over many stable files register each once
  await mkdir(path.join(root, 'race'))
  const raceId = await createIngest(s, { name: 'Race', storage: 'watch', path: rel('race'), project_id: lib.id, mode: 'copy' })
  for (let i = 0; i < 12; i++) await writeFile(path.join(root, 'race', `r${i}.txt`), `file ${i}`)
  t0 = Date.now() + 1000
  await scan(raceId, t0)
  const results = await Promise.all([scan(raceId, t0 + 3000), scan(raceId, t0 + 3000)])
  t.equal(results[0].registered + results[1].registered, 12, 'twelve registrations between the two scans')
  const raced = (await assetsOf(s, lib.id)).filter((a) => /^r\d+/.test(a.name))
  t.equal(raced.length, 12, 'each file once: no "r1 (2).txt"')

  // removing an ingest keeps its assets
  const before = await count(s, 'assets', { project_id: lib.id })
  t.equal((await s.request('DELETE', `/library_ingests/${copyId}`, { token: s.admin.token })).status, 200)
  t.equal(await count(s, 'assets', { project_id: lib.id }), before, 'the assets stay')
  t.equal(await count(s, 'platform_library_ingest_files', { ingest_id: copyId }), 0, 'what was seen goes with the ingest')
}, { config: configWith() })

onEachDatabase(t, 'library ingests: OP-Atom files of one clip are registered together once all are stable', async (t, s) => {
  const { base: root, rel } = await runFolder()
  const svc = service(s)
  const scan = (id: number, at: number) => svc.scan(id, s.em(), new Date(at))
  const lib = await library(s, 'Avid')
  const mxf = path.join(root, 'Avid MediaFiles', 'MXF', '1')
  await mkdir(mxf, { recursive: true })
  const id = await createIngest(s, { name: 'Avid', storage: 'watch', path: rel('Avid MediaFiles/MXF/1'), project_id: lib.id, mxf_op_atom: true })
  // bitexact: both files carry the same Material Package UID, as Avid's files of one clip do
  await ffmpeg(['-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25', '-t', '0.2', '-c:v', 'dnxhd', '-b:v', '36M', '-s', '1920x1080', '-pix_fmt', 'yuv422p', '-fflags', '+bitexact', '-f', 'mxf_opatom', path.join(mxf, 'INTERVIEW.V1.mxf')])
  await writeFile(path.join(mxf, 'notes.txt'), 'not part of the clip')
  const t0 = Date.now() + 1000
  await scan(id, t0)
  // the audio of the clip arrives later: the video, though stable, waits for it
  await ffmpeg(['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '0.2', '-c:a', 'pcm_s16le', '-fflags', '+bitexact', '-f', 'mxf_opatom', path.join(mxf, 'INTERVIEW_AUDIO.A1.mxf')])
  const first = await scan(id, t0 + 3000)
  t.equal(first.registered, 1, 'only the text file: the clip waits for its audio')
  t.same(await fileStates(s, id), { 'INTERVIEW.V1.mxf': 'waiting', 'INTERVIEW_AUDIO.A1.mxf': 'waiting', 'notes.txt': 'registered' })
  const rows = await s.runtime.db.knex('platform_library_ingest_files').where({ ingest_id: id }).whereNotNull('group_key').select('group_key')
  t.equal(new Set(rows.map((r: any) => r.group_key)).size, 1, 'grouped by the package UID, not the names (their stems differ)')
  t.match(rows[0].group_key, /package:060a2b34/)
  t.equal((await scan(id, t0 + 6000)).registered, 2, 'video and audio together')
  const names = (await assetsOf(s, lib.id)).map((a) => a.name).sort()
  t.same(names, ['INTERVIEW.V1.mxf', 'INTERVIEW_AUDIO.A1.mxf', 'notes.txt'])
}, { config: configWith() })

t.test('library ingests: the poller scans on its own, and a new server on the same database continues', async (t) => {
  for (const db of databaseKinds()) {
    const { base: root, rel } = await runFolder()
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-ingest-restart-'))
    const scratch = await scratchDatabase(db)
    t.teardown(async () => {
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const options = { db, dataDir, databaseUrl: scratch.databaseUrl, config: configWith(100) }
    const first = await startTestServer(options)
    await mkdir(path.join(root, 'drop'))
    const lib = await library(first, 'Library R')
    const id = await createIngest(first, { name: 'Polled', storage: 'watch', path: rel('drop'), project_id: lib.id, interval_seconds: 1, stable_seconds: 30 })
    await writeFile(path.join(root, 'drop', 'early.txt'), 'seen by the first server')
    await waitFor('the poller to see the file', async () => (await fileStates(first, id))['early.txt'] === 'waiting')
    await first.close()

    // the next server finds what the first one saw, and its own poller registers it once stable
    const second = await startTestServer(options)
    t.teardown(() => second.close())
    await second.request('PUT', `/library_ingests/${id}`, { token: second.admin.token, json: { library_ingest: { stable_seconds: 1 } } })
    await waitFor('the file to be registered after the restart', async () => (await fileStates(second, id))['early.txt'] === 'registered')
    const assets = await assetsOf(second, lib.id)
    t.match(assets, [{ path: 'early.txt', size: 'seen by the first server'.length }], `[${db}] registered once, by the new server`)
    const jobs = await second.runtime.db.knex('jobs').where({ type: 'platform.library-ingest-scan' }).whereIn('state', ['queued', 'running']).count({ n: '*' })
    t.ok(Number(jobs[0].n) <= 1, `[${db}] never more than one scan of an ingest queued or running`)
  }
})
