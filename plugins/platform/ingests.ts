import { randomUUID } from 'node:crypto'
import { lstat, mkdir, readdir, rm, unlink } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { createWriteStream } from 'node:fs'
import path from 'node:path'
import type { Logger } from 'pino'
import {
  MamError,
  Type,
  conflict,
  defineJob,
  invalidParam,
  isInside,
  isUniqueViolation,
  iso,
  notFound,
  openInside,
  permanentError,
  resolveInside,
  uploadName,
  type EntityManager,
  type FeatureService,
  type JobService,
  type Knex,
  type StorageRegistry,
} from '../../core/index.js'
import { Project, type ProjectService } from '../projects/index.js'
import type { AssetService } from '../assets/index.js'
import { INGEST_DEFAULTS, type IngestMode } from './ingest-schemas.js'
import { packageUidOf } from './mxf.js'

const INGESTS = 'platform_library_ingests'
const FILES = 'platform_library_ingest_files'
const PARAM = 'library_ingest'

/** a scan of one ingest's folder (queued by the create and by the poller) */
export const ingestScan = defineJob('platform.library-ingest-scan', Type.Object({ ingestId: Type.Integer() }))

/** a registering claim lapses after this long: the scan that held it died */
const CLAIM_MS = 10 * 60_000
/** rows per statement when many files change at once */
const BATCH = 200
/** a watched tree is walked this deep at most (a link loop cannot exist: symlinks are not followed) */
const MAX_DEPTH = 32

/** what the ingest service needs of the assets and projects plugins, resolved when it is used */
export interface IngestTargets {
  /** the assets plugin's upload path (copy, move): all or nothing per group, quota and license checked */
  ingest: { ingest(project: Project, target: string | undefined, uploads: Array<{ tempPath: string; name: string }>, options: { userId?: number; onCommit(trx: Knex, assets: Array<{ id: number }>): Promise<void> }): Promise<unknown> }
  /** registration of files already in a project's tree (in_place) */
  assets: Pick<AssetService, 'register'>
  projects: Pick<ProjectService, 'pathOf'>
}

export interface IngestFields {
  name?: string
  storage?: string
  path?: string
  project_id?: number
  mode?: IngestMode
  stable_seconds?: number
  interval_seconds?: number
  mxf_op_atom?: boolean
  enabled?: boolean
}

type Row = Record<string, any>

interface Seen {
  path: string
  size: number
  mtime: number
}

export interface ScanResult {
  ingest_id: number
  files: number
  registered: number
  waiting: number
  failed: number
  skipped?: string
}

/**
 * Library ingests: watched folders on storages feeding library projects. A scan lists the folder
 * (polling, so network mounts work), keeps what it saw per file (size, mtime, since when), and
 * registers a file once its size and mtime stayed the same for `stable_seconds` across polls:
 * copied or moved into the project through the assets plugin's upload path (analysed and proxied
 * like an upload), or registered where it lies (`in_place`). Each file (or OP-Atom clip) is claimed
 * by a conditional UPDATE before it is registered, so two scans at once register it once; the
 * poller queues a scan per enabled ingest when due, claimed by a compare-and-set on the ingest row,
 * so two processes on one database never queue the same scan twice.
 */
export class LibraryIngestService {
  private timer?: NodeJS.Timeout
  private ticking?: Promise<void>

  constructor(
    private readonly knex: Knex,
    private readonly storages: StorageRegistry,
    private readonly jobs: JobService,
    private readonly features: FeatureService,
    private readonly targets: () => IngestTargets | undefined,
    private readonly dataDir: string,
    private readonly log: Logger,
    private readonly pollMs: () => number,
  ) {}

  // ---- CRUD -------------------------------------------------------------------------------

  list(): Knex.QueryBuilder {
    return this.knex(INGESTS).select('*')
  }

  async get(id: number): Promise<Row> {
    const row = await this.knex(INGESTS).where({ id }).first()
    if (!row) throw notFound('library ingest', id)
    return row
  }

