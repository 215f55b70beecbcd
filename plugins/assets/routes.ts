import { assetServices } from './refs.js'
import path from 'node:path'
import { IdParams, andThen, coreServices, invalidParam, notFound, isInside, relativeSegments, resolveInside, type RegisterApi, type EntityManager, type Principal, type StorageRegistry } from '../../core/index.js'
import { Project, PROJECT, projectServices, type ProjectService } from '../projects/index.js'
import { identityServices } from '../identity/index.js'
import { Asset } from './entities.js'
import { AssetUpdateInput, ByPathInput, DestroyInput, LinksInput, PropertiesInput } from './schemas.js'
import { cleanRelative } from './service.js'
import { METADATA_PROPERTIES } from './properties.js'
import { serializeAsset } from './asset-json.js'
import { below } from './files.js'

/** §4.6 asset routes of this plugin, §4.9 and §4.13 metadata properties. */
export function registerAssetRoutes(api: RegisterApi) {
  const { routes } = api
  const assets = api.use(assetServices.service)
  const projects = api.use(projectServices.service)
  const rights = api.use(identityServices.accessRights)
  const storages = api.use(coreServices.storages)
  const destroyer = api.use(assetServices.destroyer)
  const proxyStore = api.use(assetServices.proxyStore)
  const jobs = api.use(coreServices.jobs)

  routes.get('/assets/by_path', { access: 'authenticated', input: ByPathInput, bodyKey: 'path', summary: 'the asset at a path (relative with project_id, or absolute on the server)' }, async (ctx) => {
    const { project, relative } = await locate(ctx.em, ctx.user, projects(), storages(), ctx.input.path, ctx.input.project_id)
    const asset = await ctx.em.findOne(Asset, { project, path: relative }, { populate: ['project'] })
    if (!asset) throw notFound('asset at path', ctx.input.path)
    return { asset: assets().serialize(asset) }
  })

  routes.get('/assets/links', { access: 'authenticated', input: LinksInput, bodyKey: 'asset_ids', summary: 'assets sharing a file (inode) with the given ones' }, async (ctx) => {
    const links: Record<string, number[]> = {}
    const readable = ctx.user.isAdmin ? null : rights().readableIds(ctx.user, PROJECT.type)
    for (const id of ctx.input.asset_ids as number[]) {
      const { asset } = await assets().readable(ctx.em, ctx.requireUser(), id)
      if (asset.inode === null) {
        links[id] = []
        continue
      }
      const where: Record<string, unknown> = { inode: asset.inode, device: asset.device, id: { $ne: asset.id }, online: true, project: { deleted: false } }
      if (readable) where.project = { deleted: false, id: { $in: readable } }
      const others = await ctx.em.find(Asset, where as any, { fields: ['id'], orderBy: { id: 'asc' }, limit: 1000 })
      links[id] = others.map((o) => o.id)
    }
    return { links }
  })

  routes.delete('/assets/destroy', { access: 'authenticated', input: DestroyInput, summary: 'remove assets or folders from storage and database' }, async (ctx) => {
    const { asset_ids = [], paths = [], project_id } = ctx.input
    if (!asset_ids.length && !paths.length) throw invalidParam('asset_ids', 'or paths (with project_id) is required')
    if (paths.length && !project_id) throw invalidParam('project_id', 'is required with paths')
    const targets: Array<{ file: string; project: Project; relative: string }> = []
    for (const id of asset_ids) {
      const asset = await assets().writable(ctx.em, ctx.requireUser(), id)
      targets.push({ file: assets().fileOf(asset), project: asset.project, relative: asset.path })
    }
    if (paths.length) {
      const project = await projects().writable(ctx.em, ctx.requireUser(), project_id!)
      const root = projects().pathOf(project)
      for (const [i, p] of paths.entries()) {
        const file = await resolveInside(root, p, `paths[${i}]`)
        if (file === root) throw invalidParam(`paths[${i}]`, 'must name something inside the project')
        targets.push({ file, project, relative: path.relative(root, file).split(path.sep).join('/') })
      }
    }
    const removed: Asset[] = []
    for (const t of targets) removed.push(...(await ctx.em.find(Asset, { project: t.project, $or: [{ path: t.relative }, below('path', t.relative)] }, { populate: ['project'] })))
    const body = { assets: removed.map((a) => assets().serialize(a)) }
    // files and rows go together, per project, under the storage journal
    const byProject = new Map<number, string[]>()
    for (const t of targets) byProject.set(t.project.id, [...(byProject.get(t.project.id) ?? []), t.relative])
    for (const [projectId, relatives] of byProject) await destroyer().destroy(projectId, relatives)
    // proxies go with their assets: without the row (and its key) they are unreadable dead weight
    for (const a of removed) await proxyStore().remove(a)
    // freed space must stop counting against quotas (507): measure the trees again
    for (const id of new Set(targets.map((t) => t.project.id)))
      await jobs().enqueue('projects.calculate-size', { projectId: id }, { userId: ctx.user.userId, projectId: id })
    return body
  })

  // synchronous while SQLite's connection is free (PreparedRead.now)
  routes.get('/assets/:id', { access: 'authenticated', params: IdParams, summary: 'show an asset' }, (ctx) =>
    andThen(assets().readableView(ctx.requireUser(), ctx.params.id), (view) => ({ asset: serializeAsset(view) })),
  )

  routes.put('/assets/:id', { access: 'authenticated', params: IdParams, input: AssetUpdateInput, summary: 'update an asset (description)' }, async (ctx) => {
    const asset = await assets().writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const description = ctx.input.asset?.description ?? ctx.input.description
    if (description !== undefined) asset.description = description
    await ctx.em.flush()
    return { asset: assets().serialize(asset) }
  })

  routes.delete('/assets/:id/delete_description', { access: 'authenticated', params: IdParams, summary: "clear an asset's description" }, async (ctx) => {
    const asset = await assets().writable(ctx.em, ctx.requireUser(), ctx.params.id)
    asset.description = null
    await ctx.em.flush()
    return { asset: assets().serialize(asset) }
  })

  routes.get('/available_metadata_properties', { access: 'authenticated', input: PropertiesInput, summary: 'metadata properties matching a query' }, (ctx) => {
    const q = (ctx.input.query ?? '').toLowerCase()
    return { available_metadata_properties: METADATA_PROPERTIES.filter((p) => !q || p.name.includes(q) || p.label.toLowerCase().includes(q)) }
  })

  const propertyUses = api.use(assetServices.propertyUses)
  routes.get('/settings/metadata_properties', { access: 'authenticated', summary: 'metadata properties the indexer writes, each flagged with what other plugins do with it (searchable: in the search whitelist)' }, () => ({
    metadata_properties: propertyUses().describe(),
  }))
}

/** `path` relative to a project (with project_id) or absolute on the server → the project and the relative path */
async function locate(em: EntityManager, principal: Principal, projects: ProjectService, storages: StorageRegistry, input: string, projectId?: number): Promise<{ project: Project; relative: string }> {
  if (projectId !== undefined) {
    const { project } = await projects.readable(em, principal, projectId)
    return { project, relative: cleanRelative(input, 'path') }
  }
  if (!path.isAbsolute(input)) throw invalidParam('project_id', 'is required for a relative path')
  // the same checks as a relative path (NUL bytes, `..` segments), on the part below the file system root
  relativeSegments(input.replace(/^[\\/]+/, ''), 'path')
  for (const storage of storages.list()) {
    const abs = path.resolve(input)
    if (!isInside(storage.root, abs) || abs === storage.root) continue
    const [folder, ...rest] = path.relative(storage.root, abs).split(path.sep)
    const project = await em.findOne(Project, { storage: storage.name, folder, deleted: false })
    if (!project) break
    await projects.readable(em, principal, project.id).catch(() => {
      throw notFound('asset at path', input)
    })
    return { project, relative: rest.join('/') }
  }
  throw notFound('asset at path', input)
}

