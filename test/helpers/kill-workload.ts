/**
 * The seeded "killed at any point" campaign of issue 19, shared by test/e2e/fault-kill.test.ts (a
 * short run in CI) and bench/faults.ts (long runs that print seeds and findings). Workers drive a
 * real `mamkit serve` with writes (projects from a template, uploads, folders created and renamed,
 * rights granted, descriptions changed, assets deleted, jobs queued); the server is SIGKILLed at
 * seeded random moments and restarted on the same data dir and database, and after every restart
 * the invariants are checked: every change answered 2xx is there (or, for the one request each
 * worker had in flight, either outcome), no file without its row or row without its file, no
 * temporary files, sizes of rows match their files, no job lost, stuck or failed.
 */
import { createHash, randomBytes } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { request, type Reply } from '../../core/testing/index.js'
import { login, serveProcess, waitFor, type ServerProcess } from './process.js'
import { openDatabase, type Database } from '../../core/db/orm.js'

const PLUGIN = fileURLToPath(new URL('../fixtures/jobs-plugin.js', import.meta.url))

/** mulberry32: the same seed, the same workload and kill moments */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex')

interface AssetRecord {
  id: number
  projectId: number
  sha: string
  /** the description answered last; `pending` one sent without an answer may or may not be stored */
  description: string | null
  pendingDescription?: string | null
  deleted: boolean
  pendingDelete?: boolean
}

interface ProjectRecord {
  id: number
  name: string
  folders: Set<string>
  granted: boolean
}

export interface CampaignOptions {
  seed: number
  kills: number
  dataDir: string
  databaseUrl?: string
  workers?: number
  /** the longest run between two kills */
  maxRunMs?: number
  /**
   * Stop killing once this many milliseconds went by (the final round and the checks follow): a
   * run fits a per-file timeout on a loaded machine, where a restart can take 3× what it does idle.
   * The result's `kills` says how many kills were made.
   */
  budgetMs?: number
  log?: (line: string) => void
}

export interface CampaignResult {
  seed: number
  /** the kills made: `kills` asked for, fewer when the time budget ran out first */
  kills: number
  findings: string[]
  /** background jobs (analysis, proxies) that failed for a reason other than the kills: an open finding, kept apart from the data invariants */
  jobFailures: string[]
  counts: Record<string, number>
  restartMs: number[]
}

