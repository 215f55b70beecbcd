import { randomBytes } from 'node:crypto'
import { lstat, mkdir, open, readdir, rm, unlink, type FileHandle } from 'node:fs/promises'
import { Readable } from 'node:stream'
import path from 'node:path'
import type { Logger } from 'pino'
import type { ProjectService } from '../projects/index.js'
import type { StrategyRow, StrategyService } from './strategies.js'
import { EARLY_SYNC_FROM, SYNCS_AT_ONCE, byKernel, copyKernel, flushed, fsyncPath, syncStarted, readAll, sameContent, sameSums, sumsOf, type Sums, type Target } from './targets/types.js'
import { projectArchived, projectUnarchived } from './events.js'
import { FileError, PAGED_BELOW, PARALLEL, copyVerified, readObject, verify, type TransmissionCheck } from './transfer.js'
import { eachLimit, retryTransient } from './concurrency.js'
import type { Copier } from './copier.js'
export { FileError, verify, type TransmissionCheck } from './transfer.js'

import { andThen, preparedReadIn, InsideRoot, MamError, conflict, isUniqueViolation, iso, linkExclusive, notFound, openInside, relativeSegments, type Knex, type MaybePromise, type Outbox, type PreparedRead, type StorageJournal } from '../../core/index.js'
/** states a running archive job moves through; the others are where it rests */
export const ACTIVE = ['queued', 'copying', 'verifying', 'releasing', 'restoring', 'moving'] as const
export type ArchiveState = (typeof ACTIVE)[number] | 'archived' | 'online' | 'failed' | 'cancelled'
export type Direction = 'archive' | 'unarchive' | 'move'

/** files per page: one batch of the target (flushed together) and one transaction for their rows */
const BATCH = 64
/**
 * The state's counts (a scan of the project's file rows) at most this often while pages go by, not
 * once per page: a page per ~50 ms of small files, and the scan grows with the project (a million
 * files make 15,625 pages). Each stage counts once more at its end.
 */
const COUNTS_EVERY_MS = 1000
const RESTORE_PREFIX = '.mamkit-restore-'

/**
 * A page's row updates in one statement instead of one per row: `set col = case id when ? then
 * cast(? as type) … end where id in (…)` (plain SQL on SQLite and PostgreSQL; the casts give
 * PostgreSQL the parameters' types), with `fixed` values alike for every row (no `types`: only
 * those), only where `where` still holds. Answers the ids updated.
 */
async function updateRows(trx: Knex, table: string, rows: Array<{ id: number; values: Record<string, unknown> }>, types: Record<string, 'bigint' | 'text' | 'timestamptz'>, fixed: Record<string, unknown>, where: Record<string, unknown>): Promise<number[]> {
  const done: number[] = []
  for (let i = 0; i < rows.length; i += 200) {
    const part = rows.slice(i, i + 200)
    const set: Record<string, unknown> = { ...fixed }
    for (const [column, type] of Object.entries(types)) {
      const bindings: Knex.RawBinding[] = []
      for (const r of part) bindings.push(r.id, (r.values[column] ?? null) as Knex.RawBinding)
      set[column] = trx.raw(`case id ${part.map(() => `when ? then cast(? as ${type})`).join(' ')} end`, bindings)
    }
    const updated: Array<{ id: number | string } | number | string> = await trx(table).whereIn('id', part.map((r) => r.id)).where(where).update(set).returning('id')
    for (const u of updated) done.push(Number(typeof u === 'object' ? u.id : u))
  }
  return done
}


export interface StateRow {
  id: number
  project_id: number
  archive_strategy_id: number | null
  next_strategy_id: number | null
  user_id: number | null
  direction: Direction
  stage: string
  state: ArchiveState
  progress: number
  error: string | null
  cancelled: boolean
  exclude_linked_files: boolean
  archive_key: string
  job_id: number | null
  files_total: number
  files_done: number
  files_failed: number
  bytes_total: number
  bytes_released: number
  started_at: Date | null
  finished_at: Date | null
  created_at: Date
  updated_at: Date
}

const bool = (v: unknown) => v === true || v === 1 || v === '1' || v === 't'
const toState = (r: any): StateRow => ({
  ...r,
  id: Number(r.id),
  project_id: Number(r.project_id),
  archive_strategy_id: r.archive_strategy_id === null ? null : Number(r.archive_strategy_id),
  next_strategy_id: r.next_strategy_id === null ? null : Number(r.next_strategy_id),
  user_id: r.user_id === null ? null : Number(r.user_id),
  cancelled: bool(r.cancelled),
  exclude_linked_files: bool(r.exclude_linked_files),
  files_total: Number(r.files_total),
  files_done: Number(r.files_done),
  files_failed: Number(r.files_failed),
  bytes_total: Number(r.bytes_total),
  bytes_released: Number(r.bytes_released),
  progress: Number(r.progress),
})

/** every regular file below `root` (hidden names skipped: proxies, trash, our own restore temporaries) */
async function* walk(root: string, rel = ''): AsyncGenerator<{ path: string; size: number; mtimeMs: number; nlink: number }> {
  const entries = await readdir(path.join(root, rel), { withFileTypes: true }).catch(() => [])
  entries.sort((a, b) => (a.name < b.name ? -1 : 1))
  for (const e of entries) {
    if (e.name.startsWith('.')) continue
    const r = rel ? `${rel}/${e.name}` : e.name
    if (e.isDirectory()) yield* walk(root, r)
    else if (e.isFile()) {
      const st = await lstat(path.join(root, r)).catch(() => null)
      if (st?.isFile()) yield { path: r, size: st.size, mtimeMs: Math.floor(st.mtimeMs), nlink: st.nlink }
    }
  }
}


