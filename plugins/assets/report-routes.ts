import { Type } from 'typebox'
import { IdParams, acceptedJob, column, coreServices, type RegisterApi, type EntityManager, type Principal, type Knex } from '../../core/index.js'
import { PROJECT, projectServices } from '../projects/index.js'
import { identityServices } from '../identity/index.js'
import type { Asset } from './entities.js'
import { assetServices } from './refs.js'
import { plainSize } from './proxy-crypto.js'
import { cleanRelative } from './service.js'
import { inFolder } from './files.js'

const RehashInput = Type.Object({ sha256: Type.Optional(Type.Boolean({ default: true })) }, { additionalProperties: false })
/** proxy files stat'ed at once for a summary (libuv's thread pool has four threads by default) */
const STAT_PARALLEL = 8
/** the fields of an asset a folder summary reads */
type SummaryAsset = Pick<Asset, 'id' | 'uuid' | 'type' | 'path' | 'size' | 'proxies' | 'proxyVersion'>

const FolderInput = Type.Object({ folder: Type.Optional(Type.String({ maxLength: 4096 })) }, { additionalProperties: false })

/** rehash, the deduplication report, and the summaries an editor sees before checking out a folder */
export function registerReportRoutes(api: RegisterApi) {
  const { routes } = api
  const projects = api.use(projectServices.service)
  const jobs = api.use(coreServices.jobs)
  const knexOf = api.use(coreServices.knex)
  const rights = api.use(identityServices.accessRights)
  const proxyStore = api.use(assetServices.proxyStore)

  routes.put('/projects/:id/rehash', { access: 'authenticated', params: IdParams, input: RehashInput, summary: 'hash all files (CRC-32, and SHA-256 unless sha256=false)' }, async (ctx) => {
    const project = await projects().writable(ctx.em, ctx.user, ctx.params.id)
    return acceptedJob(ctx, await jobs().enqueue('assets.rehash', { projectId: project.id, sha256: ctx.input.sha256 ?? true }, { userId: ctx.user.userId, projectId: project.id }))
  })

  routes.get('/deduplication_report', { access: 'authenticated', summary: 'files with identical content (SHA-256) across the projects you can read' }, async (ctx) => {
    const knex = knexOf()
    const scope = (q: Knex.QueryBuilder) => {
      q.join('projects as p', 'p.id', 'a.project_id').where('p.deleted', false).whereNotNull('a.sha256').where('a.online', true)
      if (!ctx.user.isAdmin) q.whereIn('a.project_id', rights().readableIds(ctx.user, PROJECT.type))
      return q
    }
    const groups = await scope(knex('assets as a')).groupBy('a.sha256').havingRaw('count(*) > 1').select('a.sha256').count({ count: '*' }).max({ size: 'a.size' }).orderByRaw('max(a.size) * (count(*) - 1) desc').limit(1000)
    const members = groups.length
      ? await scope(knex('assets as a')).whereIn('a.sha256', groups.map((g: any) => g.sha256)).select('a.id', 'a.sha256', 'a.project_id', 'p.name as project_name', 'a.path', 'a.size', 'a.inode', 'a.device').orderBy('a.id')
      : []
    const report: Array<{ sha256: string; size: number; count: number; wasted_bytes: number; assets: unknown[] }> = groups.map((g: any) => {
      const assets = members.filter((m: any) => m.sha256 === g.sha256)
      // hard links of one file take no extra space
      const distinctFiles = new Set(assets.map((a: any) => `${a.device}:${a.inode}`)).size
      return {
        sha256: g.sha256,
        size: Number(g.size),
        count: Number(g.count),
        wasted_bytes: Number(g.size) * (distinctFiles - 1),
        assets: assets.map((a: any) => ({ id: Number(a.id), project_id: Number(a.project_id), project_name: a.project_name, path: a.path })),
      }
    })
    return { deduplication_report: { groups: report, wasted_bytes: report.reduce((n, g) => n + g.wasted_bytes, 0) } }
  })

  /**
   * The online assets of a folder (and below) of a project the principal may read, as the plain
   * fields the summaries need: a folder holds thousands of assets, and building an entity for each
   * cost most of these routes (route sweep: ~1 s a request for 1,000 assets).
   */
  const folderAssets = async (em: EntityManager, principal: Principal, projectId: number, input: { folder?: string }) => {
    const { project } = await projects().readable(em, principal, projectId)
    const folder = input.folder ? cleanRelative(input.folder, 'folder') : ''
    const rows = await inFolder(knexOf()('assets').where({ project_id: project.id, online: true }), folder, true)
      .orderBy('id')
      .limit(100_000)
      .select('id', 'uuid', 'type', 'path', 'size', 'proxies', 'proxy_version')
    const assets: SummaryAsset[] = rows.map((r: Record<string, any>) => ({ id: Number(r.id), uuid: r.uuid, type: r.type, path: r.path, size: Number(r.size), proxies: column.json(r.proxies, {}), proxyVersion: Number(r.proxy_version) }))
    return { project, folder, assets }
  }
  /** the editing proxies' plain sizes (null: none, or its file is missing), read a few files at a time */
  const editingBytes = async (videos: SummaryAsset[]): Promise<Array<number | null>> => {
    const sizes: Array<number | null> = new Array(videos.length).fill(null)
    let next = 0
    const reader = async () => {
      for (let i = next++; i < videos.length; i = next++) {
        const file = proxyStore().fileOf(videos[i], 'editing')
        sizes[i] = file ? await plainSize(file).catch(() => null) : null
      }
    }
    await Promise.all(Array.from({ length: Math.min(STAT_PARALLEL, videos.length) }, reader))
    return sizes
  }

  routes.get('/projects/:id/editing_proxy_summary', { access: 'authenticated', params: IdParams, input: FolderInput, summary: 'editing proxies of the video assets in a folder' }, async (ctx) => {
    const { folder, assets } = await folderAssets(ctx.em, ctx.user, ctx.params.id, ctx.input)
    const videos = assets.filter((a) => a.type === 'video')
    const sizes = await editingBytes(videos)
    const rows = videos.map((a, i) => ({ id: a.id, path: a.path, editing_proxy: Boolean(a.proxies.editing), editing_proxy_size: sizes[i] }))
    return {
      hash: {
        folder,
        video_assets: videos.length,
        with_editing_proxy: rows.filter((r) => r.editing_proxy).length,
        editing_proxy_bytes: rows.reduce((n, r) => n + (r.editing_proxy_size ?? 0), 0),
        assets: rows,
      },
    }
  })

  routes.get('/projects/:id/cloud_checkout_summary', { access: 'authenticated', params: IdParams, input: FolderInput, summary: 'what an editor would download for a folder, and how big' }, async (ctx) => {
    const { folder, assets } = await folderAssets(ctx.em, ctx.user, ctx.params.id, ctx.input)
    const videos = assets.filter((x) => x.type === 'video')
    const sizes = await editingBytes(videos)
    let proxyBytes = 0
    let proxyCount = 0
    const missing: number[] = []
    videos.forEach((a, i) => {
      const size = sizes[i]
      if (size === null) missing.push(a.id)
      else {
        proxyBytes += size
        proxyCount++
      }
    })
    const highres = assets.reduce((n, a) => n + a.size, 0)
    return {
      hash: {
        folder,
        editing_proxies: { count: proxyCount, bytes: proxyBytes, missing_asset_ids: missing },
        highres: { count: assets.length, bytes: highres },
        total_bytes: proxyBytes + highres,
      },
    }
  })
}