  /** checks the input whole, writes the ingest and queues its first scan */
  async create(input: Required<Pick<IngestFields, 'name' | 'storage' | 'path' | 'project_id'>> & IngestFields, userId: number): Promise<{ ingest: Row; job: Awaited<ReturnType<JobService['enqueue']>> }> {
    const fields = { ...INGEST_DEFAULTS, ...input }
    const folder = await this.check(fields)
    const now = new Date()
    let id: number
    try {
      const [inserted] = await this.knex(INGESTS)
        .insert({
          name: fields.name,
          storage: fields.storage,
          path: folder,
          project_id: fields.project_id,
          mode: fields.mode,
          stable_seconds: fields.stable_seconds,
          interval_seconds: fields.interval_seconds,
          mxf_op_atom: fields.mxf_op_atom,
          enabled: fields.enabled,
          next_scan_at: new Date(now.getTime() + fields.interval_seconds * 1000),
          scan_claims: 0,
          created_by_id: userId,
          created_at: now,
          updated_at: now,
        })
        .returning('id')
      id = Number(typeof inserted === 'object' ? inserted.id : inserted)
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A library ingest named "${fields.name}" exists`, { errors: [{ param: `${PARAM}[name]`, message: 'is taken' }] })
      throw err
    }
    const job = await this.jobs.enqueue(ingestScan, { ingestId: id }, { userId })
    await this.knex(INGESTS).where({ id }).update({ scan_job_id: job.id })
    return { ingest: await this.get(id), job }
  }

  async update(id: number, input: IngestFields): Promise<Row> {
    const current = await this.get(id)
    const fields = { ...this.fieldsOf(current), ...input }
    const folder = await this.check(fields)
    const change: Row = { updated_at: new Date() }
    for (const key of ['name', 'storage', 'project_id', 'mode', 'stable_seconds', 'interval_seconds', 'mxf_op_atom', 'enabled'] as const) if (input[key] !== undefined) change[key] = input[key]
    if (input.path !== undefined) change.path = folder
    // another folder, project or mode: what was seen of the old folder no longer means anything
    const moved = ['storage', 'path', 'project_id', 'mode'].some((k) => change[k] !== undefined && String(change[k]) !== String(current[k]))
    if (input.interval_seconds !== undefined) change.next_scan_at = new Date(Date.now() + input.interval_seconds * 1000)
    try {
      await this.knex.transaction(async (trx) => {
        const updated = await trx(INGESTS).where({ id }).update(change)
        if (!updated) throw notFound('library ingest', id)
        if (moved) await trx(FILES).where({ ingest_id: id }).whereNot({ state: 'registering' }).delete()
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A library ingest named "${input.name}" exists`, { errors: [{ param: `${PARAM}[name]`, message: 'is taken' }] })
      throw err
    }
    return this.get(id)
  }

  /** stops watching: the row and what was seen go, the assets stay in their project */
  async remove(id: number): Promise<Row> {
    const row = await this.get(id)
    const removed = await this.knex(INGESTS).where({ id }).delete()
    if (!removed) throw notFound('library ingest', id)
    return row
  }

  filesQuery(id: number, state?: string): Knex.QueryBuilder {
    const q = this.knex(FILES).where({ ingest_id: id }).select('*')
    return state ? q.where({ state }) : q
  }

  /** counts of files by state, per ingest */
  async counts(ids: number[]): Promise<Map<number, Record<string, number>>> {
    const out = new Map<number, Record<string, number>>()
    if (!ids.length) return out
    const rows = await this.knex(FILES).whereIn('ingest_id', ids).groupBy('ingest_id', 'state').select('ingest_id', 'state').count({ n: '*' })
    for (const r of rows as Row[]) {
      const counts = out.get(Number(r.ingest_id)) ?? { waiting: 0, registering: 0, registered: 0, failed: 0 }
      counts[r.state] = Number(r.n)
      out.set(Number(r.ingest_id), counts)
    }
    return out
  }

  /** whether each ingest's folder is there now (a network mount may be away) */
  async folderExists(row: Row): Promise<boolean> {
    try {
      const dir = await resolveInside(this.storages.get(row.storage).root, row.path, 'path')
      return (await lstat(dir)).isDirectory()
    } catch {
      return false
    }
  }

  private fieldsOf(row: Row): Required<IngestFields> {
    return {
      name: row.name,
      storage: row.storage,
      path: row.path,
      project_id: Number(row.project_id),
      mode: row.mode,
      stable_seconds: Number(row.stable_seconds),
      interval_seconds: Number(row.interval_seconds),
      mxf_op_atom: Boolean(row.mxf_op_atom),
      enabled: Boolean(row.enabled),
    }
  }

  /**
   * 422 naming the parameter for anything wrong: an unknown storage, a folder that leads outside
   * it, a project that is not a library, a folder that would feed itself (copy and move into a
   * project inside the watched folder, or out of one below the project) or, in place, a folder
   * outside the project. Returns the folder, cleaned, relative to the storage.
   */
  private async check(fields: IngestFields): Promise<string> {
    const storage = this.storages.get(fields.storage!, `${PARAM}[storage]`)
    const dir = await resolveInside(storage.root, fields.path!, `${PARAM}[path]`)
    const project = await this.knex('projects').where({ id: fields.project_id, deleted: false }).first('id', 'storage', 'folder', 'is_library_project')
    if (!project) throw invalidParam(`${PARAM}[project_id]`, `is not a project (${fields.project_id})`)
    if (!project.is_library_project) throw invalidParam(`${PARAM}[project_id]`, 'is not a library project')
    const targets = this.targets()
    if (targets) {
      const projectDir = targets.projects.pathOf({ storage: project.storage, folder: project.folder })
      const inside = project.storage === fields.storage && isInside(path.resolve(projectDir), dir)
      if (fields.mode === 'in_place' && !inside) throw invalidParam(`${PARAM}[path]`, 'must lie inside the project\'s folder to register files in place')
      if (fields.mode !== 'in_place' && (inside || isInside(dir, path.resolve(projectDir))))
        throw invalidParam(`${PARAM}[path]`, `overlaps the project's folder: ${fields.mode} would feed the folder into itself`)
    }
    return path.relative(storage.root, dir).split(path.sep).join('/')
  }

  // ---- the poller -------------------------------------------------------------------------

  start(): void {
    this.timer = setInterval(() => {
      this.ticking ??= this.tick()
        .then(() => undefined)
        .catch((err) => this.log.warn({ err }, 'library ingest poll failed'))
        .finally(() => (this.ticking = undefined))
    }, this.pollMs())
    this.timer.unref()
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    await this.ticking
  }

  /**
   * Queues a scan for every enabled ingest that is due and has no scan queued or running. The
   * claim is a compare-and-set on `scan_claims`: of two processes that saw the same row, one
   * updates it, the other's UPDATE matches nothing (PostgreSQL re-checks the row it waited for).
   */
  async tick(now = new Date()): Promise<number> {
    if (!this.features.isActive('assets')) return 0
    const rows = await this.knex(INGESTS).where({ enabled: true }).select('id', 'next_scan_at', 'scan_claims', 'scan_job_id', 'interval_seconds', 'created_by_id')
    const due = rows.filter((r: Row) => time(r.next_scan_at) <= now.getTime())
    if (!due.length) return 0
    const jobIds: number[] = due.filter((r: Row) => r.scan_job_id !== null).map((r: Row) => Number(r.scan_job_id))
    const running: Row[] = jobIds.length ? await this.knex('jobs').whereIn('id', jobIds).whereIn('state', ['queued', 'running']).select('id') : []
    const busy = new Set(running.map((r) => Number(r.id)))
    let queued = 0
    for (const row of due) {
      if (row.scan_job_id !== null && busy.has(Number(row.scan_job_id))) continue
      const claimed = await this.knex(INGESTS)
        .where({ id: row.id, scan_claims: row.scan_claims })
        .update({ scan_claims: Number(row.scan_claims) + 1, next_scan_at: new Date(now.getTime() + Number(row.interval_seconds) * 1000) })
      if (!claimed) continue
      const job = await this.jobs.enqueue(ingestScan, { ingestId: Number(row.id) }, { userId: await this.userOf(row) })
      await this.knex(INGESTS).where({ id: row.id }).update({ scan_job_id: job.id })
      queued++
    }
    return queued
  }

  /** the ingest's creator while that account exists: their jobs, else nobody's */
  private async userOf(row: Row): Promise<number | undefined> {
    if (row.created_by_id === null) return undefined
    return (await this.knex('users').where({ id: row.created_by_id }).first('id')) ? Number(row.created_by_id) : undefined
  }

  // ---- the scan ---------------------------------------------------------------------------

  /**
   * Lists the folder, records what changed, and registers the files (or OP-Atom clips) that stayed
   * the same for `stable_seconds`. At least once and idempotent: files are claimed row by row, a
   * registration commits with its file's `registered` state. `now` is the scan's clock.
   */
  async scan(id: number, em: EntityManager, now = new Date(), signal?: AbortSignal): Promise<ScanResult> {
    const ingest = await this.knex(INGESTS).where({ id }).first()
    const empty = { ingest_id: id, files: 0, registered: 0, waiting: 0, failed: 0 }
    if (!ingest) return { ...empty, skipped: 'the library ingest was removed' }
    const targets = this.targets()
    if (!targets || !this.features.isActive('assets')) throw permanentError('The assets plugin is not active: library ingests register files as assets')
    let dir: string
    try {
      dir = await resolveInside(this.storages.get(ingest.storage).root, ingest.path, 'path')
      if (!(await lstat(dir)).isDirectory()) throw new Error('is not a folder')
    } catch (err) {
      const message = `The watched folder ${ingest.storage}:${ingest.path} cannot be read: ${(err as Error).message}`
      await this.knex(INGESTS).where({ id }).update({ last_scan_at: now, last_error: message })
      return { ...empty, skipped: message }
    }
    const listed = await walk(dir, signal)
    const known = new Map<string, Row>((await this.knex(FILES).where({ ingest_id: id }).select('*')).map((r: Row) => [r.path, r]))
    await this.observe(ingest, dir, listed, known, now)
    const ready = await this.readyGroups(ingest, listed, now)
    let registered = 0
    for (const group of ready) {
      if (signal?.aborted) break
      registered += await this.registerGroup(ingest, dir, group, em, targets, now)
    }
    if (ingest.mode === 'move') await this.finishMoves(id, dir)
    const counts = (await this.counts([id])).get(id) ?? { waiting: 0, registered: 0, failed: 0 }
    await this.knex(INGESTS).where({ id }).update({ last_scan_at: now, last_error: null })
    return { ingest_id: id, files: listed.length, registered, waiting: counts.waiting ?? 0, failed: counts.failed ?? 0 }
  }

  /** new files are recorded, changed ones start their stable time again, vanished ones are forgotten */
  private async observe(ingest: Row, dir: string, listed: Seen[], known: Map<string, Row>, now: Date): Promise<void> {
    const id = Number(ingest.id)
    const fresh: Row[] = []
    const changed: Array<{ row: Row; seen: Seen }> = []
    for (const seen of listed) {
      const row = known.get(seen.path)
      if (!row) fresh.push({ ingest_id: id, ...seen, group_key: await this.groupKeyOf(ingest, dir, seen), state: 'waiting', first_seen_at: now, stable_since: now, updated_at: now })
      else if (Number(row.size) !== seen.size || Number(row.mtime) !== seen.mtime) {
        // a registering claim of a scan that still runs is left to it; a lapsed one is taken back
        if (row.state === 'registering' && time(row.claimed_until) > now.getTime()) continue
        changed.push({ row, seen })
      }
    }
    for (let i = 0; i < fresh.length; i += BATCH) await this.knex(FILES).insert(fresh.slice(i, i + BATCH)).onConflict(['ingest_id', 'path']).ignore()
    for (const { row, seen } of changed)
      await this.knex(FILES)
        .where({ id: row.id, size: row.size, mtime: row.mtime })
        .update({ size: seen.size, mtime: seen.mtime, group_key: await this.groupKeyOf(ingest, dir, seen), state: 'waiting', stable_since: now, claimed_until: null, error: null, updated_at: now })
    const present = new Set(listed.map((s) => s.path))
    const vanished = [...known.values()].filter((r) => !present.has(r.path) && r.state !== 'registering').map((r) => r.id)
    for (let i = 0; i < vanished.length; i += BATCH) await this.knex(FILES).whereIn('id', vanished.slice(i, i + BATCH)).delete()
    // registering claims of scans that died are free again
    await this.knex(FILES).where({ ingest_id: id, state: 'registering' }).where('claimed_until', '<', now).update({ state: 'waiting', claimed_until: null, updated_at: now })
  }

  /**
   * OP-Atom: the MXF files of one folder that share a Material Package UID (read from their
   * headers), else a name stem (`Clip.V1.mxf`, `Clip.A1.mxf`: what comes before the first dot)
   */
  private async groupKeyOf(ingest: Row, dir: string, seen: Seen): Promise<string | null> {
    if (!ingest.mxf_op_atom || path.extname(seen.path).toLowerCase() !== '.mxf') return null
    const folder = path.posix.dirname(seen.path)
    const uid = await packageUidOf(path.join(dir, ...seen.path.split('/')))
    const stem = path.posix.basename(seen.path).split('.')[0]
    return `${folder}|${uid ? `package:${uid}` : `stem:${stem}`}`.slice(0, 300)
  }

  /** waiting files unchanged for `stable_seconds`, in groups every member of which is stable */
  private async readyGroups(ingest: Row, listed: Seen[], now: Date): Promise<Row[][]> {
    const rows: Row[] = await this.knex(FILES).where({ ingest_id: ingest.id }).whereIn('state', ['waiting', 'registering']).select('*')
    const stableMs = Number(ingest.stable_seconds) * 1000
    const present = new Set(listed.map((s) => s.path))
    const groups = new Map<string, Row[]>()
    for (const row of rows) {
      if (!present.has(row.path)) continue
      const key = row.group_key ?? `file|${row.path}`
      groups.set(key, [...(groups.get(key) ?? []), row])
    }
    return [...groups.values()].filter((members) => members.every((r) => r.state === 'waiting' && now.getTime() - time(r.stable_since) >= stableMs))
  }

  /**
   * Claims a group's rows (all or none), registers its files and marks them: in the transaction
   * that writes the assets for copy and move, after registration in place (which is idempotent by
   * path). A failure is recorded on each file of the group; the file waits for a change.
   */
  private async registerGroup(ingest: Row, dir: string, group: Row[], em: EntityManager, targets: IngestTargets, now: Date): Promise<number> {
    const ids = group.map((r) => r.id)
    const claimedUntil = new Date(Date.now() + CLAIM_MS)
    const claimed = await this.knex(FILES).whereIn('id', ids).where({ state: 'waiting' }).update({ state: 'registering', claimed_until: claimedUntil, updated_at: now })
    if (claimed !== ids.length) {
      // another scan took part of the group: give back what this one took, that scan registers it
      if (claimed) await this.knex(FILES).whereIn('id', ids).where({ state: 'registering', claimed_until: claimedUntil }).update({ state: 'waiting', claimed_until: null })
      return 0
    }
    const staged: string[] = []
    try {
      const project = await em.findOne(Project, { id: ingest.project_id, deleted: false })
      if (!project) throw new MamError('not_found', `The library project ${ingest.project_id} is gone`)
      const userId = await this.userOf(ingest)
      const mark = (trx: Knex, assetIds: number[]) =>
        Promise.all(group.map((r, i) => trx(FILES).where({ id: r.id }).update({ state: 'registered', asset_id: assetIds[i] ?? null, claimed_until: null, error: null, updated_at: new Date() })))
      if (ingest.mode === 'in_place') {
        const root = targets.projects.pathOf(project)
        const relatives = group.map((r) => path.relative(root, path.join(dir, ...r.path.split('/'))).split(path.sep).join('/'))
        const assets = await targets.assets.register(em, project, relatives, { userId, param: 'path' })
        await mark(this.knex, assets.map((a) => a.id))
        return group.length
      }
      // one folder per call: the files' folder below the watched one, mirrored in the project
      const byFolder = new Map<string, Row[]>()
      for (const r of group) byFolder.set(path.posix.dirname(r.path), [...(byFolder.get(path.posix.dirname(r.path)) ?? []), r])
      if (byFolder.size > 1) throw new Error('a group spans folders')
      const [[folder, members]] = [...byFolder.entries()]
      const uploads = []
      for (const r of members) uploads.push({ tempPath: await this.source(ingest, dir, r, staged), name: uploadName(path.posix.basename(r.path)) })
      await targets.ingest.ingest(project, folder === '.' ? undefined : folder, uploads, {
        userId,
        onCommit: async (trx, assets) => void (await mark(trx, assets.map((a) => Number(a.id)))),
      })
      if (ingest.mode === 'move') for (const r of members) await unlink(path.join(dir, ...r.path.split('/'))).catch(() => {})
      return group.length
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      this.log.warn({ err, ingest: ingest.id, files: group.map((r) => r.path) }, 'a library ingest could not register files')
      await this.knex(FILES).whereIn('id', ids).where({ state: 'registering' }).update({ state: 'failed', error: message, claimed_until: null, updated_at: new Date() })
      return 0
    } finally {
      await Promise.all(staged.map((f) => rm(f, { force: true })))
    }
  }

  /**
   * The file the upload path takes in: for `move` the watched file itself (hard-linked into the
   * project, or copied across file systems, then unlinked here); for `copy` a copy of it in the data
   * dir, so the asset never shares an inode with a file that is written again. Read through a
   * descriptor whose real path was checked: a symlink swapped in is not followed out of the storage.
   */
  private async source(ingest: Row, dir: string, row: Row, staged: string[]): Promise<string> {
    const relative = path.relative(this.storages.get(ingest.storage).root, path.join(dir, ...row.path.split('/'))).split(path.sep).join('/')
    const opened = await openInside(this.storages.get(ingest.storage).root, relative, `library ingest file ${row.path}`)
    try {
      if (ingest.mode === 'move') {
        const info = await lstat(opened.realPath)
        if (!info.isFile()) throw new Error(`${row.path} is not a regular file`)
        return opened.realPath
      }
      const stage = path.join(this.dataDir, 'tmp', 'library-ingests')
      await mkdir(stage, { recursive: true })
      const copy = path.join(stage, randomUUID())
      staged.push(copy)
      await pipeline(opened.handle.createReadStream({ autoClose: false, start: 0 }), createWriteStream(copy, { flags: 'wx' }))
      return copy
    } finally {
      await opened.close()
    }
  }

  /** a move registered but not yet unlinked (the scan died in between): the watched file goes now */
  private async finishMoves(id: number, dir: string): Promise<void> {
    const left: Row[] = await this.knex(FILES).where({ ingest_id: id, state: 'registered' }).select('id', 'path', 'size', 'mtime')
    for (const r of left) {
      const file = path.join(dir, ...r.path.split('/'))
      const info = await lstat(file).catch(() => null)
      if (info?.isFile() && info.size === Number(r.size) && Math.floor(info.mtimeMs) === Number(r.mtime)) await unlink(file).catch(() => {})
    }
  }
}