export async function runKillCampaign(options: CampaignOptions): Promise<CampaignResult> {
  const { seed, kills, dataDir, databaseUrl } = options
  const log = options.log ?? (() => {})
  const random = prng(seed)
  const workers = options.workers ?? 4
  const maxRunMs = options.maxRunMs ?? 1500
  const findings: string[] = []
  const jobFailures: string[] = []
  const counts: Record<string, number> = {}
  let answered = 0
  const count = (what: string) => ((counts[what] = (counts[what] ?? 0) + 1), answered++)
  const restartMs: number[] = []
  const deadline = Date.now() + (options.budgetMs ?? Infinity)
  let made = 0
  const jobsFile = path.join(dataDir, 'job-runs.txt')

  let server: ServerProcess = await serveProcess(dataDir, databaseUrl, ['--plugin', PLUGIN])
  const token = await login(server.url)
  const db: Database = await openDatabase({ dataDir, databaseUrl, entities: [] })
  try {
    const api = (method: string, route: string, opts: Parameters<typeof request>[3] = {}): Promise<Reply | null> =>
      request(server.url, method, route, { token, ...opts }).catch(() => null)
    const template = (await api('POST', '/templates', { json: { template: { name: `Kill template ${seed}`, template_type: 'generic' } } }))!.body.template
    const team = (await api('POST', '/teams', { json: { team: { name: `Kill team ${seed}` } } }))!.body.teams.id as number

    const projects: ProjectRecord[] = []
    const assets = new Map<number, AssetRecord>()
    /** the content of every upload sent (answered or not): a file holds one of these, whole */
    const sentUploads = new Set<string>()
    const jobIds: number[] = []
    let n = 0

    /** one worker's writes until the server dies under it */
    const worker = async (w: number) => {
      for (;;) {
        const op = random()
        const id = n++
        const project = projects.length ? projects[Math.floor(random() * projects.length)] : undefined
        if (!project || op < 0.12) {
          const name = `Killed ${seed} ${w}-${id}`
          const r = await api('POST', '/projects', { json: { name, template_id: template.id } })
          if (!r) return
          if (r.status === 201) projects.push({ id: r.body.project.id, name, folders: new Set(), granted: false }), count('project created')
        } else if (op < 0.42) {
          // base64 text: random bytes are sometimes read by ffprobe as media (MP3 frame syncs, BinText),
          // and their proxy then rightly fails to decode: a failure of the content, not of a kill
          const data = Buffer.from(randomBytes(750 + Math.floor(random() * 150_000)).toString('base64'))
          const digest = sha(data)
          const form = new FormData()
          form.append('file', new Blob([new Uint8Array(data)]), `clip-${id}.bin`)
          sentUploads.add(digest)
          const r = await api('POST', `/projects/${project.id}/inject_uploads`, { multipart: form })
          if (!r) return
          if (r.status === 201) assets.set(r.body.assets[0].id, { id: r.body.assets[0].id, projectId: project.id, sha: digest, description: null, deleted: false }), count('upload')
        } else if (op < 0.55) {
          const folder = `Folder ${id}`
          const r = await api('PUT', `/projects/${project.id}/create_folder`, { json: { path: folder } })
          if (!r) return
          if (r.status === 200) project.folders.add(folder), count('folder created')
        } else if (op < 0.62 && project.folders.size) {
          const from = [...project.folders][0]
          const to = `Renamed ${id}`
          project.folders.delete(from) // either name may survive a kill in flight: checked as "one of the two"
          const r = await api('PUT', `/projects/${project.id}/rename_folder`, { json: { path: from, name: to } })
          if (!r) {
            project.folders.add(`${from}|${to}`)
            return
          }
          project.folders.add(r.status === 200 ? to : from)
          if (r.status === 200) count('folder renamed')
        } else if (op < 0.68) {
          const r = await api('PUT', `/projects/${project.id}/teams`, { json: { team_id: team, read: true, write: random() < 0.5 } })
          if (!r) return
          if (r.status === 200) project.granted = true, count('right granted')
        } else if (op < 0.85) {
          const mine = [...assets.values()].filter((a) => !a.deleted && !a.pendingDelete && a.pendingDescription === undefined)
          if (!mine.length) continue
          const asset = mine[Math.floor(random() * mine.length)]
          const description = `said ${id}`
          asset.pendingDescription = description
          const r = await api('PUT', `/assets/${asset.id}`, { json: { description } })
          if (!r) return
          delete asset.pendingDescription
          if (r.status === 200) asset.description = description, count('description')
        } else if (op < 0.93) {
          const mine = [...assets.values()].filter((a) => !a.deleted && !a.pendingDelete && a.pendingDescription === undefined)
          if (!mine.length) continue
          const asset = mine[Math.floor(random() * mine.length)]
          asset.pendingDelete = true
          const r = await api('DELETE', '/assets/destroy', { json: { asset_ids: [asset.id] } })
          if (!r) return
          delete asset.pendingDelete
          if (r.status === 200) asset.deleted = true, count('asset deleted')
        } else {
          const r = await api('POST', '/jobs_test/append', { json: { file: jobsFile, ms: 50 } })
          if (!r) return
          if (r.status === 200) jobIds.push(r.body.job.id), count('job queued')
        }
      }
    }

    for (let kill = 0, last = false; !last; kill++) {
      last = kill === kills || Date.now() >= deadline
      if (last && kill < kills) log(`time budget of ${options.budgetMs} ms spent after ${kill} of ${kills} kills (seed ${seed})`)
      const running = Array.from({ length: workers }, (_, w) => worker(w))
      if (last) {
        // the last round ends without a kill: everything settles, then the final check
        await sleep(maxRunMs)
        server.child.kill('SIGTERM')
        await server.exited
      } else {
        const after = Math.floor(random() * maxRunMs)
        const before = answered
        await sleep(after)
        // on a loaded machine one request can take longer than a round: a round kills only after
        // one of its writes was answered (or 10 s went by), so a run writes something to check
        await waitFor('a write of this round', () => answered > before, 10_000).catch(() => {})
        server.child.kill('SIGKILL')
        await server.exited
        made++
        log(`kill ${kill + 1}/${kills} after ${after} ms (seed ${seed})`)
      }
      await Promise.all(running)
      const started = Date.now()
      server = await serveProcess(dataDir, databaseUrl, ['--plugin', PLUGIN])
      restartMs.push(Date.now() - started)
      await waitFor('the storage journal to be repaired', async () => Number((await db.knex('storage_journal').count({ n: '*' }))[0].n) === 0, 60_000).catch(() => findings.push(`kill ${kill + 1}: the storage journal was not emptied after the restart`))
      const found = await checkInvariants(db, dataDir, projects, assets, sentUploads)
      for (const f of found) findings.push(`kill ${kill + 1}: ${f}`)
      // what was in flight is settled now: the records take the state found
      for (const a of assets.values()) {
        if (a.pendingDescription !== undefined) {
          const row = await db.knex('assets').where({ id: a.id }).first('description')
          a.description = row?.description ?? a.description
          delete a.pendingDescription
        }
        if (a.pendingDelete) {
          a.deleted = !(await db.knex('assets').where({ id: a.id }).first('id'))
          delete a.pendingDelete
        }
      }
      for (const p of projects) for (const f of [...p.folders]) if (f.includes('|')) {
        p.folders.delete(f)
        const [from, to] = f.split('|')
        const root = await projectRoot(db, dataDir, p.id)
        p.folders.add((await stat(path.join(root, to)).then(() => true, () => false)) ? to : from)
      }
    }

    // jobs: every one answered 200 ends finished (none lost, stuck or failed)
    await waitFor('queued jobs to finish', async () => Number((await db.knex('jobs').whereIn('id', jobIds).whereIn('state', ['queued', 'running']).count({ n: '*' }))[0].n) === 0, 60_000).catch(() => {})
    const jobs = await db.knex('jobs').whereIn('id', jobIds).select('id', 'state')
    if (jobs.length !== jobIds.length) findings.push(`${jobIds.length - jobs.length} jobs answered 200 are missing`)
    for (const j of jobs) if (j.state !== 'finished') findings.push(`job ${j.id} is ${j.state}`)
    // a job killed with its process on every one of its attempts is failed on purpose (a job that
    // crashes its process must not do so forever): with kills every second that is expected, not a fault
    const failed = await db.knex('jobs').where({ state: 'failed' }).select('id', 'type', 'error', 'payload')
    for (const j of failed) {
      // an analysis or proxy job whose asset the workload deleted meanwhile fails with that reason: expected
      const assetId = Number((typeof j.payload === 'string' ? JSON.parse(j.payload) : j.payload)?.assetId)
      const gone = Number.isInteger(assetId) && !(await db.knex('assets').where({ id: assetId }).first('id'))
      if (/lease lapsed/.test(j.error ?? '')) count('job failed after being killed on every attempt')
      else if (gone) count('asset job failed: its asset was deleted meanwhile')
      else jobFailures.push(`job ${j.id} (${j.type}) failed: ${j.error}`)
    }
    server.child.kill('SIGTERM')
    const exit = await server.exited
    if (exit.code !== 0) findings.push(`the last SIGTERM ended with ${exit.code ?? exit.signal}`)
    return { seed, kills: made, findings, jobFailures, counts, restartMs }
  } finally {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL')
    await db.close()
  }
}

