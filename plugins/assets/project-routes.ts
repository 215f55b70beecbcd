import { IdParams, NoInput, acceptedJob, andThen, jsonText, coreServices, faultOf, invalidParam, uploadName, idempotent, type RegisterApi, type RouteContext } from '../../core/index.js'
import { assetIngested } from './events.js'
import { publishQuotaCrossings } from './quota-events.js'
import { projectServices } from '../projects/index.js'
import { assetServices } from './refs.js'
import { Asset } from './entities.js'
import { AddAssetsInput, ChangedSinceInput, CountInput, InjectInput, ListAssetsInput } from './schemas.js'
import { cleanRelative } from './service.js'
import { inFolder } from './files.js'
import { MAX_NAME_BYTES } from './upload-names.js'
import { serializeAsset } from './asset-json.js'
import { assetListing } from './listing.js'

export const MAX_UPLOAD_BYTES = 50 * 1024 ** 3

/** §4.20 asset routes of projects: list, count, addassets, inject_uploads, reindex, rescan, repair, changed metadata. */
export function registerProjectAssetRoutes(api: RegisterApi) {
  const { routes } = api
  const assets = api.use(assetServices.service)
  const projects = api.use(projectServices.service)
  const ingest = api.use(assetServices.ingest)
  const knex = api.use(coreServices.knex)
  const outbox = api.use(coreServices.outbox)
  const db = api.use(coreServices.db)
  const jobs = api.use(coreServices.jobs)

  /** the project's assets in `folder` (and below with `recursive`), as a knex query on plain rows */
  const inProjectFolder = (projectId: number, input: { folder?: string; recursive?: boolean }) => {
    const folder = input.folder ? cleanRelative(input.folder, 'folder') : ''
    return inFolder(knex()('assets').where('project_id', projectId), folder, Boolean(input.recursive))
  }

  // plain rows from prepared statements, no entity hydration: a page of 100 assets costs two or three queries and a loop (PERFORMANCE.md, listing.ts);
  // on SQLite without a promise while its connection is free (PreparedRead.now)
  routes.get('/projects/:id/assets', { access: 'authenticated', params: IdParams, input: ListAssetsInput, summary: 'assets of a project folder (paginated)' }, (ctx) => {
    const { page, per_page = 100, type, online, after, total: wantTotal } = ctx.input
    return andThen(andThen(projects().readableSummary(ctx.requireUser(), ctx.params.id), (project) => {
      if (after !== undefined && page !== undefined) throw invalidParam('page', 'cannot be combined with after')
      return assetListing(db()).page(
        {
          projectId: project.id,
          folder: ctx.input.folder ? cleanRelative(ctx.input.folder, 'folder') : '',
          recursive: Boolean(ctx.input.recursive),
          type: type || undefined,
          online,
          perPage: per_page,
          after: after === undefined ? undefined : cleanRelative(after, 'after'),
          page,
          // a walk by keyset learnt the total from its first page: counting 500,000 matches again on
          // every deep page cost more than the page (README: X-Total-Count)
          count: wantTotal ?? after === undefined,
        },
        { id: project.id, name: project.name },
      )
    }), ({ total, found, lastPath, body }) => {
      if (total !== undefined) ctx.set('X-Total-Count', String(total))
      if (found === per_page && lastPath !== undefined) ctx.set('X-Next-After', encodeURIComponent(lastPath))
      // the JSON text of `{ assets: [assetJsonOfRow(…), …] }`, as it would have been stringified (listing.ts)
      return jsonText(body)
    })
  })

  routes.get('/projects/:id/count_assets', { access: 'authenticated', params: IdParams, input: CountInput, summary: 'number of assets inside a folder' }, async (ctx) => {
    const project = await projects().readableSummary(ctx.requireUser(), ctx.params.id)
    const [{ count }] = await inProjectFolder(project.id, ctx.input).count({ count: '*' })
    return { hash: { count: Number(count), folder: ctx.input.folder ?? '', recursive: ctx.input.recursive ?? false } }
  })

  routes.post('/projects/:id/addassets', { access: 'authenticated', params: IdParams, input: AddAssetsInput, summary: 'register files already in the project tree' }, async (ctx) => {
    const project = await projects().writable(ctx.em, ctx.requireUser(), ctx.params.id)
    return idempotent(ctx, 201, async () => {
      const added = await assets().register(ctx.em, project, ctx.input.paths, { userId: ctx.user.userId })
      return { assets: added.map((a) => assets().serialize(a)) }
    })
  })

  routes.post(
    '/projects/:id/inject_uploads',
    { access: 'authenticated', params: IdParams, input: InjectInput, multipart: { maxFileSize: MAX_UPLOAD_BYTES, maxFiles: 100 }, summary: 'upload files into a project folder (multipart `file` parts, `path`)' },
    async (ctx) => {
      const s = projects()
      const project = await s.writable(ctx.em, ctx.requireUser(), ctx.params.id)
      return idempotent(ctx, 201, async (answer) => {
        const files = ctx.files.filter((f) => f.field === 'file' || f.field === 'file[]' || f.field.startsWith('files'))
        if (!files.length) throw invalidParam('file', 'is required: one or more multipart file parts')
        // every part is checked before anything is written; a part is named by its field and its file
        // name (parts are collected as they finish, so their position is not known)
        const uploads = files.map((f) => {
          const name = uploadName(f.originalName)
          if (Buffer.byteLength(name) > MAX_NAME_BYTES)
            throw invalidParam(f.field, `"${[...name].slice(0, 40).join('')}…" has a file name of ${Buffer.byteLength(name)} bytes; at most ${MAX_NAME_BYTES} bytes`)
          return { tempPath: f.tempPath, name }
        })
        const bytes = files.reduce((n, f) => n + f.size, 0)
        await s.assertSpace(ctx.em, project, bytes)
        let body: { assets: unknown[] } | undefined
        await ingest().ingest(project, ctx.input.path, uploads, {
          userId: ctx.user.userId,
          async onCommit(trx, views) {
            body = { assets: views.map(serializeAsset) }
            await answer.save(trx, body)
            await outbox().publishMany(trx, views.map((v) => ({ event: assetIngested, payload: { asset_id: v.id, name: v.name, folder: v.folder ?? '', size: Number(v.size ?? 0), project_id: project.id, project_name: project.name }, options: { subjectId: v.id, actorId: ctx.user.userId } })))
            await publishQuotaCrossings(trx, db().dialect, outbox(), project.id, views.reduce((n, v) => n + Number(v.size ?? 0), 0), ctx.user.userId)
          },
        })
        // stored and answered as such: the teams' space_used is re-added from project sizes by the
        // next refresh if a full disk or the database away refuses this one
        await s.refreshTeamSpace(project.id).catch((err) => {
          if (!faultOf(err)) throw err
        })
        return body!
      })
    },
  )

  /** a project job on a project the caller may change; its payload gets the project's id and the caller's */
  const enqueue = (type: string, payload: (projectId: number, userId: number) => object) => async (ctx: RouteContext<typeof IdParams, typeof NoInput>) => {
    const project = await projects().writable(ctx.em, ctx.user, ctx.params.id)
    return acceptedJob(ctx, await jobs().enqueue(type, payload(project.id, ctx.user.userId), { userId: ctx.user.userId, projectId: project.id }))
  }
  routes.put('/projects/:id/reindex', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'walk the tree: new files become assets, vanished ones go offline' }, enqueue('assets.reindex', (projectId, userId) => ({ projectId, userId })))
  routes.put('/projects/:id/rescan', { access: 'authenticated', params: IdParams, input: NoInput, summary: 're-analyse assets of unknown type' }, enqueue('assets.reanalyse', (projectId, userId) => ({ projectId, onlyOther: true, userId })))
  routes.put('/projects/:id/repair', { access: 'authenticated', params: IdParams, input: NoInput, summary: 're-analyse all assets' }, enqueue('assets.reanalyse', (projectId, userId) => ({ projectId, onlyOther: false, userId })))

  routes.get('/projects/:id/changed_asset_metadata', { access: 'authenticated', params: IdParams, input: ChangedSinceInput, summary: 'assets whose metadata changed since the project was last used' }, async (ctx) => {
    const { project } = await projects().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    const since = ctx.input.since ? new Date(ctx.input.since) : project.lastUsedAt
    if (since && Number.isNaN(since.getTime())) throw invalidParam('since', 'must be an ISO 8601 time')
    const where = { project, ...(since ? { metadataChangedAt: { $gt: since } } : { metadataChangedAt: { $ne: null } }) }
    const rows = await ctx.em.find(Asset, where, { orderBy: { metadataChangedAt: 'asc' }, limit: 1000 })
    for (const a of rows) a.project = project
    return { assets: rows.map((a) => assets().serialize(a)), since: since?.toISOString() ?? null }
  })
}