/** regular files below `dir` (hidden names and symlinks skipped), with `/` paths relative to it */
async function walk(dir: string, signal?: AbortSignal): Promise<Seen[]> {
  const out: Seen[] = []
  const visit = async (folder: string, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH || signal?.aborted) return
    const entries = await readdir(path.join(dir, folder), { withFileTypes: true }).catch(() => [])
    for (const entry of entries) {
      if (entry.name.startsWith('.')) continue
      const relative = folder ? `${folder}/${entry.name}` : entry.name
      if (entry.isDirectory()) await visit(relative, depth + 1)
      else if (entry.isFile()) {
        const info = await lstat(path.join(dir, relative)).catch(() => null)
        if (info?.isFile()) out.push({ path: relative, size: info.size, mtime: Math.floor(info.mtimeMs) })
      }
    }
  }
  await visit('', 0)
  return out
}

const time = (v: unknown): number => (v === null || v === undefined ? 0 : v instanceof Date ? v.getTime() : typeof v === 'string' && !/^\d+$/.test(v) ? Date.parse(v) : Number(v))

/** GET /library_ingests: the ingest as clients know it (wire.md), with its options and counts */
export function ingestJson(row: Row, exists: boolean, counts?: Record<string, number>) {
  return {
    id: Number(row.id),
    name: row.name,
    project_id: Number(row.project_id),
    ingest_storage: row.storage,
    ingest_path: row.path,
    'ingest_path_exists?': exists,
    options: { mode: row.mode, stable_seconds: Number(row.stable_seconds), interval_seconds: Number(row.interval_seconds), mxf_op_atom: Boolean(row.mxf_op_atom) },
    enabled: Boolean(row.enabled),
    files: { waiting: 0, registering: 0, registered: 0, failed: 0, ...counts },
    last_scan_at: iso(row.last_scan_at),
    last_error: row.last_error ?? null,
    next_scan_at: iso(row.next_scan_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  }
}

export function ingestFileJson(row: Row) {
  return {
    id: Number(row.id),
    path: row.path,
    size: Number(row.size),
    modified_at: new Date(Number(row.mtime)).toISOString(),
    state: row.state,
    asset_id: row.asset_id === null ? null : Number(row.asset_id),
    error: row.error ?? null,
    first_seen_at: iso(row.first_seen_at),
    stable_since: iso(row.stable_since),
  }
}
