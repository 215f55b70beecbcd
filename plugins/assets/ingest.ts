import { randomUUID } from 'node:crypto'
import { constants, copyFile, link, readdir, realpath, rm, stat, unlink } from 'node:fs/promises'
import path from 'node:path'
import { linkExclusive, identityOf, sameFile, invalidParam, resolveInside, type Knex, type FileIdentity, type JournalEntry, type StorageJournal, makeDirs, faultOf } from '../../core/index.js'
import { projectScope, type Project, type ProjectService } from '../projects/index.js'
import type { AssetService } from './service.js'
import { ASSET_COLUMNS, viewOfRow, type AssetView } from './asset-json.js'
import { MAX_NAME_BYTES, candidateNames } from './upload-names.js'

const INGEST_KIND = 'assets.ingest'

/** an uploaded file waiting in the upload folder, and the name the client gave it (already cleaned) */
interface Upload {
  tempPath: string
  name: string
}

interface Claimed {
  name: string
  dev: string
  ino: string
}

/** what a repair needs: where the request put its files, by which names, and whether its rows committed */
interface IngestIntent {
  projectId: number
  /** the target folder relative to the project folder ('' for its root) */
  folder: string
  /** the temporary files are `.mamkit-ingest-<token>-<i>` in that folder */
  token: string
  count: number
  /** every name claimed, with the identity of its file: only where hard links are missing (else the temporary files tell) */
  claimed?: Claimed[]
  /** the rows committed; their analysis may still have to be queued */
  assetIds?: number[]
}

const tempOf = (dir: string, token: string, i: number) => path.join(dir, `.mamkit-ingest-${token}-${i}`)
const chars = (s: string) => [...s].length
const NO_LINK = new Set(['EXDEV', 'EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EMLINK'])

/**
 * Uploads into a project folder, all or nothing per request. Each file first gets a hidden
 * temporary name in the target folder (a hard link of the upload, or a copy across file systems),
 * then claims its name with link(), which fails instead of replacing when the name is taken
 * (`clip (2).mov` …), so concurrent uploads of one name never overwrite each other. The rows, the
 * project's size and the stored answer of an Idempotency-Key commit in one transaction; the
 * temporary names go after it. A failure or a crash before the commit removes exactly the files
 * this request placed (the other names of its temporary files' inodes), never another's.
 * Resolved as `ingest`.
 */
export class Ingest {
  constructor(
    private readonly knex: Knex,
    private readonly journal: StorageJournal,
    private readonly projects: ProjectService,
    private readonly assets: AssetService,
  ) {}

  defineRepair(): void {
    this.journal.define<IngestIntent>(INGEST_KIND, (entry) => this.repair(entry))
  }

  /** `target` is the client's folder below the project (created when missing); `onCommit` runs in the transaction that writes the rows */
  async ingest(project: Project, target: string | undefined, uploads: Upload[], options: { userId?: number; onCommit(trx: Knex, assets: AssetView[]): Promise<void> }): Promise<AssetView[]> {
    // located before the scope is taken, so the entry is written once; a rename running meanwhile
    // (its row written, its folder not yet moved) makes this fail, and the scope locates it again
    let where = await this.locate(project.id, target).catch(() => null)
    const intent: IngestIntent = { projectId: project.id, folder: where?.folder ?? '', token: randomUUID(), count: uploads.length }
    // shared: uploads run side by side, but not beside a folder move or a rename of the project
    return this.journal.run(INGEST_KIND, intent, { scope: projectScope(project.id) }, async (entry) => {
      // a rename that ran while this request waited for the scope moved the folder
      if (!where || (await this.projects.currentRoot(project.id)) !== where.root) {
        where = await this.locate(project.id, target)
        await this.journal.update(entry, Object.assign(intent, { folder: where.folder }))
      }
      const { dir, folder } = where
      await makeDirs(dir)
      const temps = uploads.map((_, i) => tempOf(dir, intent.token, i))
      for (const [i, upload] of uploads.entries()) await place(upload.tempPath, temps[i])
      const taken = await this.namesTaken(project.id, folder, uploads.map((u) => u.name))
      const files: Array<FileIdentity & { name: string }> = []
      let renamed = false
      for (const [i, upload] of uploads.entries()) {
        const { name, how } = await claim(temps[i], dir, upload.name, taken)
        taken.add(name)
        renamed ||= how === 'moved'
        files.push({ ...(await identityOf(path.join(dir, name)))!, name })
      }
      // a repair finds claimed names as hard links of the temporary files; where there are none, it needs the names
      if (renamed) await this.journal.update(entry, Object.assign(intent, { claimed: files.map(({ name, dev, ino }) => ({ name, dev, ino })) }))
      const views = await this.knex.transaction(async (trx) => {
        const rows = await this.insertRows(trx, project, folder, files)
        await this.projects.chargeSpace(trx, project.id, files.reduce((n, f) => n + f.size, 0))
        await this.journal.update(entry, { ...intent, assetIds: rows.map((r) => Number(r.id)) }, trx)
        const views = rows.map((r) => viewOfRow(r, { id: project.id, name: project.name }))
        await options.onCommit(trx, views)
        return views
      })
      await Promise.all(temps.map((t) => rm(t, { force: true })))
      // Committed: the files are stored whatever follows. Should queueing their analyses or ending
      // the entry meet a full disk or the database away, the entry stays, its repair (the journal's
      // sweep once the lease lapsed) queues the analyses, and the answer says what was stored.
      try {
        await this.assets.analyseLater(views.map((v) => ({ id: v.id, project })), options.userId)
        await this.journal.end(this.knex, entry)
      } catch (err) {
        if (!faultOf(err)) throw err
      }
      return views
    })
  }

