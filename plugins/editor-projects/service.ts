import path from 'node:path'
import { MamError, invalidParam, isUniqueViolation, type EntityManager, type JobRow, type JobService, type Knex, type Principal } from '../../core/index.js'
import { withOriginal, type Asset, type AssetService } from '../assets/index.js'
import { READABLE_BY_USER } from '../projects/index.js'
import { ProjectFileError, UnsupportedProjectFile, assertReadable, assertSize, readProjectFile, type MediaReference, type ProjectReading, type ReadLimits } from './readers/index.js'

export const TABLE = 'editor_projects_readings'
export const READ_JOB = 'editor-projects.read'

export interface EditorProjectSettings extends ReadLimits {
  /** project files whose XML is at most this many bytes are read in the request; larger ones in a worker job */
  inlineMaxBytes: number
  /** library projects (shared media) searched besides the project file's own project */
  maxLibraryProjects: number
}

/** what a reading answers: ready with its contents, or a job that is reading it */
export type Outcome = { reading: ProjectReading } | { job: JobRow }

type Resolver = { resolve<T = any>(name: string): T }
type Row = Record<string, any>

/** compressed formats expand several times over (a Premiere project ≈ 20×); the request budget is for the XML */
const EXPANSION = { '.prproj': 20, '.drp': 10 } as Record<string, number>
const estimatedXmlBytes = (name: string, size: number) => size * (EXPANSION[path.extname(name).toLowerCase()] ?? 1)

const json = <T>(v: unknown): T => (typeof v === 'string' ? JSON.parse(v) : v) as T

/** the error a refused file answers with; `id` is the route parameter that named it */
export function problemOf(err: unknown): MamError | null {
  if (err instanceof UnsupportedProjectFile) return new MamError(err.status === 501 ? 'not_implemented' : 'unsupported_media_type', err.message)
  if (err instanceof ProjectFileError) return err.status === 413 ? new MamError('payload_too_large', err.message) : invalidParam('id', `the project file cannot be read: ${err.message}`)
  return null
}

const storedProblem = (row: Row) => (Number(row.error_status) === 413 ? new MamError('payload_too_large', row.error) : invalidParam('id', `the project file cannot be read: ${row.error}`))

/**
 * Project files stored as assets: their sequence names and the media they reference, joined with
 * the MAM's assets. A file is read once per content (size and modification time): in the request
 * when it is small, in a job (piscina worker) when it is large.
 */
export class EditorProjectService {
  constructor(
    private readonly knex: Knex,
    private readonly assets: AssetService,
    private readonly jobs: JobService,
    private readonly settings: () => EditorProjectSettings,
  ) {}

  /** the asset, readable by the principal (404 otherwise), named like a project file this server reads */
  async projectAsset(em: EntityManager, principal: Principal, id: number): Promise<Asset> {
    const { asset } = await this.assets.readable(em, principal, id)
    try {
      assertReadable(asset.name)
    } catch (err) {
      throw problemOf(err) ?? err
    }
    return asset
  }

  /**
   * The reading of the asset's current content. The original is opened through the assets
   * plugin (inside its project folder, symlinks refused) and its size and time decide whether a
   * stored reading still holds.
   */
  async read(ctx: Resolver, principal: Principal, asset: Asset): Promise<Outcome> {
    const settings = this.settings()
    return withOriginal(ctx, asset, async (original) => {
      const identity = { file_size: original.stats.size, file_mtime_ms: Math.floor(original.stats.mtimeMs) }
      for (let attempt = 0; attempt < 3; attempt++) {
        const row = await this.knex(TABLE).where({ asset_id: asset.id }).first()
        const same = row && Number(row.file_size) === identity.file_size && Number(row.file_mtime_ms) === identity.file_mtime_ms
        if (same && row.state === 'ready') return { reading: this.readingOf(row) }
        if (same && row.state === 'failed') throw storedProblem(row)
        if (same && row.state === 'pending' && row.job_id) {
          const job = await this.jobs.get(Number(row.job_id))
          if (job && (job.state === 'queued' || job.state === 'running')) return { job }
        }
        if (estimatedXmlBytes(asset.name, identity.file_size) <= settings.inlineMaxBytes) {
          const reading = await readProjectFile(original.descriptorPath, asset.name, identity.file_size, settings).catch((err) => {
            throw problemOf(err) ?? err
          })
          await this.store(asset.id, identity, { state: 'ready', format: reading.format, sequence_names: JSON.stringify(reading.sequences), media: JSON.stringify(reading.media) })
          return { reading }
        }
        // a large file: a job reads it; the request whose job claims the row wins, a second one joins it
        try {
          assertSize(asset.name, identity.file_size, settings) // refused now rather than by a job
        } catch (err) {
          throw problemOf(err) ?? err
        }
        const job = await this.jobs.enqueue(READ_JOB, { assetId: asset.id }, { userId: principal.userId, assetId: asset.id, projectId: asset.project.id })
        if (await this.claim(asset.id, row, { ...identity, job_id: job.id })) return { job }
        await this.jobs.cancel(job.id) // lost the race: the winner's job is the one to follow
      }
      throw new MamError('conflict', 'the project file changed while it was being read; try again')
    })
  }

