/**
 * Full disks (issue 19), on a small tmpfs that really fills (ENOSPC from the kernel; skipped with
 * the reason where mounting is not permitted), in two cases: a named storage full, and the data dir
 * full (SQLite file, temporary uploads, proxies, prepared downloads). Every write answers 507 (a
 * job waits to retry, it does not fail), leaves no partial or temporary file, changes no size or
 * count, and reads keep working; once space is freed the same calls succeed, the jobs complete, the
 * database is intact (integrity check), proxies written before and after decrypt and play (ffprobe
 * and a full decode) and the prepared zip opens (python3 -m zipfile -t).
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { assertProblem, databaseKinds, scratchDatabase, startTestServer, type TestServer } from '../helpers/index.js'
import { upload as uploadFiles, waitForAsset, waitForJob } from '../../core/testing/index.js'
import { decryptProxy, ffmpeg, filesBelow, makeVideo, probe } from '../helpers/media.js'
import { waitFor } from '../helpers/process.js'
import { mountTmpfs, type Tmpfs } from '../helpers/tmpfs.js'
import { makeTemplate } from '../plugins/projects/fixtures.js'
import { builtinPlugins } from '../../plugins/index.js'
import jobsPlugin from '../fixtures/jobs-plugin.js'

// real servers, restarts and a full burst on a shared 2-core machine: longer than tap's default
t.setTimeout(Number(process.env.MAMKIT_FAULT_TIMEOUT_MS ?? 600_000))

/** every entry below `root`, hidden ones too; folders end in `/` */
async function entries(root: string): Promise<string[]> {
  const list = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => [])
  return list
    .map((e) => path.relative(root, path.join(e.parentPath ?? (e as any).path, e.name)) + (e.isDirectory() ? '/' : ''))
    .filter((p) => !path.basename(p).startsWith('.filler-'))
    .sort()
}

function upload(s: TestServer, projectId: number, folder: string, name: string, bytes: number) {
  const form = new FormData()
  form.append('path', folder)
  form.append('file', new Blob([new Uint8Array(Buffer.alloc(bytes, 7))]), name)
  return s.request('POST', `/projects/${projectId}/inject_uploads`, { token: s.admin.token, multipart: form })
}

async function projectState(s: TestServer, id: number) {
  const project = (await s.request('GET', `/projects/${id}`, { token: s.admin.token })).body.project
  const assets = (await s.request('GET', `/projects/${id}/assets`, { token: s.admin.token, query: { recursive: 'true' } })).body
  if (!Array.isArray(assets.assets)) throw new Error(`assets: ${JSON.stringify(assets)}`)
  // what a failed write could change: the project's size and quota, which assets exist, their paths and sizes (not their analysis, which runs beside)
  return { size: project.size, quota: project.quota ?? null, assets: JSON.stringify(assets.assets.map((a: any) => [a.id, a.path, a.size])) }
}

type Tap = Pick<typeof t, 'ok' | 'equal' | 'fail' | 'resolves'>
const mountable = await mountTmpfs(1 << 20)
const skip = typeof mountable === 'string' ? mountable : undefined
if (typeof mountable !== 'string') await mountable.unmount()
if (skip) t.comment(`skipped: ${skip}`)
// generated media and downloaded files, on the ordinary disk (never on the tmpfs under test)
const scratchDir = await mkdtemp(path.join(tmpdir(), 'mamkit-diskfull-'))
t.teardown(() => rm(scratchDir, { recursive: true, force: true }))
const clip = skip ? '' : await makeVideo(path.join(scratchDir, 'clip.mov'), { seconds: 2 })

const run = promisify(execFile)

/** the asset's low-res proxy as stored below the data dir: decrypted with its key, probed, and decoded whole */
async function assertProxyPlays(t: Tap, s: TestServer, assetId: number, when: string) {
  const asset = (await s.request('GET', `/assets/${assetId}`, { token: s.admin.token })).body.asset
  t.equal(asset.proxy_state, 'ready', `${when}: the proxy is ready`)
  const stored = (await filesBelow(path.join(s.dataDir, 'proxies'))).find((f) => f.endsWith(path.join(asset.uuid, 'lowres.mp4.enc')))
  if (!stored) return t.fail(`${when}: no stored low-res proxy of asset ${assetId}`)
  const key = (await s.request('GET', `/assets/${assetId}/proxy_key`, { token: s.admin.token })).buffer
  const plain = path.join(scratchDir, `proxy-${assetId}-${when.replace(/\W+/g, '-')}.mp4`)
  await writeFile(plain, decryptProxy(await readFile(stored), key))
  const probed = await probe(plain)
  t.ok(probed.streams.some((st) => st.codec_type === 'video') && Number(probed.format.duration) > 1, `${when}: the proxy decrypts and ffprobe reads its video (${probed.format.duration} s)`)
  // -xerror: the first decoding error ends ffmpeg with a failure
  await t.resolves(ffmpeg(['-xerror', '-i', plain, '-f', 'null', '-']), `${when}: every frame of the proxy decodes`)
}