/** null for a file (or folder) that is not there; any other error stays */
const unlessMissing = (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? null : Promise.reject(err))

/** a file restored under a temporary name (still open for its flush) and the name it takes */
interface Restored {
  temp: string
  file: string
  handle: FileHandle
  /** its flush, when started early (settles with its error or null) */
  synced?: Promise<unknown>
}

/** removes the restore temporaries a killed process left in the project tree (hidden names of ours only) */
async function sweepRestores(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (e.isDirectory() && !e.name.startsWith('.')) await sweepRestores(path.join(dir, e.name))
    else if (e.isFile() && e.name.startsWith(RESTORE_PREFIX)) await rm(path.join(dir, e.name), { force: true })
  }
}

export const objectKey = (archiveKey: string, rel: string) => `${archiveKey}/files/${rel}`
export const manifestKey = (archiveKey: string) => `${archiveKey}/manifest.json`

export interface RunContext {
  signal: AbortSignal
  progress(f: number): void
  log: Logger
}

/**
 * Archives, restores and moves projects (spec §4.20 archive … clear_all_archive_errors). The state
 * row (`archive_states`, one per project) and a row per file (`archive_files`) are the durable
 * record a job resumes from: a file is `pending`, `verified` once its copy on the target checked
 * out, `released` once its original is gone, `restored` when it came back. An original is only
 * ever removed when its file row is `verified` and the file on disk is still the one that was
 * copied (size and modification time), so a crash at any point leaves the copy, the original, or both.
 */
export class ArchiveService {
  /** one project (GET /projects/:id, polled) or a page of them: prepared statements, one query for the lot */
  private readonly statesOfIds: PreparedRead
  constructor(
    private readonly knex: Knex,
    private readonly strategies: StrategyService,
    private readonly projects: ProjectService,
    private readonly journal: StorageJournal,
    private readonly outbox: Outbox,
    private readonly copier: Copier,
  ) {
    this.statesOfIds = preparedReadIn(knex, (list) => `select * from archive_states where project_id in (${list})`)
  }

  async state(projectId: number): Promise<StateRow | null> {
    const r = await this.knex('archive_states').where({ project_id: projectId }).first()
    return r ? toState(r) : null
  }

  /** without a promise while SQLite's connection is free (PreparedRead.now): project JSON's decorator */
  statesOf(projectIds: number[]): MaybePromise<Map<number, StateRow>> {
    return andThen(this.statesOfIds.now(projectIds), (rows) => new Map(rows.map((r: any) => [Number(r.project_id), toState(r)])))
  }

  async errorsOf(projectId: number, limit = 100) {
    return this.knex('archive_files').where({ project_id: projectId, state: 'failed' }).orderBy('id').limit(limit).select('id', 'path', 'error')
  }

  async serialize(s: StateRow) {
    const errors = s.files_failed ? await this.errorsOf(s.project_id) : []
    return {
      id: s.id,
      project_id: s.project_id,
      archive_strategy_id: s.archive_strategy_id,
      next_strategy_id: s.next_strategy_id,
      user_id: s.user_id,
      direction: s.direction,
      stage: s.stage,
      state: s.state,
      progress: s.progress,
      error: s.error,
      errors: errors.map((e: any) => ({ file_id: Number(e.id), path: e.path, error: e.error })),
      cancelled: s.cancelled,
      exclude_linked_files: s.exclude_linked_files,
      files_total: s.files_total,
      files_done: s.files_done,
      files_failed: s.files_failed,
      bytes_total: s.bytes_total,
      bytes_released: s.bytes_released,
      job_id: s.job_id,
      started_at: iso(s.started_at),
      finished_at: iso(s.finished_at),
      created_at: iso(s.created_at),
      updated_at: iso(s.updated_at),
    }
  }

