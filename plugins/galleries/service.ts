import { randomUUID } from 'node:crypto'
import path from 'node:path'
import type { AccessRightService, ProtectedType, Right } from '../identity/index.js'
import type { TeamService } from '../identity/index.js'

import { MamError, User, column, conflict, escapeLike, forbidden, invalid, invalidParam, isUniqueViolation, iso, notFound, relativeSegments, safeName, type EntityManager, type Knex, type ParamError, type Principal } from '../../core/index.js'
export const GALLERY = { type: 'gallery', label: 'gallery', table: 'galleries' } as const satisfies ProtectedType
/** the scope kind of a guest link's principal */
export const GUEST = 'gallery-guest'

/** what a guest link opens: one gallery, and what the share allows */
export interface GuestScope {
  kind: typeof GUEST
  id: number
  share_id: number
  email: string
  allow_download: boolean
  allow_approval: boolean
}

export const guestOf = (p: Principal | undefined): GuestScope | undefined => (p?.scope?.kind === GUEST ? (p.scope as unknown as GuestScope) : undefined)

export type Need = 'read' | 'write' | 'approve' | 'download'

export interface GalleryRow {
  id: number
  uuid: string
  name: string
  description: string | null
  gallery_style_preset_id: number | null
  uploads_project_id: number | null
  created_by_id: number | null
  created_at: unknown
  updated_at: unknown
}

export interface EntryRow {
  id: number
  gallery_id: number
  asset_id: number
  folder: string
  name: string
  uploaded: unknown
  label: string | null
  color: string | null
  rating: number | null
  selected: unknown
  client_note: string | null
  created_at: unknown
  updated_at: unknown
  type: string
  size: unknown
  duration: unknown
  metadata: unknown
  proxy_state: string
  proxies: unknown
  analysis_state: string
}

export interface Attributes {
  label?: string | null
  color?: string | null
  rating?: number | null
  selected?: boolean
  client_note?: string | null
}

const ENTRY_COLUMNS = [
  'e.id', 'e.gallery_id', 'e.asset_id', 'e.folder', 'e.name', 'e.uploaded', 'e.label', 'e.color', 'e.rating', 'e.selected', 'e.client_note', 'e.created_at', 'e.updated_at',
  'a.type', 'a.size', 'a.duration', 'a.metadata', 'a.proxy_state', 'a.proxies', 'a.analysis_state',
]

/** metadata a gallery shows of an asset: what a player and a contact sheet need, nothing about where it lives */
const SHOWN_METADATA = ['width', 'height', 'frame_rate', 'duration', 'video_codec', 'audio_channels', 'start_timecode', 'creation_date']

const joinPath = (folder: string, name: string) => (folder ? `${folder}/${name}` : name)
const now = () => new Date()

/**
 * A gallery folder path from a client: relative, no `..`, every segment a safe folder name (the
 * rules of project folders: no separators, control or reserved characters, no leading dot).
 * '' and '/' are the root.
 */
export function galleryPath(input: string | undefined, param: string): string {
  if (input === undefined || input === '' || input === '/') return ''
  const segments = relativeSegments(input, param)
  for (const s of segments) if (safeName(s, '') !== s) throw invalidParam(param, `has a name that is not allowed for a folder: "${s}" (no control characters, \\ : * ? " < > |, nor a leading dot or blank)`)
  return segments.join('/')
}

/** a single entry or folder name */
export function singleName(input: string, param: string): string {
  const segments = relativeSegments(input, param)
  if (segments.length !== 1) throw invalidParam(param, 'must be a single name, without separators')
  const [name] = segments
  if (safeName(name, '') !== name) throw invalidParam(param, 'has characters that are not allowed in a name (control characters, \\ : * ? " < > |, a leading dot or blank)')
  return name
}

