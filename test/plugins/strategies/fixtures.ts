import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type tap from 'tap'
import { S3Client } from '@aws-sdk/client-s3'
import type { TestServer } from '../../helpers/index.js'
import { startRgw, type Rgw } from '../../helpers/rgw.js'
import { waitForQuiet } from '../../helpers/media.js'
import { createProject, writeTree } from '../projects/fixtures.js'
import type { ArchiveService } from '../../../plugins/strategies/archive.js'

export const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** a temporary directory that is a configured target root, removed at teardown */
export async function targetRoot(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-targets-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

export async function diskStrategy(s: TestServer, kind: string, dir: string, fields: Record<string, unknown> = {}) {
  const wrap = `${kind.replace(/s$/, '').replace('_strategie', '_strategy')}`
  const reply = await s.request('POST', `/${kind}`, { token: s.admin.token, json: { [wrap]: { name: `to ${path.basename(dir)} ${randomBytes(3).toString('hex')}`, destination: dir, ...fields } } })
  if (reply.status !== 201) throw new Error(`strategy: ${reply.status} ${reply.text}`)
  return Object.values(reply.body)[0] as any
}

/** media-like files: small text files and one of several MiB (two S3 parts … or one disk stream) */
export const FILES: Record<string, string | Buffer> = {
  'a.txt': 'alpha',
  'Media/clip.mov': randomBytes(3 * 1024 * 1024 + 17),
  'Media/Sub/still.jpg': randomBytes(4096),
  'Docs/notes.txt': 'notes',
}

/** a project of the plain user with `files` on disk and registered as assets */
export async function archivedProject(s: TestServer, name: string, files: Record<string, string | Buffer> = FILES, jobsRun = true) {
  const p = await createProject(s, s.user, { name })
  await writeTree(p.path, files)
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: Object.keys(files).filter((f) => !f.startsWith('Docs/')) } })
  if (added.status !== 201) throw new Error(`addassets: ${added.status} ${added.text}`)
  if (jobsRun) {
    await waitForQuiet(s, ['assets.analyse'])
    // the size the project is charged with
    await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: s.user.token })
    await waitForQuiet(s)
  } else {
    const size = Object.values(files).reduce((n, v) => n + Buffer.byteLength(v), 0)
    await s.runtime.db.knex('projects').where({ id: p.id }).update({ size })
  }
  const sums = Object.fromEntries(await Promise.all(Object.keys(files).map(async (f) => [f, sha(await readFile(path.join(p.path, f)))])))
  return { p, sums }
}

/** polls the project's archive state until it rests */
export async function waitForArchive(s: TestServer, projectId: number, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs
  for (;;) {
    const r = await s.runtime.db.knex('archive_states').where({ project_id: projectId }).first()
    const job = r?.job_id ? await s.runtime.db.knex('jobs').where({ id: r.job_id }).first('state') : null
    if (r && !['queued', 'copying', 'verifying', 'releasing', 'restoring', 'moving'].includes(r.state) && (!job || !['queued', 'running'].includes(job.state))) return r
    if (Date.now() > until) throw new Error(`archive of ${projectId} still ${r?.state}`)
    await sleep(50)
  }
}

export const archives = (s: TestServer) => s.runtime.container.resolve<ArchiveService>('strategies.archives')

/** runs the archive job's engine in the test's process, as a job would (servers started with runJobs: false) */
export const runArchive = (s: TestServer, projectId: number) =>
  archives(s).run(projectId, { signal: new AbortController().signal, progress: () => {}, log: { warn() {}, info() {}, error() {} } as any })

/**
 * A Ceph RGW for this test file (stopped at teardown), a client of it with the settings that avoid
 * Ceph's refusals (WHEN_REQUIRED checksums), a disk target root, and the `target` settings of a
 * strategy on the RGW. Null where it cannot run (packages missing, it would not start): then a
 * skipped test named `name` says why, never "no tests".
 */
export async function rgwForTests(t: typeof tap, name: string) {
  const rgw: Rgw | string = await startRgw()
  if (typeof rgw === 'string') {
    t.comment(`skipped: ${rgw}`)
    t.test(name, { skip: rgw }, () => {})
    return null
  }
  t.teardown(() => rgw.stop())
  const client = new S3Client({ endpoint: rgw.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey }, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' })
  t.teardown(() => client.destroy())
  const dir = await targetRoot(t)
  const target = (extra: Record<string, unknown> = {}) => ({ endpoint: rgw.endpoint, access_key_id: rgw.accessKeyId, secret_access_key: rgw.secretAccessKey, ...extra })
  return { rgw, client, dir, target }
}