/** the prepared highres zip of a finished state: downloaded whole, tested by python's zipfile, holding the original */
async function assertZipOpens(t: Tap, s: TestServer, assetId: number, stateId: number, original: Buffer, when: string) {
  const zip = await s.request('GET', `/assets/${assetId}/download_highres`, { token: s.admin.token, query: { state_id: String(stateId) } })
  t.equal(zip.status, 200, `${when}: the prepared download answers`)
  const file = path.join(scratchDir, `download-${stateId}.zip`)
  await writeFile(file, zip.buffer)
  const tested = await run('python3', ['-m', 'zipfile', '-t', file]).then(() => 'ok', (err) => String(err.stderr || err.message))
  t.equal(tested, 'ok', `${when}: the zip opens (python3 -m zipfile -t)`)
  t.ok(zip.buffer.includes(original), `${when}: it holds the original`)
}

/** a job row as the queue keeps it */
const jobRow = (s: TestServer, id: number) => s.runtime.db.knex('jobs').where({ id }).first()

t.test('a full named storage: 507, nothing partial left, sizes unchanged, reads work; space freed: the same calls succeed', { skip }, async (t) => {
  const disk = (await mountTmpfs(8 << 20, 400)) as Tmpfs
  t.teardown(() => disk.unmount())
  const s = await startTestServer({
    plugins: [...builtinPlugins, jobsPlugin],
    config: { plugins: { storage: { storages: { full: disk.dir } } }, jobs: { diskFullRetryMs: 300, pollMs: 100 } },
  })
  t.teardown(() => s.close())
  const template = await makeTemplate(s, { name: 'Shoot', files: { 'Footage/readme.txt': 'template file', 'Edit/': null } })
  const created = await s.request('POST', '/projects', { token: s.admin.token, json: { name: 'On the small disk', storage: 'full', template_id: template.id } })
  t.equal(created.status, 201, created.text)
  const project = created.body.project
  const uploaded = await upload(s, project.id, 'Footage', 'first.bin', 100_000)
  t.equal(uploaded.status, 201, 'an upload while there is space')
  const first = uploaded.body.assets[0]
  const video = (await uploadFiles(s, s.admin.token, project.id, [{ name: 'clip.mov', file: clip }], { path: 'Footage' })).body.assets[0]
  t.equal((await waitForAsset(s, s.admin.token, video.id)).proxy_state, 'ready', 'a video with its proxy, made while there is space')
  await disk.fill()
  const before = { files: await entries(disk.dir), state: await projectState(s, project.id) }

  const attempts = {
    upload: () => upload(s, project.id, 'Footage', 'second.bin', 300_000),
    create_folder: () => s.request('PUT', `/projects/${project.id}/create_folder`, { token: s.admin.token, json: { path: 'New/Deep/Folder' } }),
    'project from a template': () => s.request('POST', '/projects', { token: s.admin.token, json: { name: 'Second project', storage: 'full', template_id: template.id } }),
  }
  for (const [what, call] of Object.entries(attempts)) {
    const reply = await call()
    assertProblem(t, reply, 507)
    t.equal(reply.body.code, 'insufficient_storage', `${what}: insufficient_storage`)
    t.same(await entries(disk.dir), before.files, `${what}: no partial, staged or temporary file or folder left`)
    t.same(await projectState(s, project.id), before.state, `${what}: sizes, quota and assets unchanged`)
  }
  t.equal((await s.request('GET', '/projects', { token: s.admin.token, query: { name: 'Second project' } })).body.projects?.length ?? 0, 0, 'no row of the project that could not be created')
  t.same(await entries(path.join(s.dataDir, 'tmp', 'uploads')), [], 'no temporary upload left')
  t.equal((await s.request('GET', `/projects/${project.id}/assets`, { token: s.admin.token })).status, 200, 'reads keep working')
  t.equal((await s.request('GET', `/assets/${first.id}`, { token: s.admin.token })).status, 200, 'an asset reads')

  // proxies and prepared downloads live under the data dir: made from what the full storage holds, they succeed
  const reencode = await s.request('POST', `/assets/${video.id}/reencode`, { token: s.admin.token })
  t.equal(reencode.status, 202, 'a proxy job for an asset on the full storage is queued')
  t.match(await waitForJob(s, s.admin.token, reencode.body.job.id, { route: '/asset_status' }), { state: 'finished' }, 'the proxy job finishes: it reads the storage, it writes the data dir')
  await assertProxyPlays(t, s, video.id, 'storage full')
  const prepared = await s.request('PUT', `/assets/${video.id}/prepare_download_highres`, { token: s.admin.token })
  t.equal(prepared.status, 202, 'a prepared download of an asset on the full storage is queued')
  t.match(await waitForJob(s, s.admin.token, prepared.body.assetstate.job_id, { route: '/asset_status' }), { state: 'finished' }, 'its packaging job finishes')
  await assertZipOpens(t, s, video.id, prepared.body.assetstate.id, await readFile(clip), 'storage full')
  t.same(await entries(disk.dir), before.files, 'the proxy and the package wrote nothing to the full storage')

  // a job writing to the full disk: handed back to run later, no attempt counted, not failed
  const marker = path.join(s.dataDir, 'marker')
  const job = (await s.request('POST', '/jobs_test/slow', { token: s.admin.token, json: { marker, out: path.join(disk.dir, 'job-output.txt'), steps: 2, ms: 10 } })).body.job
  const row = () => s.runtime.db.knex('jobs').where({ id: job.id }).first()
  await waitFor('the job to meet the full disk twice', async () => (await readFile(marker, 'utf8').catch(() => '')).split('\n').filter(Boolean).length >= 2, 20_000)
  const waiting = await row()
  t.match(waiting, { state: /queued|running/, attempts: /^[01]$/ }, 'the job waits to retry; its attempts are not used up')
  t.notOk(['failed', 'finished'].includes(waiting.state), 'not failed')
  t.same(await entries(disk.dir), before.files, 'the job left no partial file')

  await disk.free()
  t.equal((await attempts.upload()).status, 201, 'space freed: the upload succeeds')
  t.equal((await attempts.create_folder()).status, 200, 'space freed: create_folder succeeds')
  t.equal((await attempts['project from a template']()).status, 201, 'space freed: the project is created')
  const done = await waitFor('the job to finish', async () => ((await row()).state === 'finished' ? row() : undefined), 20_000)
  t.equal(Number(done.attempts), 1, 'space freed: the job finished on its first counted attempt')
  t.equal(await readFile(path.join(disk.dir, 'job-output.txt'), 'utf8'), 'chunk 0\nchunk 1\n', 'its output is whole')
})