/** the first free name of `clip.mov`, `clip (2).mov` … among `taken` */
function freeName(name: string, taken: Set<string>): string {
  if (!taken.has(name)) return name
  const ext = path.extname(name)
  const base = name.slice(0, name.length - ext.length)
  for (let n = 2; ; n++) {
    const candidate = `${base} (${n})${ext}`
    if (!taken.has(candidate)) return candidate
  }
}

/** folders below `folder` (and it): `path = ? or path like 'folder/%'` */
const underFolder = (q: Knex.QueryBuilder, columnName: string, folder: string, self = true) =>
  q.where((w) => {
    if (self) w.where(columnName, folder)
    w.orWhereRaw(`?? like ? escape '\\'`, [columnName, `${escapeLike(folder)}/%`])
  })

/**
 * Galleries (§4.16): curated collections of project assets and uploads, in virtual folders. Rows
 * only; an entry references its asset, so proxies come from the asset and removing the asset from
 * its project removes it from every gallery (foreign key cascade). Access: team rights on
 * `gallery` objects as for projects, or a guest link scoped to one gallery.
 */
export class GalleryService {
  constructor(
    private readonly knex: Knex,
    private readonly rights: AccessRightService,
    private readonly teams: TeamService,
  ) {}

  /** the gallery if the principal may do `need` (404 without any right, 403 with too little) */
  async access(principal: Principal, id: number, need: Need): Promise<{ gallery: GalleryRow; right: Right; guest?: GuestScope }> {
    const guest = guestOf(principal)
    if (guest) {
      // a guest link opens its own gallery only; any other id reads like an unknown one
      if (guest.id !== id) throw notFound('gallery', id)
      const gallery = await this.row(id)
      if (need === 'write') throw forbidden('A guest link may view this gallery but not change it')
      if (need === 'approve' && !guest.allow_approval) throw forbidden('This guest link does not allow approving')
      if (need === 'download' && !guest.allow_download) throw forbidden('This guest link does not allow downloading originals')
      return { gallery, right: 'read', guest }
    }
    const right = need === 'write' ? await this.rights.assertWrite(principal, GALLERY, id) : await this.rights.assertRead(principal, GALLERY, id)
    return { gallery: await this.row(id), right }
  }

  async row(id: number): Promise<GalleryRow> {
    const row = await this.knex('galleries').where({ id }).first()
    if (!row) throw notFound('gallery', id)
    return row
  }

  async list(principal: Principal, input: { query?: string }): Promise<GalleryRow[]> {
    let q = this.knex('galleries').select('*')
    q = this.rights.scope(q, principal, GALLERY.type, 'id')
    if (input.query) q = q.whereRaw(`lower(name) like ? escape '\\'`, [`%${escapeLike(input.query.toLowerCase())}%`])
    return q.orderBy([{ column: 'name' }, { column: 'id' }])
  }

  listQuery(principal: Principal, query?: string): Knex.QueryBuilder {
    let q = this.knex('galleries').select('*')
    q = this.rights.scope(q, principal, GALLERY.type, 'id')
    if (query) q = q.whereRaw(`lower(name) like ? escape '\\'`, [`%${escapeLike(query.toLowerCase())}%`])
    return q
  }

  private async checkPreset(id: number | null | undefined, param: string) {
    if (id === null || id === undefined) return
    if (!(await this.knex('gallery_style_presets').where({ id }).first('id'))) throw invalidParam(param, 'is not a known gallery style preset')
  }