  /** the target folder below the project's folder as its row names it now: resolved, checked, and relative */
  private async locate(projectId: number, target: string | undefined) {
    const root = await this.projects.currentRoot(projectId)
    const dir = target ? await resolveInside(root, target, 'path') : root
    // an existing target must be a folder: moving uploads into a file would fail half-way (500)
    const info = await stat(dir).catch(() => null)
    if (info && !info.isDirectory()) throw invalidParam('path', 'names a file, not a folder')
    // room for the longest name (with its counter) below the folder, within PATH_MAX
    if (Buffer.byteLength(dir) + 1 + MAX_NAME_BYTES >= 4096) throw invalidParam('path', 'is too deep for file names of up to 255 bytes below it')
    return { root, dir, folder: path.relative(root, dir).split(path.sep).join('/') }
  }

  /** names in the folder that rows claim (an offline asset keeps its name until it is removed) */
  private async namesTaken(projectId: number, folder: string, names: string[]): Promise<Set<string>> {
    const bases = [...new Set(names)].map((n) => n.slice(0, n.length - path.extname(n).length))
    const rows: Array<{ name: string }> = await this.knex('assets')
      .where({ project_id: projectId, folder })
      .where((q) => {
        q.whereIn('name', names)
        for (const base of bases) q.orWhereRaw('substr(name, 1, ?) = ?', [chars(base) + 2, `${base} (`])
      })
      .select('name')
    return new Set(rows.map((r) => r.name))
  }

  private insertRows(trx: Knex, project: Project, folder: string, files: Array<FileIdentity & { name: string }>) {
    const now = new Date()
    const rows = files.map((f) => ({
      uuid: randomUUID(),
      project_id: project.id,
      path: folder ? `${folder}/${f.name}` : f.name,
      folder,
      name: f.name,
      type: 'other',
      size: f.size,
      mtime: f.mtime,
      inode: Number(f.ino),
      device: Number(f.dev),
      online: true,
      analysis_state: 'pending',
      proxy_state: 'pending',
      metadata: '{}',
      proxies: '{}',
      proxy_version: 0,
      crc32: null,
      sha256: null,
      hashed_at: null,
      created_at: now,
      updated_at: now,
    }))
    // a reindex walking the folder may have registered a claimed file already: that row is this file's
    return trx('assets')
      .insert(rows)
      .onConflict(['project_id', 'path'])
      .merge(['size', 'mtime', 'inode', 'device', 'online', 'analysis_state', 'crc32', 'sha256', 'hashed_at', 'updated_at'])
      .returning(ASSET_COLUMNS) as Promise<Array<Record<string, any>>>
  }

  /**
   * After a failure or a crash: committed rows get their analysis queued; otherwise every file this
   * request placed goes, found as the other names of its temporary files (hard links share the
   * inode) or, without hard links, by the names it recorded.
   */
  private async repair(entry: JournalEntry<IngestIntent>): Promise<void> {
    const { projectId, folder, token, count, claimed, assetIds } = entry.payload
    const project = await this.knex('projects').where({ id: projectId }).first('id', 'storage', 'folder', 'encoding_priority')
    const root = project ? await realpath(this.projects.pathOf(project as Project)).catch(() => null) : null
    if (root) {
      const dir = path.join(root, folder)
      const temps = Array.from({ length: count }, (_, i) => tempOf(dir, token, i))
      if (assetIds) {
        const owner = { id: projectId, encodingPriority: Number(project.encoding_priority) }
        await this.assets.analyseLater(assetIds.map((id) => ({ id, project: owner })))
      } else {
        const placed = claimed ?? (await Promise.all(temps.map(identityOf))).filter((id) => id !== null)
        const names = claimed ? claimed.map((c) => c.name) : await readdir(dir).catch(() => [] as string[])
        for (const name of names) {
          const file = path.join(dir, name)
          if (temps.includes(file)) continue
          const id = await identityOf(file)
          if (placed.some((p) => sameFile(id, p))) await unlink(file)
        }
      }
      await Promise.all(temps.map((t) => rm(t, { force: true })))
    }
    await this.journal.end(this.knex, entry)
  }
}

/** the upload as a hidden temporary file in the target folder: a hard link, or a copy across file systems */
async function place(upload: string, temp: string): Promise<void> {
  try {
    await link(upload, temp)
  } catch (err) {
    if (!NO_LINK.has((err as NodeJS.ErrnoException).code ?? '')) throw err
    await copyFile(upload, temp, constants.COPYFILE_EXCL)
  }
}

/** the first free name of `clip.mov`, `clip (2).mov` …, claimed for the temporary file (a hard link of it, or it renamed) */
async function claim(temp: string, dir: string, name: string, taken: Set<string>): Promise<{ name: string; how: 'linked' | 'moved' }> {
  for (const candidate of candidateNames(name)) {
    if (taken.has(candidate)) continue
    try {
      return { name: candidate, how: await linkExclusive(temp, path.join(dir, candidate)) }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
  throw new Error('unreachable: candidate names never end')
}
