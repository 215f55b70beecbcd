import { Asset } from '../assets/index.js'
import { assetServices } from '../assets/refs.js'
import { sendProxy } from '../assets/index.js'
import { projectServices } from '../projects/refs.js'
import { Project } from '../projects/index.js'
import { identityServices } from '../identity/refs.js'
import { PROJECT } from '../projects/index.js'
import { galleryServices } from './refs.js'
import { galleryPath, guestOf, singleName, type EntryRow, type GalleryRow } from './service.js'
import { CUSTOM_METADATA, metadataValuesRef } from './metadata.js'
import { galleryShared } from './events.js'
import {
  AddAssetsInput,
  AssetsInput,
  BulkAttributesInput,
  CountInput,
  EntryParams,
  FolderInput,
  GalleryIdParams,
  GalleryInput,
  GalleryParams,
  InjectInput,
  ListInput,
  MetadataInput,
  MoveInput,
  RenameAssetInput,
  RenameFolderInput,
  ShareInput,
  ShareParams,
} from './schemas.js'
import { Type } from 'typebox'
import { createReadStream } from 'node:fs'
import { withOriginal } from '../assets/index.js'
import { sendBody } from '../assets/index.js'
import { watermarkStyle } from './watermark.js'
import { IdParam, MamError, coreServices, forbidden, idempotent, invalidParam, notFound, paginate, uploadName, type MamContext, type Principal, type RegisterApi } from '../../core/index.js'
const MAX_UPLOAD_BYTES = 50 * 1024 ** 3
const MAX_NAME_BYTES = 255
const DAY = 86_400_000
const MAX_SHARE_DAYS = 90
/** the projects plugin's trash folder (projects/service.ts TRASH_DIR, not exported by its index); its purge job removes folders below it */
const PROJECT_TRASH_DIR = '.mamkit-trash'
/** routes a guest link reaches (each checks the link's gallery itself) */
export const GUEST_SCOPES = ['gallery-guest']

const PROXY_KINDS = ['lowres', 'audio', 'image', 'poster', 'thumbnails', 'waveform']
const ProxyParams = Type.Object({ id: IdParam, asset_id: IdParam, kind: Type.Unsafe<string>({ type: 'string', enum: PROXY_KINDS }) })

/** fields under `gallery[...]` or at the top level (wrap): errors name them the way they were sent */
const galleryParam = (f: string) => `gallery[${f}]`