  /**
   * Claims the project's state row for a new run. Two requests that meet: one inserts (or moves a
   * resting state on with a conditional update), the other finds the row taken and gets a 409.
   */
  async begin(projectId: number, direction: Direction, from: ArchiveState[], fields: Partial<Record<string, unknown>>): Promise<StateRow> {
    const now = new Date()
    const row = {
      direction,
      stage: 'queued',
      state: 'queued',
      progress: 0,
      error: null,
      cancelled: false,
      files_done: 0,
      files_failed: 0,
      job_id: null,
      started_at: now,
      finished_at: null,
      updated_at: now,
      ...fields,
    }
    const current = await this.state(projectId)
    if (!current) {
      if (!from.includes('online')) throw conflict(`Project ${projectId} is not archived`)
      try {
        await this.knex('archive_states').insert({ project_id: projectId, archive_key: `project-${projectId}-${randomBytes(4).toString('hex')}`, exclude_linked_files: false, files_total: 0, bytes_total: 0, bytes_released: 0, created_at: now, ...row })
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`Project ${projectId} is being archived or restored by another request`)
        throw err
      }
      return (await this.state(projectId))!
    }
    const changed = await this.knex('archive_states').where({ id: current.id }).whereIn('state', from).update(row)
    if (!changed) {
      const now = (await this.state(projectId))!
      throw conflict(`Project ${projectId} is ${now.state}${ACTIVE.includes(now.state as any) ? ` (${now.direction})` : ''}; it cannot be ${direction === 'move' ? 'moved' : direction + 'd'} now`, { state: now.state, direction: now.direction })
    }
    return (await this.state(projectId))!
  }

  async setJob(stateId: number, jobId: number) {
    await this.knex('archive_states').where({ id: stateId }).update({ job_id: jobId })
  }

  private async update(id: number, fields: Record<string, unknown>) {
    await this.knex('archive_states').where({ id }).update({ ...fields, updated_at: new Date() })
  }

  /**
   * Moves a run to where it rests and publishes its event in one transaction. Only a state still
   * active moves on, so a job repeated after a crash past this commit publishes nothing twice.
   */
  private async settle(s: StateRow, event: typeof projectArchived, strategy: StrategyRow, fields: Record<string, unknown>, alsoWith?: (trx: Knex.Transaction) => Promise<unknown>) {
    await this.knex.transaction(async (trx) => {
      // counted before `alsoWith` drops the file rows: what went to the target, or came back from it
      const [counted] = await trx('archive_files').where({ project_id: s.project_id, state: event === projectArchived ? 'released' : 'restored' }).select(trx.raw('count(*) as n'), trx.raw('coalesce(sum(size), 0) as bytes'))
      await alsoWith?.(trx)
      const moved = await trx('archive_states').where({ id: s.id }).whereIn('state', ACTIVE as unknown as string[]).update({ ...fields, updated_at: new Date() })
      if (!moved) return
      const project = await trx('projects').where({ id: s.project_id }).first('name')
      const payload = {
        project_id: s.project_id,
        name: String(project?.name ?? ''),
        archive_strategy_id: Number(strategy.id),
        archive_strategy_name: String(strategy.name),
        files: Number(counted.n),
        bytes: Number(counted.bytes),
        requested_by_id: s.user_id,
      }
      await this.outbox.publish(trx, event, payload, { subjectId: s.project_id, actorId: s.user_id })
    })
  }

  /** asks a running archive to stop; the job restores what it released and removes its copies */
  async cancel(projectId: number): Promise<StateRow> {
    const changed = await this.knex('archive_states').where({ project_id: projectId }).whereIn('state', ACTIVE as unknown as string[]).update({ cancelled: true, updated_at: new Date() })
    const s = await this.state(projectId)
    if (!s) throw notFound('archive state of project', projectId)
    if (!changed) throw conflict(`Project ${projectId} is ${s.state}: nothing is running to cancel`, { state: s.state })
    return s
  }

  /** failed files back to pending (each is retried alone by the next archive run); the error goes */
  async clearErrors(projectId?: number): Promise<number> {
    return this.knex.transaction(async (trx) => {
      const q = trx('archive_files').where({ state: 'failed' })
      if (projectId !== undefined) q.andWhere({ project_id: projectId })
      const n = await q.update({ state: 'pending', error: null, updated_at: new Date() })
      const s = trx('archive_states').whereNot('state', 'queued')
      if (projectId !== undefined) s.andWhere({ project_id: projectId })
      await s.update({ error: null, files_failed: 0, updated_at: new Date() })
      return Number(n)
    })
  }

  // ---- the job ---------------------------------------------------------------------------------

  /** one run of the project's archive job; idempotent, resumable after a crash */
  async run(projectId: number, ctx: RunContext): Promise<Record<string, unknown>> {
    const s = await this.state(projectId)
    if (!s || !ACTIVE.includes(s.state as any)) return { skipped: s?.state ?? 'none' }
    // moves and renames of the project wait (and answer 409) while its files are copied and released
    return this.journal.hold(`project:${projectId}`, {}, async () => {
      try {
        if (s.cancelled) return await this.cancelRun(s, ctx)
        if (s.direction === 'archive') return await this.archive(s, ctx)
        if (s.direction === 'unarchive') return await this.unarchive(s, ctx)
        return await this.move(s, ctx)
      } catch (err) {
        if (ctx.signal.aborted) throw err
        const permanent = err instanceof MamError || (err as any)?.permanent
        if (permanent) await this.update(s.id, { state: 'failed', error: (err as Error).message, finished_at: new Date() })
        throw err
      }
    })
  }

  private async strategy(id: number | null): Promise<StrategyRow> {
    if (id === null) throw Object.assign(new MamError('conflict', 'The strategy of this archive was deleted'), { permanent: true })
    const row = await this.knex('strategies').where({ id }).first('id')
    if (!row) throw Object.assign(new MamError('conflict', `Archive strategy ${id} no longer exists`), { permanent: true })
    return this.strategies.get('archive', id)
  }

  private async cancelledNow(id: number): Promise<boolean> {
    const r = await this.knex('archive_states').where({ id }).first('cancelled')
    return bool(r?.cancelled)
  }

  /** lists the project's files once (a rerun keeps the list and what was done) */
  private async listFiles(s: StateRow, strategy: StrategyRow, root: string) {
    const listed = await this.knex('archive_files').where({ project_id: s.project_id }).first('id')
    if (listed) return
    const includes = strategy.includes
    let walked: Array<{ path: string; size: number; mtimeMs: number; nlink: number }> = []
    let total = 0
    let bytes = 0
    const now = new Date()
    // 500 files at a time with their assets' rows (a project of a million files is never all in memory)
    const flush = async () => {
      if (!walked.length) return
      const assets = new Map<string, { id: number; sha256: string | null; crc32: string | null; size: number; mtime: number | null }>()
      for (const a of await this.knex('assets').where({ project_id: s.project_id }).whereIn('path', walked.map((f) => f.path)).select('id', 'path', 'sha256', 'crc32', 'size', 'mtime'))
        assets.set(a.path, { id: Number(a.id), sha256: a.sha256, crc32: a.crc32, size: Number(a.size), mtime: a.mtime ? new Date(a.mtime).getTime() : null })
      const rows = walked.map((f) => {
        const a = assets.get(f.path)
        // a hard link shares its bytes with another name (often another project): releasing this name frees nothing
        const excluded = s.exclude_linked_files && f.nlink > 1
        // the assets plugin's checksums serve when they describe this very content (same size and time)
        const known = a && a.sha256 && a.crc32 && a.size === f.size && a.mtime === f.mtimeMs
        if (!excluded) {
          total++
          bytes += f.size
        }
        return { project_id: s.project_id, asset_id: a?.id ?? null, path: f.path, size: f.size, mtime_ms: f.mtimeMs, sha256: known ? a.sha256 : null, crc32: known ? a.crc32 : null, state: excluded ? 'excluded' : 'pending', created_at: now, updated_at: now }
      })
      await this.knex('archive_files').insert(rows)
      walked = []
    }
    for await (const f of walk(root)) {
      if (includes.length && !includes.some((inc) => f.path === inc || f.path.startsWith(`${inc}/`))) continue
      walked.push(f)
      if (walked.length >= 500) await flush()
    }
    await flush()
    await this.update(s.id, { files_total: total, bytes_total: bytes })
  }

  private async archive(s: StateRow, ctx: RunContext) {
    const strategy = await this.strategy(s.archive_strategy_id)
    const target = await this.strategies.targetOf(strategy)
    try {
      const root = await this.projects.currentRoot(s.project_id)
      await this.update(s.id, { stage: 'copying', state: 'copying' })
      await target.sweep(s.archive_key)
      await this.listFiles(s, strategy, root)
      const check = strategy.transmission_check as TransmissionCheck
      const paced = this.pacedCounts(s, ctx, 0.9)
      // a page at a time: copied a few at once in one pass each, made durable together, verified, recorded in one transaction
      for (let lastId = 0; ; ) {
        if (await this.cancelledNow(s.id)) return this.cancelRun((await this.state(s.project_id))!, ctx)
        const page = await this.knex('archive_files').where({ project_id: s.project_id, state: 'pending' }).andWhere('id', '>', lastId).orderBy('id').limit(BATCH)
        if (!page.length) break
        lastId = Number(page[page.length - 1].id)
        const outcomes = await copyVerified(
          target,
          page.map((f: any) => ({
            item: f,
            root,
            path: f.path,
            key: objectKey(s.archive_key, f.path),
            known: f.sha256 && f.crc32 ? { sums: { size: Number(f.size), sha256: f.sha256, crc32: f.crc32 }, size: Number(f.size), mtimeMs: Number(f.mtime_ms) } : null,
            size: Number(f.size),
          })),
          { check, signal: ctx.signal, reuse: true, copy: this.copier.copy, compare: this.copier.compare, copyPage: this.copier.copyPage, onRetry: (err, what) => ctx.log.warn({ err }, `${what}: the target failed for now; retrying`) },
        )
        const now = new Date()
        await this.knex.transaction(async (trx) => {
          for (const o of outcomes) if (o.error) await trx('archive_files').where({ id: o.item.id }).update({ state: 'failed', error: o.error.message, updated_at: now })
          // what was copied: the release later requires the original to still have this size and time (one statement for the page)
          const verified = outcomes.flatMap((o) => (o.error ? [] : [{ id: Number(o.item.id), values: { size: o.sums.size, mtime_ms: o.mtimeMs, sha256: o.sums.sha256, crc32: o.sums.crc32 } }]))
          await updateRows(trx, 'archive_files', verified, { size: 'bigint', mtime_ms: 'bigint', sha256: 'text', crc32: 'text' }, { state: 'verified', error: null, updated_at: now }, { state: 'pending' })
        })
        await paced()
      }
      const failed = await this.counts(s, ctx, 0.9)
      if (failed) {
        // nothing is released while any file lacks a verified copy: the project stays whole online
        await this.update(s.id, { state: 'failed', stage: 'copying', error: `${failed} file(s) could not be archived; clear the errors to retry them`, finished_at: new Date() })
        return { failed }
      }
      await this.update(s.id, { stage: 'verifying', state: 'verifying' })
      await this.writeManifest(target, s, check, ctx.signal)
      if (await this.cancelledNow(s.id)) return this.cancelRun((await this.state(s.project_id))!, ctx)
      await this.update(s.id, { stage: 'releasing', state: 'releasing' })
      const released = await this.release(s, root, ctx)
      if (released === 'cancelled') return this.cancelRun((await this.state(s.project_id))!, ctx)
      await this.settle(s, projectArchived, strategy, { state: 'archived', stage: 'archived', progress: 1, finished_at: new Date(), error: null })
      return { released }
    } finally {
      await target.close()
    }
  }

  /** the manifest: every file with its checksums, so an archive can be restored and checked without this database */
  private async writeManifest(target: Target, s: StateRow, check: TransmissionCheck, signal: AbortSignal) {
    const files = await this.knex('archive_files').where({ project_id: s.project_id }).whereIn('state', ['verified', 'released']).orderBy('path').select('path', 'size', 'sha256', 'crc32')
    const project = await this.knex('projects').where({ id: s.project_id }).first('id', 'uuid', 'name')
    const body = Buffer.from(JSON.stringify({ format: 'mamkit-archive/1', project: { id: Number(project.id), uuid: project.uuid, name: project.name }, created_at: new Date().toISOString(), files: files.map((f: any) => ({ path: f.path, size: Number(f.size), sha256: f.sha256, crc32: f.crc32 })) }, null, 1))
    const sums = await sumsOf(Readable.from([body]))
    const key = manifestKey(s.archive_key)
    await target.put(key, Readable.from([body]), sums, signal)
    await verify(target, key, sums, check, signal)
  }

  /**
   * Removes the originals whose copies were verified, a page at a time: the files go, then in one
   * transaction their rows, the assets' `online` and the project's size. A crash in between finds
   * a file gone and its row still `verified`, and finishes the bookkeeping.
   */
  private async release(s: StateRow, root: string, ctx: RunContext): Promise<number | 'cancelled'> {
    let released = 0
    for (let lastId = 0; ; ) {
      if (await this.cancelledNow(s.id)) return 'cancelled'
      const page = await this.knex('archive_files').where({ project_id: s.project_id, state: 'verified' }).andWhere('id', '>', lastId).orderBy('id').limit(BATCH)
      if (!page.length) break
      lastId = Number(page[page.length - 1].id)
      const gone: any[] = []
      const kept: any[] = []
      // the name itself (lstat, unlink: never followed) in its folder, resolved and checked inside the root once per page
      const inside = await InsideRoot.of(root)
      const rest = await this.releasePaged(inside, page, gone, kept)
      await eachLimit(rest, PARALLEL, async (f: any) => {
        const file = await inside.pathOf(f.path, `file ${f.path}`).catch(unlessMissing)
        const stats = file && (await lstat(file).catch(unlessMissing))
        if (file && stats) {
          // written to (or replaced by other than a plain file) since its copy was verified: the copy is not this file; it stays online
          if (!stats.isFile() || stats.size !== Number(f.size) || Math.floor(stats.mtimeMs) !== Number(f.mtime_ms)) return void kept.push(f)
          await unlink(file)
        }
        gone.push(f)
      })
      const now = new Date()
      await this.knex.transaction(async (trx) => {
        for (const f of kept) await trx('archive_files').where({ id: f.id }).update({ state: 'failed', error: `${f.path} changed after it was copied; it stays online`, updated_at: now })
        let bytes = 0
        const assets: number[] = []
        const byId = new Map(gone.map((f) => [Number(f.id), f]))
        for (const id of await updateRows(trx, 'archive_files', [...byId.keys()].map((id) => ({ id, values: {} })), {}, { state: 'released', updated_at: now }, { state: 'verified' })) {
          const f = byId.get(id)!
          bytes += Number(f.size)
          if (f.asset_id !== null) assets.push(Number(f.asset_id))
          released++
        }
        for (let i = 0; i < assets.length; i += 500) await trx('assets').whereIn('id', assets.slice(i, i + 500)).update({ online: false, updated_at: now })
        if (!bytes) return
        await trx('projects').where({ id: s.project_id }).update({ size: trx.raw('case when size > ? then size - ? else 0 end', [bytes, bytes]), updated_at: now })
        await trx('archive_states').where({ id: s.id }).update({ bytes_released: trx.raw('bytes_released + ?', [bytes]) })
      })
      ctx.progress(0.9 + 0.1 * Math.min(1, released / Math.max(1, s.files_total)))
    }
    await this.projects.refreshTeamSpace(s.project_id)
    const failed = await this.counts(s, ctx, 1)
    if (failed) await this.update(s.id, { error: `${failed} file(s) changed after they were copied and stayed online` })
    return released
  }

  /**
   * The release of a page's originals in one worker task (Copier.removePage: lstat, compare, unlink
   * each name through its checked folder): removed or missing ones go to `gone`, changed ones to
   * `kept`; those it could not decide on (a folder that cannot be resolved, another error) are
   * handed back for the per-file way, which meets the error again as before.
   */
  private async releasePaged(inside: InsideRoot, page: any[], gone: any[], kept: any[]): Promise<any[]> {
    const removePage = this.copier.removePage
    if (!removePage) return page
    const rest: any[] = []
    const named: Array<{ f: any; file: string }> = []
    for (const f of page) {
      const file = await inside.pathOf(f.path, `file ${f.path}`).catch(() => null)
      if (file === null) rest.push(f)
      else named.push({ f, file })
    }
    const removals = await removePage(named.map(({ f, file }) => ({ path: file, size: Number(f.size), mtimeMs: Number(f.mtime_ms) })))
    named.forEach(({ f }, i) => {
      if (removals[i] === 'changed') kept.push(f)
      else if (removals[i] === 'failed') rest.push(f)
      else gone.push(f)
    })
    return rest
  }

  /** `counts` for a loop of pages: at most once per COUNTS_EVERY_MS */
  private pacedCounts(s: StateRow, ctx: RunContext, scale: number): () => Promise<void> {
    let last = 0
    return async () => {
      if (performance.now() - last < COUNTS_EVERY_MS) return
      last = performance.now()
      await this.counts(s, ctx, scale)
    }
  }

  private async counts(s: StateRow, ctx: RunContext, scale: number): Promise<number> {
    const rows = await this.knex('archive_files').where({ project_id: s.project_id }).groupBy('state').select('state', this.knex.raw('count(*) as n'))
    const by = Object.fromEntries(rows.map((r: any) => [r.state, Number(r.n)]))
    const done = (by.verified ?? 0) + (by.released ?? 0) + (by.restored ?? 0)
    const failed = by.failed ?? 0
    const total = Object.entries(by).filter(([k]) => k !== 'excluded').reduce((n, [, v]) => n + Number(v), 0)
    const progress = total ? (scale * (done + failed)) / total : scale
    await this.update(s.id, { files_done: done, files_failed: failed, progress })
    ctx.progress(progress)
    return failed
  }

  /**
   * Brings released files back, a page at a time: each is written under a hidden temporary name
   * beside its place, hashed while it is written and compared with the checksums taken when it was
   * archived (a few at once); the page's temporaries are then flushed together, each linked to its
   * name (never over a file someone put there meanwhile), the directories flushed once, and the
   * rows follow in one transaction.
   */
  private async restoreFiles(s: StateRow, target: Target, root: string, ctx: RunContext, stopOnCancel: boolean): Promise<{ restored: number; failed: number }> {
    await sweepRestores(root)
    const paced = this.pacedCounts(s, ctx, 1)
    let restored = 0
    let failed = 0
    for (let lastId = 0; ; ) {
      if (stopOnCancel && (await this.cancelledNow(s.id))) break
      const page = await this.knex('archive_files').where({ project_id: s.project_id, state: 'released' }).andWhere('id', '>', lastId).orderBy('id').limit(BATCH)
      if (!page.length) break
      lastId = Number(page[page.length - 1].id)
      const staged: Array<Restored & { f: any }> = []
      const errors = new Map<number, string>()
      const back: Array<{ f: any; mtimeMs: number }> = []
      const made = new Set<string>()
      try {
        const rest = await this.restorePaged(s, target, root, page, made, back, ctx.signal)
        await eachLimit(rest, PARALLEL, async (f: any) => {
          try {
            const restored = await retryTransient(() => this.fetchRestore(s, target, root, f, ctx.signal, made), { signal: ctx.signal, onRetry: (err) => ctx.log.warn({ err }, `restore of ${f.path}: the target failed for now; retrying`) })
            // a large file's flush starts as soon as it checked out: the device writes it while the page's other files are copied and hashed
            staged.push({ f, ...restored, synced: Number(f.size) >= EARLY_SYNC_FROM ? syncStarted(restored.handle) : undefined })
          } catch (err) {
            if (ctx.signal.aborted) throw err
            errors.set(Number(f.id), (err as Error).message)
          }
        })
        const dirs = new Set<string>()
        // each file's bytes reach the device before its name points at them (a large file's flush
        // started when it checked out), a few files at once
        await eachLimit(staged, SYNCS_AT_ONCE, async ({ f, temp, file, handle, synced }) => {
          await flushed(handle, synced)
          await handle.close()
          try {
            await this.linkRestored(root, f, temp, file)
            dirs.add(path.dirname(file))
            back.push({ f, mtimeMs: (await lstat(file)).mtimeMs })
          } catch (err) {
            errors.set(Number(f.id), (err as Error).message)
          }
        })
        for (const dir of dirs) await fsyncPath(dir, 'r')
      } finally {
        await eachLimit(staged, SYNCS_AT_ONCE, async ({ temp, handle, synced }) => {
          await synced
          await handle.close().catch(() => {})
          // the temporary's name (linked, or failed): one unlink (rm's lstat first is a second call per file)
          await unlink(temp).catch((err) => (err.code === 'ENOENT' ? undefined : rm(temp, { force: true })))
        })
      }
      const now = new Date()
      await this.knex.transaction(async (trx) => {
        for (const [id, error] of errors) await trx('archive_files').where({ id }).update({ error, updated_at: now })
        let bytes = 0
        const byId = new Map(back.map((b) => [Number(b.f.id), b]))
        const assets: Array<{ id: number; values: Record<string, unknown> }> = []
        for (const id of await updateRows(trx, 'archive_files', [...byId.keys()].map((id) => ({ id, values: {} })), {}, { state: 'restored', error: null, updated_at: now }, { state: 'released' })) {
          const { f, mtimeMs } = byId.get(id)!
          if (f.asset_id !== null) assets.push({ id: Number(f.asset_id), values: { mtime: new Date(Math.floor(mtimeMs)) } })
          bytes += Number(f.size)
        }
        // the assets online again with their files' new modification times: one statement for the page
        await updateRows(trx, 'assets', assets, { mtime: 'timestamptz' }, { online: true, updated_at: now }, {})
        if (!bytes) return
        await trx('projects').where({ id: s.project_id }).update({ size: trx.raw('size + ?', [bytes]), updated_at: now })
        await trx('archive_states').where({ id: s.id }).update({ bytes_released: trx.raw('case when bytes_released > ? then bytes_released - ? else 0 end', [bytes, bytes]) })
      })
      restored += back.length
      failed += errors.size
      await paced()
    }
    await this.counts(s, ctx, 1)
    await this.projects.refreshTeamSpace(s.project_id)
    return { restored, failed }
  }

  /**
   * The page's small files (below PAGED_BELOW) restored in one worker task of a disk target
   * (Target.fetchPage): each object copied to its temporary, hashed and checked against the archived
   * checksums, flushed and linked to its name (never over a file), its folder flushed; those come
   * back in `back`. The others are answered for fetchRestore's path, which meets whatever stopped
   * them (a mismatch, a file under the name, a missing object) again and records it as before.
   */
  private async restorePaged(s: StateRow, target: Target, root: string, page: any[], made: Set<string>, back: Array<{ f: any; mtimeMs: number }>, signal: AbortSignal): Promise<any[]> {
    const copyPage = this.copier.copyPage
    if (!copyPage || !target.fetchPage) return page
    const rest: any[] = []
    const small: Array<{ f: any; key: string; temp: string; to: string; expected: Sums }> = []
    for (const f of page) {
      const place = Number(f.size) < PAGED_BELOW ? await this.restorePlace(root, f, made).catch(() => null) : null
      if (place) small.push({ f, key: objectKey(s.archive_key, f.path), temp: place.temp, to: place.file, expected: { size: Number(f.size), sha256: f.sha256, crc32: f.crc32 } })
      else rest.push(f)
    }
    if (!small.length) return rest
    const outcomes = await target.fetchPage(small, copyPage, signal)
    signal.throwIfAborted()
    small.forEach(({ f }, i) => {
      const o = outcomes[i]
      if (o.copied) back.push({ f, mtimeMs: o.placedMtimeMs! })
      else rest.push(f)
    })
    return rest
  }

  /** where a restored file goes and its temporary beside it; a page's files mostly share a few folders: each made once per page (`made`) */
  private async restorePlace(root: string, f: any, made: Set<string>): Promise<{ file: string; temp: string }> {
    const file = path.join(root, ...relativeSegments(f.path, 'path'))
    const dir = path.dirname(file)
    if (!made.has(dir)) {
      await mkdir(dir, { recursive: true })
      made.add(dir)
    }
    return { file, temp: path.join(dir, `${RESTORE_PREFIX}${randomBytes(6).toString('hex')}`) }
  }

  /** the archived copy of one file into a temporary beside its place (left open for the page's fsync), hashed on the way and checked */
  private async fetchRestore(s: StateRow, target: Target, root: string, f: any, signal: AbortSignal, made = new Set<string>()): Promise<Restored> {
    const { file, temp } = await this.restorePlace(root, f, made)
    const want: Sums = { size: Number(f.size), sha256: f.sha256, crc32: f.crc32 }
    const key = objectKey(s.archive_key, f.path)
    if (target.open && byKernel(want.size)) return this.fetchRestoreByKernel(target, key, f, want, file, temp, signal)
    const handle = await open(temp, 'wx')
    try {
      // a disk target's object by descriptor: copied and hashed in one pass off the event loop
      const got = await readObject(target, objectKey(s.archive_key, f.path), handle, Number(f.size), this.copier.copy, signal)
      if (!sameSums(got, want)) throw new FileError(`the archived copy of ${f.path} hashes to ${got.sha256} (${got.size} bytes), not to ${want.sha256} (${want.size} bytes) as archived; the file stays archived`)
      return { temp, file, handle }
    } catch (err) {
      await handle.close()
      await rm(temp, { force: true })
      throw err
    }
  }

  /**
   * fetchRestore from a disk target: the kernel copies the object into the temporary (no hash on the
   * way, no user-space buffer), then the temporary is read back and hashed (SHA-256, in a worker
   * thread from 1 MiB) against the archived checksums: what is linked into the project is what was
   * hashed. The temporary is left open (read only) for the page's fsync.
   */
  private async fetchRestoreByKernel(target: Target, key: string, f: any, want: Sums, file: string, temp: string, signal: AbortSignal): Promise<Restored> {
    signal.throwIfAborted()
    const from = await target.open!(key)
    let handle: FileHandle | undefined
    try {
      await copyKernel(from, temp)
      handle = await open(temp, 'r')
      const got = await this.copier.copy(handle, null, want.size, signal, true)
      if (!sameContent(got, want)) throw new FileError(`the archived copy of ${f.path} hashes to ${got.sha256} (${got.size} bytes), not to ${want.sha256} (${want.size} bytes) as archived; the file stays archived`)
      return { temp, file, handle }
    } catch (err) {
      await handle?.close().catch(() => {})
      await rm(temp, { force: true })
      throw err
    } finally {
      await from.close()
    }
  }

  /** a restored temporary takes its name; an existing file counts as restored only with the same bytes */
  private async linkRestored(root: string, f: any, temp: string, file: string): Promise<void> {
    try {
      await linkExclusive(temp, file)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      // a crash after the link, or someone's file under that name: only the same bytes count as restored
      const want: Sums = { size: Number(f.size), sha256: f.sha256, crc32: f.crc32 }
      const existing = await openInside(root, f.path, `file ${f.path}`)
      const same = await sumsOf(readAll(existing.handle)).finally(() => existing.close())
      if (!sameSums(same, want)) throw new FileError(`${f.path} exists again online with other contents; the archived file was not restored over it`)
    }
  }

  private async unarchive(s: StateRow, ctx: RunContext) {
    const strategy = await this.strategy(s.archive_strategy_id)
    const target = await this.strategies.targetOf(strategy)
    try {
      const root = await this.projects.currentRoot(s.project_id)
      await this.update(s.id, { stage: 'restoring', state: 'restoring' })
      const { restored, failed } = await this.restoreFiles(s, target, root, ctx, true)
      if (await this.cancelledNow(s.id)) {
        await this.update(s.id, { state: 'cancelled', stage: 'cancelled', finished_at: new Date() })
        return { restored, cancelled: true }
      }
      if (failed) {
        await this.update(s.id, { state: 'failed', error: `${failed} file(s) could not be restored; they stay archived`, finished_at: new Date() })
        return { restored, failed }
      }
      // all back: the file rows go (the next archive lists the project anew); the copy stays on the target
      await this.settle(s, projectUnarchived, strategy, { state: 'online', stage: 'online', progress: 1, files_failed: 0, bytes_released: 0, finished_at: new Date() }, (trx) => trx('archive_files').where({ project_id: s.project_id }).delete())
      return { restored }
    } finally {
      await target.close()
    }
  }

  /**
   * Stops an archive: whatever was released comes back first (verified like an unarchive), then the
   * copies made so far are removed from the target, and the project is whole online again.
   */
  private async cancelRun(s: StateRow, ctx: RunContext) {
    if (s.direction === 'unarchive') {
      await this.update(s.id, { state: 'cancelled', stage: 'cancelled', finished_at: new Date() })
      return { cancelled: true }
    }
    const strategy = await this.strategy(s.direction === 'move' ? s.next_strategy_id : s.archive_strategy_id)
    const target = await this.strategies.targetOf(strategy)
    try {
      if (s.direction === 'move') {
        // the old archive is untouched until a move completes: drop the partial new copy
        await target.deletePrefix(s.archive_key + '-moving')
        await this.update(s.id, { state: 'archived', stage: 'archived', next_strategy_id: null, cancelled: false, finished_at: new Date(), error: 'move cancelled; the archive stays where it was' })
        return { cancelled: true }
      }
      const root = await this.projects.currentRoot(s.project_id)
      const { failed } = await this.restoreFiles(s, target, root, ctx, false)
      if (failed) {
        await this.update(s.id, { state: 'failed', error: `cancelled, but ${failed} released file(s) could not be restored; they stay archived` })
        return { failed }
      }
      await target.deletePrefix(s.archive_key)
      await this.knex.transaction(async (trx) => {
        await trx('archive_files').where({ project_id: s.project_id }).delete()
        await trx('archive_states').where({ id: s.id }).update({ state: 'cancelled', stage: 'cancelled', files_done: 0, files_failed: 0, bytes_released: 0, finished_at: new Date(), updated_at: new Date() })
      })
      return { cancelled: true }
    } finally {
      await target.close()
    }
  }

  /** moves an archive to another strategy's target: copy, verify, switch, then delete the old copies */
  private async move(s: StateRow, ctx: RunContext) {
    const from = await this.strategy(s.archive_strategy_id)
    const to = await this.strategy(s.next_strategy_id)
    const source = await this.strategies.targetOf(from)
    const dest = await this.strategies.targetOf(to)
    const newKey = `${s.archive_key}-moving`
    try {
      await this.update(s.id, { stage: 'moving', state: 'moving' })
      await dest.sweep(newKey)
      let done = 0
      const check = to.transmission_check as TransmissionCheck
      const retry = (what: string, fn: () => Promise<void>) => retryTransient(fn, { signal: ctx.signal, onRetry: (err) => ctx.log.warn({ err }, `${what}: the target failed for now; retrying`) })
      // a page at a time (a large archive's rows are never all in memory), a few files at once
      for (let lastId = 0; ; ) {
        if (await this.cancelledNow(s.id)) return this.cancelRun((await this.state(s.project_id))!, ctx)
        const page = await this.knex('archive_files').where({ project_id: s.project_id, state: 'released' }).andWhere('id', '>', lastId).orderBy('id').limit(BATCH).select('id', 'path', 'size', 'sha256', 'crc32')
        if (!page.length) break
        lastId = Number(page[page.length - 1].id)
        await eachLimit(page, PARALLEL, (f: any) =>
          retry(`move of ${f.path}`, async () => {
            const sums: Sums = { size: Number(f.size), sha256: f.sha256, crc32: f.crc32 }
            const key = objectKey(newKey, f.path)
            const there = await dest.head(key)
            if (there && (await verify(dest, key, sums, check, ctx.signal, this.copier.copy).then(() => true, () => false))) return
            const sent = await dest.put(key, await source.get(objectKey(s.archive_key, f.path), ctx.signal), sums, ctx.signal)
            if (!sameSums(sent, sums)) throw Object.assign(new MamError('conflict', `the archived copy of ${f.path} does not match its checksums; the archive was not moved`), { permanent: true })
            await verify(dest, key, sums, check, ctx.signal, this.copier.copy)
          }),
        )
        done += page.length
        ctx.progress(done / Math.max(1, s.files_total))
      }
      await this.writeManifest(dest, { ...s, archive_key: newKey }, check, ctx.signal)
      // the switch is one statement; a crash after it finds the old prefix to delete on the next run
      await this.update(s.id, { archive_strategy_id: to.id, next_strategy_id: null, archive_key: newKey, state: 'archived', stage: 'archived', progress: 1, finished_at: new Date(), error: null })
      await source.deletePrefix(s.archive_key).catch((err) => ctx.log.warn({ err }, 'old archive copies left behind after a move'))
      return { moved: done }
    } finally {
      await source.close()
      await dest.close()
    }
  }
}