  /** a pending row owned by `job_id`, if no one else changed the row since `seen` was read */
  private async claim(assetId: number, seen: Row | undefined, values: { file_size: number; file_mtime_ms: number; job_id: number }): Promise<boolean> {
    const now = new Date()
    const pending = { ...values, state: 'pending', format: null, sequence_names: null, media: null, error: null, error_status: null, updated_at: now }
    if (!seen) {
      try {
        await this.knex(TABLE).insert({ asset_id: assetId, ...pending, created_at: now })
        return true
      } catch (err) {
        if (isUniqueViolation(err)) return false
        throw err
      }
    }
    const changed = await this.knex(TABLE)
      .where({ id: seen.id, state: seen.state, file_size: seen.file_size, file_mtime_ms: seen.file_mtime_ms })
      .andWhere((q) => (seen.job_id == null ? q.whereNull('job_id') : q.where('job_id', seen.job_id)))
      .update(pending)
    return changed === 1
  }

  /** writes a reading (or its failure) for a content; repeated identical writes are harmless */
  async store(assetId: number, identity: { file_size: number; file_mtime_ms: number }, values: Row, onlyForJob?: number) {
    const now = new Date()
    const row = { ...identity, job_id: null, format: null, sequence_names: null, media: null, error: null, error_status: null, ...values, updated_at: now }
    if (onlyForJob !== undefined) {
      await this.knex(TABLE).where({ asset_id: assetId, job_id: onlyForJob }).update(row)
      return
    }
    await this.knex(TABLE).insert({ asset_id: assetId, ...row, created_at: now }).onConflict('asset_id').merge()
  }

  /** the row a job was queued for, when the job still owns it */
  ownedBy(assetId: number, jobId: number) {
    return this.knex(TABLE).where({ asset_id: assetId, job_id: jobId, state: 'pending' }).first()
  }

  private readingOf(row: Row): ProjectReading {
    return { format: row.format, sequences: json<string[]>(row.sequence_names) ?? [], media: json<MediaReference[]>(row.media) ?? [] }
  }