/** the campaign's projects live on the default storage below the data dir */
const storageRootOf = (dataDir: string) => path.join(dataDir, 'storage', 'default')

async function projectRoot(db: Database, dataDir: string, id: number): Promise<string> {
  const p = await db.knex('projects').where({ id }).first('folder')
  return path.join(storageRootOf(dataDir), p.folder)
}

/** every file below `root`, hidden ones too, relative with `/` */
async function filesBelow(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => [])
  return entries.filter((e) => e.isFile()).map((e) => path.relative(root, path.join(e.parentPath ?? (e as any).path, e.name)).split(path.sep).join('/'))
}

async function checkInvariants(db: Database, dataDir: string, projects: ProjectRecord[], assets: Map<number, AssetRecord>, sent: Set<string>): Promise<string[]> {
  const found: string[] = []
  const storageRoot = storageRootOf(dataDir)
  const rows = await db.knex('projects').select('id', 'folder')
  const byId = new Map(rows.map((r: any) => [Number(r.id), r]))
  for (const p of projects) {
    const row = byId.get(p.id)
    if (!row) {
      found.push(`project ${p.id} answered 201 is gone`)
      continue
    }
    const root = path.join(storageRoot, row.folder)
    if (!(await stat(root).then((s) => s.isDirectory(), () => false))) found.push(`project ${p.id} has no folder`)
    for (const f of p.folders) {
      const names = f.split('|')
      const present = await Promise.all(names.map((n) => stat(path.join(root, n)).then((s) => s.isDirectory(), () => false)))
      if (!present.some(Boolean)) found.push(`project ${p.id}: folder ${names.join(' or ')} answered 200 is missing`)
    }
    if (p.granted && !(await db.knex('access_rights').where({ object_type: 'project', object_id: p.id }).whereNot('team_id', 0).first('id'))) found.push(`project ${p.id}: the right granted is gone`)
  }
  for (const a of assets.values()) {
    const row = await db.knex('assets').where({ id: a.id }).first('id', 'description')
    if (a.deleted && row) found.push(`asset ${a.id} deleted (200) is back`)
    if (!a.deleted && !a.pendingDelete && !row) found.push(`asset ${a.id} answered 201 is gone`)
    if (row && !a.deleted) {
      const allowed = [a.description, ...(a.pendingDescription !== undefined ? [a.pendingDescription] : [])]
      if (!allowed.includes(row.description ?? null)) found.push(`asset ${a.id}: description ${JSON.stringify(row.description)}, answered ${JSON.stringify(a.description)}`)
    }
  }
  // files and rows together, in every project folder the campaign made; no temporary files
  for (const p of projects) {
    const row = byId.get(p.id)
    if (!row) continue
    const root = path.join(storageRoot, row.folder)
    const files = await filesBelow(root)
    const hidden = files.filter((f) => path.posix.basename(f).startsWith('.'))
    if (hidden.length) found.push(`project ${p.id}: temporary files left: ${hidden.slice(0, 3).join(', ')}`)
    const assetRows = await db.knex('assets').where({ project_id: p.id }).select('id', 'path', 'size')
    const paths = new Set(assetRows.map((r: any) => r.path))
    for (const f of files) if (!paths.has(f) && !path.posix.basename(f).startsWith('.')) found.push(`project ${p.id}: file ${f} has no row`)
    for (const r of assetRows) {
      const info = await stat(path.join(root, r.path)).catch(() => null)
      if (!info) found.push(`project ${p.id}: row ${r.id} (${r.path}) has no file`)
      else if (Number(r.size) !== info.size) found.push(`asset ${r.id}: row size ${r.size}, file ${info.size} bytes`)
      const record = assets.get(Number(r.id))
      if (info && record && sha(await readFile(path.join(root, r.path))) !== record.sha) found.push(`asset ${r.id}: the file is not the content uploaded`)
      if (!record && info) {
        // an upload whose answer was lost: whole, and one of those sent
        const digest = sha(await readFile(path.join(root, r.path)))
        if (!sent.has(digest)) found.push(`asset ${r.id}: content that no request sent`)
      }
    }
  }
  const trash = await filesBelow(path.join(storageRoot, '.mamkit-trash'))
  if (trash.length) found.push(`files left in the trash staging: ${trash.slice(0, 3).join(', ')}`)
  const uploads = await filesBelow(path.join(dataDir, 'tmp', 'uploads'))
  if (uploads.length) found.push(`temporary uploads left: ${uploads.length}`)
  return found
}