/** §4.16 galleries: CRUD, entries, folders, uploads, sharing, metadata */
export function registerGalleryRoutes(api: RegisterApi) {
  const { routes } = api
  const galleries = api.use(galleryServices.service)
  const review = api.use(galleryServices.review)
  const presets = api.use(galleryServices.presets)
  const shares = api.use(galleryServices.shares)
  const assets = api.use(assetServices.service)
  const ingest = api.use(assetServices.ingest)
  const projects = api.use(projectServices.service)
  const rights = api.use(identityServices.accessRights)
  const features = api.use(coreServices.features)
  const outbox = api.use(coreServices.outbox)
  const knex = api.use(coreServices.knex)
  /** custom metadata is there when its plugin is loaded and switched on (isActive alone says yes for a plugin never loaded) */
  const metadataActive = () => features().isActive(CUSTOM_METADATA)

  const show = async (g: GalleryRow, guest: boolean) => {
    const preset = g.gallery_style_preset_id ? presets().serialize(await presets().get(Number(g.gallery_style_preset_id))) : null
    return { gallery: galleries().serialize(g, { asset_count: await galleries().count(Number(g.id), ''), gallery_style_preset: preset, ...(guest ? { guest: true } : {}) }) }
  }

  routes.get('/galleries', { access: 'authenticated', input: ListInput, summary: 'galleries the user can read, by name (paged; `query` filters names)' }, async (ctx) => {
    const rows = await paginate<Record<string, unknown>>(ctx, galleries().listQuery(ctx.user, ctx.input.query), ctx.input, { orderBy: ['name', 'id'], total: true })
    return { galleries: rows.map((r) => galleries().serialize(r as unknown as GalleryRow)) }
  })

  routes.get('/galleries/:id', { access: 'authenticated', params: GalleryParams, scopes: GUEST_SCOPES, summary: 'a gallery (also through its guest link)' }, async (ctx) => {
    const { gallery, guest } = await galleries().access(ctx.user, ctx.params.id, 'read')
    return show(gallery, Boolean(guest))
  })

  routes.post('/galleries', { access: 'authenticated', input: GalleryInput, wrap: 'gallery', summary: 'create a gallery: gallery[name], [description], [gallery_style_preset_id]' }, async (ctx) => {
    const input = ctx.input.gallery ?? {}
    if (input.name === undefined) throw invalidParam('gallery[name]', 'is required')
    const g = await galleries().create(ctx.em, ctx.user, { ...input, name: input.name }, galleryParam)
    ctx.status = 201
    return show(g, false)
  })

  routes.put('/galleries/:id', { access: 'authenticated', params: GalleryParams, input: GalleryInput, wrap: 'gallery', summary: 'change name, description or style preset' }, async (ctx) => {
    await galleries().access(ctx.user, ctx.params.id, 'write')
    return show(await galleries().update(ctx.params.id, ctx.input.gallery ?? {}, galleryParam), false)
  })

  routes.delete('/galleries/:id', { access: 'authenticated', params: GalleryParams, summary: 'delete a gallery (its entries, folders, shares and reviews; never the assets)' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    const body = await show(gallery, false)
    // the hidden uploads project goes to the trash with its gallery, unless another gallery shows its files;
    // its guards (an open edit session …) are asked first, so a veto leaves the gallery as it was
    const uploads = gallery.uploads_project_id ? await ctx.em.findOne(Project, { id: Number(gallery.uploads_project_id), deleted: false }) : null
    const trashUploads = uploads && !(await galleries().projectInUse(uploads.id, gallery.id)) ? uploads : null
    if (trashUploads) await ctx.resolve(projectServices.guards).check(ctx.em, trashUploads, 'delete')
    if (metadataActive()) await ctx.resolve(metadataValuesRef).removeOwner(ctx.em, { type: 'gallery', id: gallery.id })
    // the marked copies live in the assets' proxy folders: their rows go with the gallery, the files go here
    await ctx.resolve(galleryServices.watermarks).forgetGallery(gallery.id)
    await galleries().remove(ctx.em, ctx.params.id)
    if (trashUploads) {
      try {
        await ctx.resolve(projectServices.relocation).trash(trashUploads, `${PROJECT_TRASH_DIR}/${trashUploads.uuid}`)
        await ctx.em.flush()
        await projects().refreshTeamSpace(trashUploads.id)
      } catch (err) {
        // a concurrent delete trashed it first: the gallery is gone either way
        if (!(err instanceof MamError && err.status === 404)) throw err
      }
    }
    return body
  })

  // ---- entries --------------------------------------------------------------------------------

  const entriesWithStatus = async (galleryId: number, rows: EntryRow[]) => {
    const status = await review().statusOf(galleryId, rows.map((r) => Number(r.asset_id)))
    return rows.map((r) => galleries().serializeEntry(r, status.get(Number(r.asset_id))?.status ?? null))
  }

  routes.get('/galleries/:id/assets', { access: 'authenticated', params: GalleryParams, input: AssetsInput, scopes: GUEST_SCOPES, summary: 'assets of a gallery folder (`path`, `recursive`, paged), with attributes and review status' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'read')
    const folder = galleryPath(ctx.input.path, 'path')
    if (!(await galleries().folderExists(knex(), gallery.id, folder))) throw notFound('gallery folder', folder)
    const q = galleries().entriesQuery(gallery.id, folder, Boolean(ctx.input.recursive))
    const rows = await paginate<Record<string, unknown>>(ctx, q, ctx.input, { orderBy: ['e.folder', 'e.name'], rowKeys: ['folder', 'name'], total: true })
    ctx.set('X-Folders', encodeURIComponent(JSON.stringify(await galleries().folders(gallery.id, folder, false))))
    return { assets: await entriesWithStatus(gallery.id, rows as unknown as EntryRow[]) }
  })

  routes.get('/galleries/:id/count_assets', { access: 'authenticated', params: GalleryParams, input: CountInput, scopes: GUEST_SCOPES, summary: 'number of assets in a gallery folder and below it' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'read')
    const folder = galleryPath(ctx.input.path, 'path')
    if (!(await galleries().folderExists(knex(), gallery.id, folder))) throw notFound('gallery folder', folder)
    return { hash: { count: await galleries().count(gallery.id, folder), path: folder } }
  })

  routes.post('/galleries/:id/addassets', { access: 'authenticated', params: GalleryParams, input: AddAssetsInput, summary: 'add project assets (asset_ids; read on their projects needed) under gallery folder `path`' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    const folder = galleryPath(ctx.input.path, 'path')
    return idempotent(ctx, 201, async (answer) => {
      const ids = ctx.input.asset_ids
      // every asset checked before anything is written: read on its project, as the adder
      const found = new Map<number, Asset>()
      for (const [i, id] of ids.entries()) {
        const param = ids.length > 1 ? `asset_ids[${i}]` : 'asset_ids'
        try {
          found.set(id, (await assets().readable(ctx.em, ctx.user, id)).asset)
        } catch (err) {
          if (err instanceof MamError && err.status === 404) throw new MamError('not_found', `asset ${id} not found`, { errors: [{ param, message: 'is not an asset you can read' }] })
          throw err
        }
      }
      // the entries and the stored answer commit together (a retry under the same key replays it)
      return knex().transaction(async (trx) => {
        await galleries().addEntries(trx, gallery.id, folder, [...found.values()].map((a) => ({ id: a.id, name: a.name })), { userId: ctx.user.userId })
        // an asset already in the gallery stays where it is: the answer shows its entry wherever that is
        const rows = (await galleries().entriesQuery(gallery.id, '', true, trx).whereIn('e.asset_id', ids).orderBy('e.id')) as EntryRow[]
        const status = await review().statusOf(gallery.id, ids, trx)
        const body = { assets: rows.map((r) => galleries().serializeEntry(r, status.get(Number(r.asset_id))?.status ?? null)) }
        await answer.save(trx, body)
        return body
      })
    })
  })

  /** the hidden project that holds a gallery's uploads: created on the first upload, no team rights (administrators only see it) */
  const uploadsProject = async (ctx: MamContext, gallery: GalleryRow): Promise<Project> => {
    if (gallery.uploads_project_id) return ctx.em.findOneOrFail(Project, Number(gallery.uploads_project_id))
    const name = `Gallery uploads ${gallery.uuid}`
    let id: number
    try {
      const p = await projects().create(ctx, { name, description: `Files uploaded into gallery ${gallery.id}; managed by the galleries plugin` })
      await rights().forget(ctx.em, PROJECT.type, p.id)
      id = await galleries().claimUploadsProject(gallery.id, p.id)
    } catch (err) {
      // two first uploads at once: the project name is unique, the loser takes the winner's project
      if (!(err instanceof MamError && err.status === 409)) throw err
      const row = await knex()('projects').where({ name, deleted: false }).first('id')
      if (!row) throw err
      id = await galleries().claimUploadsProject(gallery.id, Number(row.id))
    }
    return ctx.em.findOneOrFail(Project, id)
  }

  routes.post(
    '/galleries/:id/inject_uploads',
    { access: 'authenticated', params: GalleryParams, input: InjectInput, multipart: { maxFileSize: MAX_UPLOAD_BYTES, maxFiles: 100 }, summary: 'upload files into a gallery folder (multipart `file` parts, `path`): analysed and proxied like any asset' },
    async (ctx) => {
      const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
      const folder = galleryPath(ctx.input.path, 'path')
      return idempotent(ctx, 201, async (answer) => {
        const files = ctx.files.filter((f) => f.field === 'file' || f.field === 'file[]' || f.field.startsWith('files'))
        if (!files.length) throw invalidParam('file', 'is required: one or more multipart file parts')
        const uploads = files.map((f) => {
          const name = uploadName(f.originalName)
          if (Buffer.byteLength(name) > MAX_NAME_BYTES) throw invalidParam(f.field, `has a file name of ${Buffer.byteLength(name)} bytes; at most ${MAX_NAME_BYTES} bytes`)
          return { tempPath: f.tempPath, name }
        })
        const project = await uploadsProject(ctx, gallery)
        await projects().assertSpace(ctx.em, project, files.reduce((n, f) => n + f.size, 0))
        let ids: number[] = []
        await ingest().ingest(project, undefined, uploads, {
          userId: ctx.user.userId,
          async onCommit(trx, views) {
            ids = views.map((v) => v.id)
            await galleries().addEntries(trx, gallery.id, folder, views.map((v) => ({ id: v.id, name: v.name })), { userId: ctx.user.userId, uploaded: true })
            const rows = await galleries().entriesQuery(gallery.id, folder, false, trx).whereIn('e.asset_id', ids)
            await answer.save(trx, { assets: rows.map((r: EntryRow) => galleries().serializeEntry(r, null)) })
          },
        })
        await projects().refreshTeamSpace(project.id)
        const rows = (await galleries().entriesQuery(gallery.id, folder, false).whereIn('e.asset_id', ids)) as EntryRow[]
        return { assets: rows.map((r) => galleries().serializeEntry(r, null)) }
      })
    },
  )

  // ---- folders ------------------------------------------------------------------------------

  routes.put('/galleries/:id/create_folder', { access: 'authenticated', params: GalleryParams, input: FolderInput, summary: 'create a virtual folder (`path`; parents made too)' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    await galleries().createFolder(gallery.id, galleryPath(ctx.input.path, 'path'))
    return show(await galleries().row(gallery.id), false)
  })

  routes.put('/galleries/:id/rename_folder', { access: 'authenticated', params: GalleryParams, input: RenameFolderInput, summary: 'rename a folder (`path`, `name`); its assets and review targets follow' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    await galleries().renameFolder(gallery.id, galleryPath(ctx.input.path, 'path'), singleName(ctx.input.name, 'name'))
    return show(await galleries().row(gallery.id), false)
  })

  routes.put('/galleries/:id/move_contents', { access: 'authenticated', params: GalleryParams, input: MoveInput, summary: 'move folders and assets (`source`, gallery paths) into folder `destination`' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    const sources = Array.isArray(ctx.input.source) ? ctx.input.source : [ctx.input.source]
    await galleries().moveContents(gallery.id, sources, galleryPath(ctx.input.destination, 'destination'))
    return show(await galleries().row(gallery.id), false)
  })

  routes.put('/galleries/:id/rename_asset', { access: 'authenticated', params: GalleryParams, input: RenameAssetInput, summary: "rename an asset's gallery entry (`asset_id`, `name`); the file keeps its name" }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    await galleries().renameEntry(gallery.id, ctx.input.asset_id, singleName(ctx.input.name, 'name'))
    const [entry] = await entriesWithStatus(gallery.id, [await galleries().entry(gallery.id, ctx.input.asset_id)])
    return { asset: entry }
  })

  routes.put(
    '/galleries/:gallery_id/asset_attributes/bulk_update',
    { access: 'authenticated', params: GalleryIdParams, input: BulkAttributesInput, summary: 'set label, color, rating (0–5), selected, client_note of many entries, all or nothing' },
    async (ctx) => {
      const { gallery } = await galleries().access(ctx.user, ctx.params.gallery_id, 'write')
      await galleries().bulkAttributes(gallery.id, ctx.input.asset_attributes)
      const ids = ctx.input.asset_attributes.map((a) => a.asset_id)
      const rows = (await galleries().entriesQuery(gallery.id, '', true).whereIn('e.asset_id', ids).orderBy('e.id')) as EntryRow[]
      return { assets: await entriesWithStatus(gallery.id, rows) }
    },
  )

  // ---- custom metadata (when the custom-metadata plugin is active) -----------------------------

  const metadata = (ctx: MamContext) => {
    if (!metadataActive())
      throw new MamError('module_inactive', `Custom metadata of galleries needs the "${CUSTOM_METADATA}" module, which is not installed or not active`, { module: CUSTOM_METADATA })
    return ctx.resolve(metadataValuesRef)
  }

  routes.put('/galleries/:id/update_metadata', { access: 'authenticated', params: GalleryParams, input: MetadataInput, summary: 'set custom metadata values of a gallery (needs the custom-metadata module)' }, async (ctx) => {
    const values = metadata(ctx)
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'write')
    const input = ctx.input.custom_metadata ?? ctx.input.metadata
    if (!input) throw invalidParam('custom_metadata', 'is required: a hash of field name or id to value')
    return { array: await values.update(ctx.em, ctx.user, { type: 'gallery', id: gallery.id }, input) }
  })

  routes.get('/galleries/:id/custom_metadata', { access: 'authenticated', params: GalleryParams, summary: 'custom metadata values of a gallery (needs the custom-metadata module)' }, async (ctx) => {
    const values = metadata(ctx)
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'read')
    return { array: await values.list(ctx.em, { type: 'gallery', id: gallery.id }) }
  })

  // ---- proxies and originals through the gallery ------------------------------------------------

  routes.get('/galleries/:id/assets/:asset_id/proxies/:kind', { access: 'authenticated', params: ProxyParams, scopes: GUEST_SCOPES, summary: 'a proxy of a gallery asset (read on the gallery, or its guest link)' }, async (ctx) => {
    const { gallery, guest } = await galleries().access(ctx.user, ctx.params.id, 'read')
    await galleries().entry(gallery.id, ctx.params.asset_id)
    const asset = await ctx.em.findOneOrFail(Asset, ctx.params.asset_id, { populate: ['project'] })
    if (guest) {
      ctx.set('Cache-Control', 'private, no-store')
      ctx.set('Referrer-Policy', 'no-referrer')
      // a gallery whose preset has watermark text: the guest's copy has it burnt in, never the plain proxy
      const style = await watermarkStyle(gallery, ctx)
      if (style) return ctx.resolve(galleryServices.watermarks).serve(ctx, gallery, guest, asset, ctx.params.kind, style)
    }
    await sendProxy(ctx, asset, ctx.params.kind)
  })

  routes.get('/galleries/:id/assets/:asset_id/download', { access: 'authenticated', params: EntryParams, scopes: GUEST_SCOPES, summary: 'the original of a gallery asset: read on its project, or a guest link that allows downloads' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, guestOf(ctx.user) ? 'download' : 'read')
    await galleries().entry(gallery.id, ctx.params.asset_id)
    let asset: Asset
    // a user downloads originals only of projects they may read: the gallery never widens that
    if (!guestOf(ctx.user)) asset = (await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)).asset
    else asset = await ctx.em.findOneOrFail(Asset, ctx.params.asset_id, { populate: ['project'] })
    await withOriginal(ctx, asset, async (original) => {
      // read from the checked descriptor, never the name again (a swapped-in symlink is not followed)
      await sendBody(ctx, { size: original.stats.size, type: 'application/octet-stream', filename: asset.name, open: (start, end) => createReadStream('', { fd: original.handle.fd, start, end, autoClose: false }) })
    })
  })

  // ---- sharing ----------------------------------------------------------------------------------

  routes.put('/galleries/:id/share_via_email', { access: 'authenticated', params: GalleryParams, input: ShareInput, summary: 'mail a guest link to the gallery (email, expires_at, allow_download, allow_approval, message)' }, async (ctx) => {
    const { allow_download = false, allow_approval = false, email, message } = ctx.input
    // viewing needs read; letting a guest download originals or approve needs write
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, allow_download || allow_approval ? 'write' : 'read')
    if (guestOf(ctx.user)) throw forbidden('A guest link cannot share')
    let expiresAt = new Date(Date.now() + 14 * DAY)
    if (ctx.input.expires_at !== undefined) {
      expiresAt = new Date(ctx.input.expires_at)
      if (!/^\d{4}-\d\d-\d\d/.test(ctx.input.expires_at) || Number.isNaN(expiresAt.getTime())) throw invalidParam('expires_at', 'must be an ISO 8601 time')
      if (expiresAt.getTime() <= Date.now()) throw invalidParam('expires_at', 'must lie in the future')
      if (expiresAt.getTime() > Date.now() + MAX_SHARE_DAYS * DAY) throw invalidParam('expires_at', `must lie within ${MAX_SHARE_DAYS} days`)
    }
    const s = shares()
    api.use(identityServices.mailer)().assertConfigured()
    await s.assertRate(ctx.user.userId)
    const share = await knex().transaction(async (trx) => {
      const created = await s.create(trx, { galleryId: gallery.id, sharedById: ctx.user.userId, email, message: message || null, purpose: 'share', allowDownload: allow_download, allowApproval: allow_approval, expiresAt })
      await outbox().publish(trx, galleryShared, { gallery_id: gallery.id, share_id: created.id, email, expires_at: expiresAt.toISOString(), allow_download, allow_approval }, { subjectId: gallery.id, actorId: ctx.user.userId })
      return created
    })
    try {
      await s.mail(email, `${ctx.user.username} shared the gallery "${gallery.name}" with you`, [
        `${ctx.user.username} shared the gallery "${gallery.name}" with you.`,
        ...(message ? ['', `Message from ${ctx.user.username}:`, '', message] : []),
        '',
        'Open it in your browser, no account needed:',
        '',
        `  ${s.linkOf(gallery.id, share.token)}`,
        '',
        `You may ${['view', ...(allow_approval ? ['approve'] : []), ...(allow_download ? ['download the originals'] : [])].join(', ')}.`,
        `The link works until ${expiresAt.toISOString()} (UTC).`,
        '',
      ])
    } catch (err) {
      await s.remove(share.id) // a link nobody received must not stay valid
      throw err
    }
    ctx.status = 201
    return { galleryshare: s.serialize((await s.get(share.id))!) }
  })

  routes.get('/galleries/:id/shares', { access: 'authenticated', params: GalleryParams, summary: 'the email shares and review links of a gallery, newest first' }, async (ctx) => {
    const { gallery } = await galleries().access(ctx.user, ctx.params.id, 'read')
    const rows = await knex()('gallery_shares').where({ gallery_id: gallery.id }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(1000)
    return { gallery_shares: rows.map((r: any) => shares().serialize(r)) }
  })

  routes.delete('/galleries/:id/shares/:share_id', { access: 'authenticated', params: ShareParams, summary: 'revoke a share: its guest link stops working at once' }, async (ctx) => {
    const { gallery, right } = await galleries().access(ctx.user, ctx.params.id, 'read')
    const share = await shares().get(ctx.params.share_id)
    if (!share || Number(share.gallery_id) !== gallery.id) throw notFound('gallery share', ctx.params.share_id)
    if (Number(share.shared_by_id) !== ctx.user.userId && right === 'read') throw forbidden('Only the user who shared it or a user who may change the gallery revokes a share')
    await shares().revoke(gallery.id, share.id)
    return { galleryshare: shares().serialize((await shares().get(share.id))!) }
  })
}

export type { Principal }