for (const db of databaseKinds()) t.test(`a full data dir: writes answer 507, jobs wait, nothing corrupt once space returns [${db}]`, { skip }, async (t) => {
  const disk = (await mountTmpfs(24 << 20, 2000)) as Tmpfs
  t.teardown(() => disk.unmount())
  const scratch = await scratchDatabase(db)
  t.teardown(() => scratch.drop())
  const server = await startTestServer({
    db,
    dataDir: disk.dir,
    databaseUrl: scratch.databaseUrl,
    // without the view farm, which resumes the runner this test pauses (its node's own state steers claiming)
    plugins: builtinPlugins.filter((p) => p.name !== 'view-farms'),
    config: { jobs: { diskFullRetryMs: 300, pollMs: 100 } },
  })
  t.teardown(() => server.close())
  const token = server.admin.token
  const created = await server.request('POST', '/projects', { token, json: { name: 'Before the disk filled' } })
  t.equal(created.status, 201)
  const project = created.body.project
  const first = await upload(server, project.id, '', 'clip.bin', 200_000)
  t.equal(first.status, 201)
  const assetId = first.body.assets[0].id
  const video = (await uploadFiles(server, token, project.id, [{ name: 'clip.mov', file: clip }])).body.assets[0]
  t.equal((await waitForAsset(server, token, video.id)).proxy_state, 'ready', 'a video with its proxy, made while there is space')
  await assertProxyPlays(t, server, video.id, 'before the fault')

  // a proxy job and a packaging job queued while there is space, run once the disk is full: claiming
  // paused, a claim round under way and the runs under way ended, so nothing frees space after the fill
  const runner = server.runtime.runner
  runner.pause()
  await sleep(1000)
  await waitFor('the runs under way to end', () => runner.state().running === 0, 60_000)
  const reencode = await server.request('POST', `/assets/${video.id}/reencode`, { token })
  t.equal(reencode.status, 202)
  const proxyJob: number = reencode.body.job.id
  const queuedPackage = await server.request('PUT', `/assets/${video.id}/prepare_download_highres`, { token })
  t.equal(queuedPackage.status, 202)
  const packageJob: number = queuedPackage.body.assetstate.job_id
  t.same([(await jobRow(server, proxyJob)).state, (await jobRow(server, packageJob)).state], ['queued', 'queued'], 'both wait in the queue')
  // bytes only: folders can still be made, so the proxy job gets as far as ffmpeg writing its output
  await disk.fill({ inodes: false })
  const outside = (dir: string) => entries(path.join(disk.dir, dir))
  const before = { storage: await outside('storage'), proxies: await outside('proxies'), tmp: await outside('tmp'), state: await projectState(server, project.id) }

  const up = await upload(server, project.id, '', 'second.bin', 2_000_000)
  assertProblem(t, up, 507)
  t.equal(up.body?.code, 'insufficient_storage', 'an upload that cannot be received answers 507')
  const write = await server.request('POST', '/projects', { token, json: { name: 'While the disk is full' } })
  if (server.db === 'sqlite') {
    assertProblem(t, write, 507)
    t.equal(write.body.code, 'insufficient_storage', 'a database write answers 507')
  } else t.equal(write.status, 201, 'PostgreSQL lives elsewhere: its writes succeed')
  const prepared = await server.request('PUT', `/assets/${assetId}/prepare_download_highres`, { token })
  if (server.db === 'sqlite') {
    assertProblem(t, prepared, 507)
    t.equal(prepared.body.code, 'insufficient_storage', 'prepare_download_highres answers 507: its state row cannot be written')
  } else t.equal(prepared.status, 202, 'prepare_download_highres is queued: its rows live in PostgreSQL')
  t.equal((await server.request('GET', `/assets/${assetId}`, { token })).status, 200, 'reads keep working')

  const resumedAt = Date.now()
  runner.resume()
  if (server.db === 'postgresql') {
    // the proxy job meets the full disk (ffmpeg cannot write) and is handed back; the package writes nothing to the data dir and finishes
    await waitFor('the proxy job to meet the full disk', async () => {
      const row = await jobRow(server, proxyJob)
      return row.state === 'queued' && new Date(row.run_at).getTime() > resumedAt
    }, 60_000)
    t.match(await waitForJob(server, token, packageJob, { route: '/asset_status' }), { state: 'finished' }, 'the packaging job finishes: it writes nothing to the data dir')
    await assertZipOpens(t, server, video.id, queuedPackage.body.assetstate.id, await readFile(clip), 'data dir full')
    t.equal((await waitForJob(server, token, prepared.body.assetstate.job_id, { route: '/asset_status' })).state, 'finished', 'so does the one prepared while the disk is full')
  } else await sleep(2000) // the runner's claims are writes too: SQLite refuses them, and the jobs wait in the queue
  // what a run leaves once it ended: claiming paused and the runs under way over (one retries every 300 ms)
  runner.pause()
  await waitFor('the runs under way to end', () => runner.state().running === 0, 60_000)
  const proxyRow = await jobRow(server, proxyJob)
  t.match(proxyRow, { state: /queued|running/, attempts: /^[01]$/ }, 'the proxy job waits to retry; its attempts are not used up')
  const waiting = (await server.request('GET', `/assets/${video.id}`, { token })).body.asset
  t.notOk(waiting.proxy_state === 'failed' || waiting.proxy_error, `the asset's proxy is not failed (${waiting.proxy_state}: ${waiting.proxy_error})`)
  t.same((await server.runtime.db.knex('jobs').where({ state: 'failed' }).select('id', 'type', 'error')), [], 'no job failed because of the full disk')
  t.same(await outside('tmp'), before.tmp, 'no temporary upload, work folder or scratch file left')
  t.same(await outside('proxies'), before.proxies, 'no partial proxy left')
  // (on PostgreSQL the project created meanwhile has its folder: it was answered 201)
  const madeMeanwhile = server.db === 'postgresql' ? [`default/${write.body.project.folder}/`] : []
  t.same(await outside('storage'), [...before.storage, ...madeMeanwhile].sort(), 'no partial file in the storage')
  t.same(await projectState(server, project.id), before.state, 'sizes and assets unchanged')

  runner.resume()
  await disk.free()
  if (server.db === 'sqlite') {
    const result = await server.runtime.db.knex.raw('pragma integrity_check')
    t.same(result.map((r: any) => r.integrity_check), ['ok'], 'SQLite integrity check: ok')
  }
  t.equal((await upload(server, project.id, '', 'second.bin', 2_000_000)).status, 201, 'space freed: the upload succeeds')
  t.equal((await server.request('POST', '/projects', { token, json: { name: 'After the disk was freed' } })).status, 201, 'space freed: writes succeed')
  const proxyDone = await waitForJob(server, token, proxyJob, { route: '/asset_status' })
  t.equal(proxyDone.state, 'finished', 'space freed: the proxy job completes')
  t.equal(Number((await jobRow(server, proxyJob)).attempts), 1, 'on its first counted attempt')
  await assertProxyPlays(t, server, video.id, 'after the fault')
  const packaged = await waitForJob(server, token, packageJob, { route: '/asset_status' })
  t.equal(packaged.state, 'finished', 'space freed: the packaging job completes')
  await assertZipOpens(t, server, video.id, queuedPackage.body.assetstate.id, await readFile(clip), 'after the fault')
  const again = await server.request('PUT', `/assets/${assetId}/prepare_download_highres`, { token })
  t.equal(again.status, 202, 'space freed: prepare_download_highres is queued')
  t.equal((await waitForJob(server, token, again.body.assetstate.job_id, { route: '/asset_status' })).state, 'finished', 'and finishes')
  await assertZipOpens(t, server, assetId, again.body.assetstate.id, Buffer.alloc(200_000, 7), 'after the fault, a second asset')
  if (server.db === 'sqlite') {
    const result = await server.runtime.db.knex.raw('pragma integrity_check')
    t.same(result.map((r: any) => r.integrity_check), ['ok'], 'SQLite integrity check after the jobs ran: ok')
  }
})

