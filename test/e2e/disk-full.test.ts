/**
 * Full disks (issue 19), on a small tmpfs that really fills (ENOSPC from the kernel; skipped with
 * the reason where mounting is not permitted), in two cases: a named storage full, and the data dir
 * full (SQLite file, temporary uploads, prepared downloads). Every write answers 507 (a job waits
 * to retry, it does not fail), leaves no partial or temporary file, changes no size or count, and
 * reads keep working; once space is freed the same calls succeed and the database is intact.
 */
import t from 'tap'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { assertProblem, databaseKinds, scratchDatabase, startTestServer, type TestServer } from '../helpers/index.js'
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

const probe = await mountTmpfs(1 << 20)
const skip = typeof probe === 'string' ? probe : undefined
if (typeof probe !== 'string') await probe.unmount()
if (skip) t.comment(`skipped: ${skip}`)

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

for (const db of databaseKinds()) t.test(`a full data dir: writes answer 507, downloads wait, nothing corrupt once space returns [${db}]`, { skip }, async (t) => {
  const disk = (await mountTmpfs(24 << 20, 2000)) as Tmpfs
  t.teardown(() => disk.unmount())
  const scratch = await scratchDatabase(db)
  t.teardown(() => scratch.drop())
  const server = await startTestServer({ db, dataDir: disk.dir, databaseUrl: scratch.databaseUrl })
  t.teardown(() => server.close())
  const created = await server.request('POST', '/projects', { token: server.admin.token, json: { name: 'Before the disk filled' } })
  t.equal(created.status, 201)
  const project = created.body.project
  const first = await upload(server, project.id, '', 'clip.bin', 200_000)
  t.equal(first.status, 201)
  const assetId = first.body.assets[0].id
  await disk.fill()
  const before = { files: await entries(path.join(disk.dir, 'storage')), state: await projectState(server, project.id) }

  const up = await upload(server, project.id, '', 'second.bin', 2_000_000)
  t.ok([507, 503].includes(up.status), `an upload that cannot be received answers 507 (got ${up.status})`)
  t.equal(up.body?.code, 'insufficient_storage')
  const write = await server.request('POST', '/projects', { token: server.admin.token, json: { name: 'While the disk is full' } })
  if (server.db === 'sqlite') {
    assertProblem(t, write, 507)
    t.equal(write.body.code, 'insufficient_storage', 'a database write answers 507')
  } else t.ok([201, 507].includes(write.status), `PostgreSQL lives elsewhere: its write answers ${write.status}`)
  const prepared = await server.request('PUT', `/assets/${assetId}/prepare_download_highres`, { token: server.admin.token })
  t.ok(prepared.status < 300 || prepared.status === 507, `prepare_download_highres answers ${prepared.status}`)
  t.same(await entries(path.join(disk.dir, 'tmp', 'uploads')), [], 'no temporary upload left')
  t.same(await entries(path.join(disk.dir, 'storage')), before.files, 'no partial file in the storage')
  t.same(await projectState(server, project.id), before.state, 'sizes and assets unchanged')
  t.equal((await server.request('GET', `/assets/${assetId}`, { token: server.admin.token })).status, 200, 'reads keep working')
  let jobId: number | undefined = prepared.body?.job?.id ?? prepared.body?.state_id
  if (prepared.status < 300 && server.db === 'sqlite') {
    // the packaging job meets the full disk: it waits to retry, it is not failed
    const jobs = async () => server.runtime.db.knex('jobs').where({ type: 'assets.download' }).orWhere('type', 'like', 'assets.%download%').select('id', 'state', 'attempts', 'error')
    await new Promise((r) => setTimeout(r, 1500))
    t.same((await jobs()).filter((j: any) => j.state === 'failed'), [], 'no download job failed because of the full disk')
  }

  await disk.free()
  if (server.db === 'sqlite') {
    const check = server.runtime.db.knex
    const result = await check.raw('pragma integrity_check')
    t.same(result.map((r: any) => r.integrity_check), ['ok'], 'SQLite integrity check: ok')
  }
  t.equal((await upload(server, project.id, '', 'second.bin', 2_000_000)).status, 201, 'space freed: the upload succeeds')
  t.equal((await server.request('POST', '/projects', { token: server.admin.token, json: { name: 'After the disk was freed' } })).status, 201, 'space freed: writes succeed')
  if (prepared.status < 300) {
    const again = await server.request('PUT', `/assets/${assetId}/prepare_download_highres`, { token: server.admin.token })
    t.ok(again.status < 300, `prepare_download_highres succeeds (${again.status})`)
    jobId ??= again.body?.job?.id
  }
  void jobId
  void readFile
  void waitFor
})