  /**
   * Joins the referenced media with assets: in the project file's own project and in library
   * projects the principal may read. First by path (the asset's project path is the end of the
   * referenced path, or the path Premiere keeps relative to the project file), then by file name
   * (and size, when the project file records one). Every lookup uses an index that starts with
   * `project_id` and is bounded by the list it looks for.
   */
  async summarize(principal: Principal, projectFile: Asset, reading: ProjectReading) {
    const projectIds = [projectFile.project.id, ...(await this.libraryProjects(principal, projectFile.project.id))]
    const candidates = reading.media.map((ref) => ({ ref, exact: this.relativeCandidate(projectFile, ref), suffixes: suffixesOf(ref.path) }))
    const byPath = new Map<string, Row[]>()
    const byName = new Map<string, Row[]>()
    const paths = [...new Set(candidates.flatMap((c) => [...(c.exact ? [c.exact] : []), ...c.suffixes]))]
    const names = [...new Set(reading.media.map((m) => m.name))]
    for (const [list, column, into] of [[paths, 'path', byPath], [names, 'name', byName]] as const) {
      for (let i = 0; i < list.length; i += 400) {
        const rows = await this.knex('assets')
          .select('id', 'project_id', 'path', 'name', 'size', 'online')
          .whereIn('project_id', projectIds)
          .whereIn(column, list.slice(i, i + 400))
          .orderBy('id')
          .limit(list.length * 4 + 100)
        for (const r of rows) into.set(r[column], [...(into.get(r[column]) ?? []), r])
      }
    }
    const own = (r: Row) => Number(r.project_id) === projectFile.project.id
    const preferOwn = (rows: Row[]) => rows.find(own) ?? rows[0]
    const supported = new Map<number, Row & { matched_by: string; referenced_path: string | null }>()
    const missing: Array<Record<string, unknown>> = []
    for (const { ref, exact, suffixes } of candidates) {
      let match: Row | undefined
      let by = 'path'
      if (exact) match = byPath.get(exact)?.find(own)
      // the longest suffix that names an asset is the most specific match
      for (const s of suffixes) {
        if (match) break
        const rows = byPath.get(s)?.filter((r) => r.path === s)
        if (rows?.length) match = preferOwn(rows)
      }
      if (!match) {
        by = ref.size == null ? 'name' : 'name_and_size'
        const rows = (byName.get(ref.name) ?? []).filter((r) => ref.size == null || Number(r.size) === ref.size)
        if (rows.length) match = preferOwn(rows)
      }
      const referenced = { name: ref.name, referenced_path: ref.path }
      if (!match) missing.push({ ...referenced, reason: 'not_found' })
      else if (!match.online) missing.push({ ...referenced, reason: 'offline', asset_id: Number(match.id) })
      else if (!supported.has(Number(match.id))) supported.set(Number(match.id), { ...match, matched_by: by, referenced_path: ref.path })
    }
    const assets = [...supported.values()].map((r) => ({
      asset_id: Number(r.id),
      project_id: Number(r.project_id),
      name: r.name,
      path: r.path,
      size: Number(r.size),
      matched_by: r.matched_by,
      referenced_path: r.referenced_path,
    }))
    const mediaSize = assets.reduce((sum, a) => sum + a.size, 0)
    return {
      asset_id: projectFile.id,
      format: reading.format,
      project_file: { asset_id: projectFile.id, name: projectFile.name, path: projectFile.path, size: Number(projectFile.size) },
      sequence_names: reading.sequences,
      referenced_count: reading.media.length,
      supported_assets: assets,
      supported_count: assets.length,
      missing_media: missing,
      missing_count: missing.length,
      media_size: mediaSize,
      total_size: mediaSize + Number(projectFile.size),
    }
  }

  /** Premiere's path relative to the project file, as a path in the project file's project (null when it leaves it) */
  private relativeCandidate(projectFile: Asset, ref: MediaReference): string | null {
    if (!ref.relativePath) return null
    const joined = path.posix.normalize(path.posix.join(projectFile.folder || '.', ref.relativePath))
    return joined.startsWith('..') || joined.startsWith('/') ? null : joined
  }

  private async libraryProjects(principal: Principal, except: number): Promise<number[]> {
    const max = this.settings().maxLibraryProjects
    if (max <= 0) return []
    const q = this.knex('projects as p').select('p.id').where({ 'p.is_library_project': true, 'p.deleted': false }).whereNot('p.id', except).orderBy('p.id').limit(max)
    if (!principal.isAdmin) q.whereRaw(READABLE_BY_USER, [principal.userId])
    return (await q).map((r: Row) => Number(r.id))
  }
}

/** the ends of a referenced path, longest first, without its volume or drive (`a/b/c.mov`, `b/c.mov`, `c.mov`) */
export function suffixesOf(p: string | null, max = 12): string[] {
  if (!p) return []
  const segments = p.split('/').filter((s) => s && s !== '.' && s !== '..')
  const out: string[] = []
  for (let k = Math.min(max, segments.length); k >= 1; k--) out.push(segments.slice(segments.length - k).join('/'))
  return out
}