// Found here: on a data dir with a little room left, an upload's file and asset row were committed,
// then the analysis job could not be queued nor the storage journal's entry deleted (SQLITE_FULL),
// and the request answered 507 "nothing was stored" while the asset existed. Now the answer says
// what was stored; the entry stays and its repair queues the analysis once the database can grow.
// That repair waited for a restart: the journal's sweep skipped every entry of its own process, so
// the asset stayed unanalysed (and the entry held its project's scope against folder moves) until
// then. The sweep now repairs an own entry that no running operation holds.
t.test('an upload that fits while the database cannot grow: its answer tells what was stored; space back, its analysis runs without a restart', { skip }, async (t) => {
  const disk = (await mountTmpfs(24 << 20, 2000)) as Tmpfs
  t.teardown(() => disk.unmount())
  // short leases: the journal sweeps (and a left entry's lease lapses) every second
  const server = await startTestServer({ db: 'sqlite', dataDir: disk.dir, config: { jobs: { leaseMs: 1000 } } })
  t.teardown(() => server.close())
  const project = (await server.request('POST', '/projects', { token: server.admin.token, json: { name: 'Little room' } })).body.project
  await disk.fill({ inodes: false })
  // 256 KB of room: the upload fits, the database's later writes do not all fit
  const filler = path.join(disk.dir, '.filler-0')
  await truncate(filler, (await stat(filler)).size - 262_144)
  const reply = await upload(server, project.id, '', 'fits.bin', 100_000)
  const assets = (await server.request('GET', `/projects/${project.id}/assets`, { token: server.admin.token })).body.assets
  const stored = assets.some((a: any) => a.name === 'fits.bin')
  t.ok(reply.status === 201 ? stored : !stored, `answered ${reply.status} (${reply.body?.code ?? ''}) while the asset ${stored ? 'was' : 'was not'} stored`)
  const journal = async () => Number((await server.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n)
  t.comment(`entries left in the storage journal while the disk is full: ${await journal()}`)

  await disk.free()
  await waitFor('the storage journal to be repaired', async () => (await journal()) === 0, 30_000)
  t.pass('space back: the journal was repaired by this process, without a restart')
  if (stored) {
    const id = assets.find((a: any) => a.name === 'fits.bin').id
    const asset = await waitForAsset(server, server.admin.token, id, (a) => a.analysis_state === 'ready', 30_000)
    t.match(asset, { analysis_state: 'ready', type: 'other' }, 'the stored upload was analysed')
  }
})
