import { stat } from 'node:fs/promises'
import path from 'node:path'
import { relativeSegments, resolveInside, invalidParam, notFound, type EntityManager, type Principal, type JobService } from '../../core/index.js'
import type { Project, ProjectService } from '../projects/index.js'
import type { Right } from '../identity/index.js'
import { Asset } from './entities.js'
import { folderOf } from './files.js'
import { ASSET_COLUMNS, serializeAsset, viewOfRow, type AssetView } from './asset-json.js'
import { andThen, preparedRead, type MaybePromise, type PreparedRead, type Knex } from '../../core/index.js'
import { READABLE_BY_USER } from '../projects/index.js'

const REGISTER_BATCH = 250

/** what an asset job needs to know of its asset */
export type JobAsset = { id: number; project: Pick<Project, 'id' | 'encodingPriority'> }

/** a job about one asset: its project's id and encoding priority go with it (status routes, claim order) */
export const assetJob = (type: string, asset: JobAsset, userId?: number | null) => ({
  type,
  payload: { assetId: asset.id },
  options: { userId: userId ?? null, projectId: asset.project.id, assetId: asset.id, priority: asset.project.encodingPriority },
})

/** a client path relative to a project, cleaned: `a//b/./c` → `a/b/c` */
export const cleanRelative = (input: string, param: string) => relativeSegments(input, param).join('/')

/**
 * Assets: files of a project tree as database rows. Registration is idempotent (the path is the
 * key), and every new or changed file gets an analysis job. Resolved as `assets`.
 */
export class AssetService {
  private showStatements?: { admin: PreparedRead; user: PreparedRead }

  constructor(
    private readonly projects: ProjectService,
    private readonly jobs: JobService,
    private readonly knex: Knex,
  ) {}

  /**
   * The asset as `GET /assets/:id` shows it: one prepared statement reads the asset with its
   * project's id and name and checks the principal's right on the project in the same query
   * (404 as `readable`: no asset, a deleted project, or no right).
   */
  readableView(principal: Principal, id: number): MaybePromise<AssetView> {
    const base = `select ${ASSET_COLUMNS.map((c) => `a.${c}`).join(', ')}, p.name as project_name from assets a join projects p on p.id = a.project_id where a.id = ? and p.deleted = false`
    this.showStatements ??= { admin: preparedRead(this.knex, base), user: preparedRead(this.knex, `${base} and ${READABLE_BY_USER}`) }
    const rows = principal.isAdmin ? this.showStatements.admin.now([id]) : this.showStatements.user.now([id, principal.userId])
    return andThen(rows, ([r]) => {
      if (!r) throw notFound('asset', id)
      return viewOfRow(r, { id: Number(r.project_id), name: r.project_name })
    })
  }

  /** an asset of a project the user can read (404 otherwise) */
  async readable(em: EntityManager, principal: Principal, id: number): Promise<{ asset: Asset; right: Right }> {
    const asset = await em.findOne(Asset, id, { populate: ['project'] })
    if (!asset || asset.project.deleted) throw notFound('asset', id)
    const { right } = await this.projects.readable(em, principal, asset.project.id).catch(() => {
      throw notFound('asset', id)
    })
    return { asset, right }
  }

  /** an asset the user may change: write right on its project, project not frozen */
  async writable(em: EntityManager, principal: Principal, id: number): Promise<Asset> {
    const { asset } = await this.readable(em, principal, id)
    await this.projects.writable(em, principal, asset.project.id)
    return asset
  }

  fileOf(asset: Asset): string {
    return path.join(this.projects.pathOf(asset.project), ...asset.path.split('/'))
  }

  /**
   * Adds or refreshes the rows for files already in the tree. New files and files whose size or
   * modification time changed are (re-)analysed; unchanged ones are left alone. Every path is
   * checked before anything is written, so one bad path changes nothing. Rows are written and
   * their analysis queued per batch (one lookup, one flush, one multi-row job insert), so the cost
   * per file stays flat and analysis starts while a long list is still being registered.
   */
  async register(em: EntityManager, project: Project, relatives: string[], options: { userId?: number; param?: string } = {}): Promise<Asset[]> {
    const root = this.projects.pathOf(project)
    const files: Array<{ relative: string; size: number; mtime: Date; inode: number; device: number }> = []
    for (const [i, raw] of relatives.entries()) {
      const param = relatives.length > 1 ? `${options.param ?? 'paths'}[${i}]` : (options.param ?? 'paths')
      const file = await resolveInside(root, raw, param)
      const info = await stat(file).catch(() => null)
      if (!info) throw notFound('file', raw)
      if (!info.isFile()) throw invalidParam(param, 'is not a file')
      files.push({ relative: path.relative(root, file).split(path.sep).join('/'), size: info.size, mtime: new Date(Math.floor(info.mtimeMs)), inode: info.ino, device: info.dev })
    }
    const out: Asset[] = []
    for (let i = 0; i < files.length; i += REGISTER_BATCH) {
      const batch = files.slice(i, i + REGISTER_BATCH)
      const known = await em.find(Asset, { project, path: { $in: batch.map((f) => f.relative) } })
      const byPath = new Map(known.map((a) => [a.path, a]))
      const toAnalyse: Asset[] = []
      for (const { relative, ...found } of batch) {
        let asset = byPath.get(relative)
        const changed = !asset || asset.size !== found.size || asset.mtime?.getTime() !== found.mtime.getTime() || !asset.online
        if (!asset) {
          asset = em.create(Asset, { project, path: relative, folder: folderOf(relative), name: path.basename(relative) })
          byPath.set(relative, asset)
        }
        if (changed) {
          // hashes describe content: a changed file must not keep the old ones (zips, dedup)
          if (asset.size !== found.size || asset.mtime?.getTime() !== found.mtime.getTime()) Object.assign(asset, { crc32: null, sha256: null, hashedAt: null })
          asset.analysisState = 'pending'
          toAnalyse.push(asset)
        }
        Object.assign(asset, found, { online: true })
        out.push(asset)
      }
      await em.flush()
      await this.analyseLater(toAnalyse, options.userId)
    }
    return out
  }

  /** queues an analysis job per asset, in one statement */
  analyseLater(assets: JobAsset[], userId?: number) {
    return this.jobs.enqueueMany(assets.map((a) => assetJob('assets.analyse', a, userId)))
  }

  serialize(a: Asset) {
    return serializeAsset(a)
  }
}