  async create(em: EntityManager, principal: Principal, input: { name: string; description?: string | null; gallery_style_preset_id?: number | null }, param: (f: string) => string): Promise<GalleryRow> {
    const name = input.name.normalize('NFC').trim()
    if (!name) throw invalidParam(param('name'), 'must not be blank')
    await this.checkPreset(input.gallery_style_preset_id, param('gallery_style_preset_id'))
    const user = await em.findOneOrFail(User, principal.userId)
    const own = await this.teams.ensureOwnTeam(em, user)
    let id: number
    try {
      const [row] = await this.knex('galleries')
        .insert({ uuid: randomUUID(), name, description: input.description ?? null, gallery_style_preset_id: input.gallery_style_preset_id ?? null, created_by_id: principal.userId, created_at: now(), updated_at: now() })
        .returning('id')
      id = Number(typeof row === 'object' ? row.id : row)
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A gallery named "${name}" exists already`, { errors: [{ param: param('name'), message: 'is taken' }] })
      throw err
    }
    // the creator's own team may change it, as with projects
    await this.rights.grant(em, GALLERY.type, id, own.id, { read: true, write: true })
    return this.row(id)
  }

  async update(id: number, input: { name?: string; description?: string | null; gallery_style_preset_id?: number | null }, param: (f: string) => string): Promise<GalleryRow> {
    const patch: Record<string, unknown> = {}
    if (input.name !== undefined) {
      const name = input.name.normalize('NFC').trim()
      if (!name) throw invalidParam(param('name'), 'must not be blank')
      patch.name = name
    }
    if (input.description !== undefined) patch.description = input.description
    if (input.gallery_style_preset_id !== undefined) {
      await this.checkPreset(input.gallery_style_preset_id, param('gallery_style_preset_id'))
      patch.gallery_style_preset_id = input.gallery_style_preset_id
    }
    if (Object.keys(patch).length) {
      try {
        await this.knex('galleries').where({ id }).update({ ...patch, updated_at: now() })
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`A gallery named "${patch.name}" exists already`, { errors: [{ param: param('name'), message: 'is taken' }] })
        // a preset deleted between the check and the update
        if (/foreign key/i.test(String((err as Error).message))) throw invalidParam(param('gallery_style_preset_id'), 'is not a known gallery style preset')
        throw err
      }
    }
    return this.row(id)
  }

  async remove(em: EntityManager, id: number): Promise<void> {
    // of two deletes at once, the one that finds no row answers 404
    const deleted = await this.knex('galleries').where({ id }).delete()
    if (!deleted) throw notFound('gallery', id)
    await this.rights.forget(em, GALLERY.type, id)
  }

  serialize(g: GalleryRow, extra: Record<string, unknown> = {}) {
    return {
      id: Number(g.id),
      uuid: g.uuid,
      name: g.name,
      description: g.description,
      gallery_style_preset_id: column.intOrNull(g.gallery_style_preset_id),
      created_by_id: column.intOrNull(g.created_by_id),
      created_at: iso(column.date(g.created_at)),
      updated_at: iso(column.date(g.updated_at)),
      ...extra,
    }
  }

  // ---- folders ------------------------------------------------------------------------------

  async folderExists(db: Knex, galleryId: number, folder: string): Promise<boolean> {
    if (folder === '') return true
    return Boolean(await db('gallery_folders').where({ gallery_id: galleryId, path: folder }).first('id'))
  }

  /** the folder and its ancestors as rows (existing ones kept) */
  async ensureFolder(db: Knex, galleryId: number, folder: string): Promise<void> {
    if (folder === '') return
    const segments = folder.split('/')
    const rows = segments.map((_, i) => ({ gallery_id: galleryId, path: segments.slice(0, i + 1).join('/'), created_at: now(), updated_at: now() }))
    await db('gallery_folders').insert(rows).onConflict(['gallery_id', 'path']).ignore()
  }

  async createFolder(galleryId: number, folder: string): Promise<void> {
    if (folder === '') throw invalidParam('path', 'must name a folder below the gallery root')
    await this.knex.transaction(async (trx) => {
      const parent = folder.includes('/') ? folder.slice(0, folder.lastIndexOf('/')) : ''
      await this.ensureFolder(trx, galleryId, parent)
      try {
        await trx('gallery_folders').insert({ gallery_id: galleryId, path: folder, created_at: now(), updated_at: now() })
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`The folder "${folder}" exists already`, { errors: [{ param: 'path', message: 'exists already' }] })
        throw err
      }
    })
  }

  async folders(galleryId: number, parent: string, recursive: boolean): Promise<string[]> {
    let q = this.knex('gallery_folders').where({ gallery_id: galleryId })
    if (parent) q = underFolder(q, 'path', parent, false)
    const rows: Array<{ path: string }> = await q.orderBy('path').select('path')
    return rows.map((r) => r.path).filter((p) => recursive || p.split('/').length === (parent ? parent.split('/').length + 1 : 1))
  }

  /** moves a folder and everything below it (rows only) from `from` to `to` in one transaction */
  private async moveFolder(trx: Knex, galleryId: number, from: string, to: string, param: string) {
    if (to === from || to.startsWith(`${from}/`)) throw invalidParam(param, 'cannot be moved into itself')
    if (await this.folderExists(trx, galleryId, to)) throw conflict(`"${to}" exists already`, { errors: [{ param, message: 'its target exists already' }] })
    const parent = to.includes('/') ? to.slice(0, to.lastIndexOf('/')) : ''
    await this.ensureFolder(trx, galleryId, parent)
    const cut = from.length + 1 // substr is 1-based: the text after `from`
    const rewrite = (table: string, col: string, extra: Record<string, unknown> = {}) =>
      underFolder(trx(table).where(extra), col, from).update({ [col]: trx.raw(`? || substr(??, ?)`, [to, col, cut]) })
    await rewrite('gallery_folders', 'path', { gallery_id: galleryId })
    await rewrite('gallery_entries', 'folder', { gallery_id: galleryId })
    // folder review targets follow the folder (a folder means every asset in it, wherever it goes)
    await underFolder(trx('review_request_items').whereIn('request_id', trx('review_requests').where({ gallery_id: galleryId }).select('id')), 'folder', from).update({
      folder: trx.raw(`? || substr(folder, ?)`, [to, cut]),
    })
  }

  async renameFolder(galleryId: number, folder: string, name: string): Promise<void> {
    if (folder === '') throw invalidParam('path', 'must name a folder below the gallery root')
    await this.knex.transaction(async (trx) => {
      if (!(await this.folderExists(trx, galleryId, folder))) throw notFound('gallery folder', folder)
      const parent = folder.includes('/') ? folder.slice(0, folder.lastIndexOf('/')) : ''
      await this.moveFolder(trx, galleryId, folder, joinPath(parent, name), 'name').catch(rethrowUnique('name'))
    })
  }

  /** folders or entries (`folder/name`) into `destination`; every source checked before anything moves */
  async moveContents(galleryId: number, sources: string[], destination: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      if (destination && !(await this.folderExists(trx, galleryId, destination))) await this.ensureFolder(trx, galleryId, destination)
      const plan: Array<{ kind: 'folder' | 'entry'; from: string; entryId?: number; param: string }> = []
      for (const [i, raw] of sources.entries()) {
        const param = sources.length > 1 ? `source[${i}]` : 'source'
        const source = galleryPath(raw, param)
        if (source === '') throw invalidParam(param, 'must name a folder or an asset inside the gallery')
        if (await this.folderExists(trx, galleryId, source)) plan.push({ kind: 'folder', from: source, param })
        else {
          const folder = source.includes('/') ? source.slice(0, source.lastIndexOf('/')) : ''
          const entry = await trx('gallery_entries').where({ gallery_id: galleryId, folder, name: source.slice(folder ? folder.length + 1 : 0) }).first('id')
          if (!entry) throw notFound('gallery folder or asset', source)
          plan.push({ kind: 'entry', from: source, entryId: Number(entry.id), param })
        }
      }
      for (const step of plan) {
        const base = step.from.slice(step.from.lastIndexOf('/') + 1)
        if (step.kind === 'folder') await this.moveFolder(trx, galleryId, step.from, joinPath(destination, base), step.param)
        else
          await trx('gallery_entries')
            .where({ id: step.entryId })
            .update({ folder: destination, updated_at: now() })
            .catch(rethrowUnique(step.param, `"${base}" exists already in "${destination || '/'}"`))
      }
    })
  }

  async renameEntry(galleryId: number, assetId: number, name: string): Promise<void> {
    const changed = await this.knex('gallery_entries')
      .where({ gallery_id: galleryId, asset_id: assetId })
      .update({ name, updated_at: now() })
      .catch(rethrowUnique('name', `an asset named "${name}" exists already in its folder`))
    if (!changed) throw notFound('asset in gallery', assetId)
  }

  // ---- entries ------------------------------------------------------------------------------

  /** adds assets (already checked readable by the caller) under `folder`; names are made unique in the folder */
  async addEntries(trx: Knex, galleryId: number, folder: string, assets: Array<{ id: number; name: string }>, options: { userId: number | null; uploaded?: boolean }): Promise<number[]> {
    await this.ensureFolder(trx, galleryId, folder)
    const present = new Set<number>(
      (await trx('gallery_entries').where({ gallery_id: galleryId }).whereIn('asset_id', assets.map((a) => a.id)).select('asset_id')).map((r: any) => Number(r.asset_id)),
    )
    const fresh = assets.filter((a, i) => !present.has(a.id) && assets.findIndex((b) => b.id === a.id) === i)
    if (!fresh.length) return []
    const taken = new Set<string>((await trx('gallery_entries').where({ gallery_id: galleryId, folder }).select('name')).map((r: any) => r.name))
    const rows = fresh.map((a) => {
      const name = freeName(a.name, taken)
      taken.add(name)
      return { gallery_id: galleryId, asset_id: a.id, folder, name, uploaded: options.uploaded ?? false, selected: false, added_by_id: options.userId, created_at: now(), updated_at: now() }
    })
    for (let i = 0; i < rows.length; i += 500) await trx('gallery_entries').insert(rows.slice(i, i + 500)).catch(rethrowUnique('asset_ids', 'collided with a concurrent change of the gallery; retry'))
    await trx('galleries').where({ id: galleryId }).update({ updated_at: now() })
    return fresh.map((a) => a.id)
  }

  entriesQuery(galleryId: number, folder: string, recursive: boolean, db: Knex = this.knex): Knex.QueryBuilder {
    let q = db('gallery_entries as e').join('assets as a', 'a.id', 'e.asset_id').where('e.gallery_id', galleryId)
    q = recursive ? (folder ? underFolder(q, 'e.folder', folder) : q) : q.where('e.folder', folder)
    return q.select(ENTRY_COLUMNS)
  }

  /** entries in a folder, recursively: one indexed count */
  async count(galleryId: number, folder: string): Promise<number> {
    let q = this.knex('gallery_entries as e').where('e.gallery_id', galleryId)
    if (folder) q = underFolder(q, 'e.folder', folder)
    const row = await q.count({ n: '*' }).first()
    return Number(row?.n ?? 0)
  }

  async entry(galleryId: number, assetId: number): Promise<EntryRow> {
    const row = await this.knex('gallery_entries as e').join('assets as a', 'a.id', 'e.asset_id').where({ 'e.gallery_id': galleryId, 'e.asset_id': assetId }).first(ENTRY_COLUMNS)
    if (!row) throw notFound('asset in gallery', assetId)
    return row
  }

  /** asset ids of the gallery among `ids`, and which are missing */
  async entriesAmong(db: Knex, galleryId: number, ids: number[]): Promise<Set<number>> {
    const out = new Set<number>()
    for (let i = 0; i < ids.length; i += 500)
      for (const r of await db('gallery_entries').where({ gallery_id: galleryId }).whereIn('asset_id', ids.slice(i, i + 500)).select('asset_id')) out.add(Number(r.asset_id))
    return out
  }

  /** sets attributes of many entries, all or nothing; errors name `asset_attributes[i][field]` */
  async bulkAttributes(galleryId: number, items: Array<Attributes & { asset_id: number }>): Promise<void> {
    const errors: ParamError[] = []
    for (const [i, item] of items.entries()) {
      if (item.rating !== undefined && item.rating !== null && (!Number.isInteger(item.rating) || item.rating < 0 || item.rating > 5)) errors.push({ param: `asset_attributes[${i}][rating]`, message: 'must be an integer from 0 to 5' })
      if (item.color !== undefined && item.color !== null && !/^(#[0-9a-fA-F]{6}|[a-z]{1,20})$/.test(item.color)) errors.push({ param: `asset_attributes[${i}][color]`, message: 'must be #rrggbb or a colour name' })
    }
    if (errors.length) throw invalid(errors)
    await this.knex.transaction(async (trx) => {
      const present = await this.entriesAmong(trx, galleryId, items.map((i) => i.asset_id))
      const missing = items.findIndex((i) => !present.has(i.asset_id))
      if (missing >= 0) throw new MamError('not_found', `asset ${items[missing].asset_id} is not in this gallery`, { errors: [{ param: `asset_attributes[${missing}][asset_id]`, message: 'is not in this gallery' }] })
      for (const item of items) {
        const { asset_id, ...fields } = item
        const patch = Object.fromEntries(Object.entries(fields).filter(([k, v]) => v !== undefined && ['label', 'color', 'rating', 'selected', 'client_note'].includes(k)))
        if (Object.keys(patch).length) await trx('gallery_entries').where({ gallery_id: galleryId, asset_id }).update({ ...patch, updated_at: now() })
      }
    })
  }

  /** an entry as a gallery shows it: no project, no storage path, only shown metadata */
  serializeEntry(r: EntryRow, reviewStatus: string | null) {
    const meta = column.json<Record<string, unknown>>(r.metadata, {})
    const proxies = column.json<Record<string, string>>(r.proxies, {})
    const attributes = { label: r.label, color: r.color, rating: column.intOrNull(r.rating), selected: column.bool(r.selected), client_note: r.client_note }
    return {
      id: Number(r.asset_id),
      gallery_entry_id: Number(r.id),
      gallery_id: Number(r.gallery_id),
      name: r.name,
      gallery_path: joinPath(r.folder, r.name),
      folder: r.folder,
      type: r.type,
      size: Number(r.size),
      duration: r.duration === null || r.duration === undefined ? null : Number(r.duration),
      uploaded: column.bool(r.uploaded),
      metadata: Object.fromEntries(SHOWN_METADATA.filter((k) => meta[k] !== undefined).map((k) => [k, meta[k]])),
      analysis_state: r.analysis_state,
      proxy_state: r.proxy_state,
      proxy: { state: r.proxy_state, kinds: Object.keys(proxies) },
      attributes,
      ...attributes,
      review_status: reviewStatus,
      created_at: iso(column.date(r.created_at)),
      updated_at: iso(column.date(r.updated_at)),
    }
  }

  // ---- uploads project -----------------------------------------------------------------------

  /** whether a gallery other than `exceptGalleryId` holds uploads in the project or shows any of its assets */
  async projectInUse(projectId: number, exceptGalleryId: number): Promise<boolean> {
    const owner = await this.knex('galleries').where({ uploads_project_id: projectId }).whereNot({ id: exceptGalleryId }).first('id')
    if (owner) return true
    const shown = await this.knex('gallery_entries as e')
      .join('assets as a', 'a.id', 'e.asset_id')
      .where('a.project_id', projectId)
      .whereNot('e.gallery_id', exceptGalleryId)
      .first('e.id')
    return Boolean(shown)
  }

  /** sets the uploads project if none is set yet; returns the one in force */
  async claimUploadsProject(galleryId: number, projectId: number): Promise<number> {
    await this.knex('galleries').where({ id: galleryId }).whereNull('uploads_project_id').update({ uploads_project_id: projectId })
    return Number((await this.row(galleryId)).uploads_project_id)
  }
}

/** a unique violation as a 409 naming `param` */
export const rethrowUnique = (param: string, message = 'exists already') => (err: unknown): never => {
  if (isUniqueViolation(err)) throw conflict(`${param} ${message}`, { errors: [{ param, message }] })
  throw err
}
