import { readFile } from 'node:fs/promises'
import { coreServices, IdParams, acceptedJob, MamError, invalid, invalidParam, User, type RegisterApi, type MamContext, type ParamError, type Principal, integerPairCursor } from '../../core/index.js'
import { assetServices, type Asset } from '../assets/index.js'
import { editServices } from '../edits/index.js'
import { markerServices } from './refs.js'
import { AssetParams, BulkInput, ExportInput, ListInput, MarkerInputSchema, MarkerParams, PushInput } from './schemas.js'
import { EXPORT_FORMATS, IMPORT_FORMATS, FORMAT_FILES, FormatError, readMarkers, sniffFormat, writeMarkers, type ExportClip, type ImportFormat } from './formats.js'
import type { MarkerInput, MarkerService, PlainMarker, Timeline } from './service.js'
import { PushToApp } from './jobs.js'

const MAX_IMPORT_BYTES = 20 * 1024 * 1024

/**
 * `format`: the core drops it from the input (Rails sends it for `.json`), but these routes name a
 * file format with it (`download_editor_xml?format=edl`), so it is read from the query string here
 */
function requestedFormat<T extends string>(ctx: MamContext, allowed: readonly T[]): T | undefined {
  const raw = ctx.query.format ?? (ctx.request as { body?: Record<string, unknown> }).body?.format
  if (raw === undefined || raw === '' || raw === 'json') return undefined
  if (typeof raw !== 'string' || !(allowed as readonly string[]).includes(raw)) throw invalidParam('format', `must be one of: ${allowed.join(', ')}`)
  return raw as T
}

/** fields under `marker_description[...]` or at the top level; errors name them the way they were sent */
function readFields(input: Record<string, any>): { fields: MarkerInput; param: (f: string) => string } {
  const nested = input.marker_description !== undefined && input.marker_description !== null
  const { marker_description, ...top } = input
  const fields = { ...top, ...(marker_description ?? {}) } as MarkerInput
  return { fields, param: (key: string) => (nested || top[key] === undefined ? `marker_description[${key}]` : key) }
}

export const clipName = (asset: Asset) => String((asset.metadata as Record<string, unknown>).clip_name ?? asset.name.replace(/\.[^.]*$/, ''))

/** what the editing-suite writers need of an asset and its markers */
export function exportClip(asset: Asset, timeline: Timeline, markers: PlainMarker[]): ExportClip {
  const meta = asset.metadata as Record<string, any>
  const last = markers.reduce((n, m) => Math.max(n, m.out + 1), 1)
  return {
    name: clipName(asset),
    base: timeline.base,
    frames: Math.max(timeline.frames ?? 0, last),
    markers,
    width: Number(meta.width) || undefined,
    height: Number(meta.height) || undefined,
    reel: typeof meta.reel_name === 'string' ? meta.reel_name : undefined,
    hasVideo: asset.type === 'video',
    hasAudio: asset.type === 'audio' || Number(meta.audio_channels) > 0,
  }
}

/** §4.7 marker descriptions, the editing-suite export (§4.6 download_editor_xml) and marker imports */
export function registerMarkerRoutes(api: RegisterApi) {
  const { routes } = api
  const service = api.use(markerServices.service)
  const assets = api.use(assetServices.service)
  const edits = api.use(editServices.service)
  const jobs = api.use(coreServices.jobs)

  const one = async (s: MarkerService, assetId: number, id: number, timeline: Timeline) => {
    const row = await s.row(assetId, id)
    const replies = row.parent_id === null ? ((await s.repliesOf([row.id])).get(row.id) ?? []) : undefined
    return s.serialize(row, timeline, replies)
  }

  routes.get(
    '/assets/:asset_id/marker_descriptions',
    { access: 'authenticated', params: AssetParams, input: ListInput, summary: 'markers of an asset in timeline order, each with its replies (keyset paging: X-Next-After)' },
    async (ctx) => {
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
      const s = service()
      const timeline = s.timeline(asset)
      const limit = ctx.input.per_page ?? 1000
      let after: [number, number] | undefined
      if (ctx.input.after !== undefined && !(after = integerPairCursor.decode(ctx.input.after))) throw invalidParam('after', 'is not a cursor this list gave out (X-Next-After)')
      const rows = await s.list(asset.id, { afterIn: after?.[0], afterId: after?.[1], limit })
      const replies = await s.repliesOf(rows.map((r) => r.id))
      if (rows.length === limit) ctx.set('X-Next-After', integerPairCursor.encode(rows[rows.length - 1].in_frame, rows[rows.length - 1].id))
      return { array: rows.map((r) => s.serialize(r, timeline, replies.get(r.id) ?? [])) } // wire.md: root key `array`
    },
  )

  routes.post(
    '/assets/:asset_id/marker_descriptions',
    {
      access: 'authenticated',
      params: AssetParams,
      input: MarkerInputSchema,
      multipart: { maxFileSize: MAX_IMPORT_BYTES, maxFiles: 1 },
      summary: 'add a marker (marker_description[in|out|text|color|guid|track|parent_id]) or import the markers of an Avid XML/text, EDL, FCP7 XML or FCPXML `file`',
    },
    async (ctx) => {
      const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
      const s = service()
      const timeline = s.timeline(asset)
      if (ctx.files.length) return importFile(ctx, s, asset, timeline)
      const { fields, param } = readFields(ctx.input)
      const marker = await s.create(ctx.em, ctx.user, asset, timeline, fields, param)
      ctx.status = 201
      return { markerdescription: await one(s, asset.id, marker.id, timeline) }
    },
  )

  routes.put(
    '/assets/:asset_id/marker_descriptions/bulk_update',
    { access: 'authenticated', params: AssetParams, input: BulkInput, summary: 'set editing-suite GUIDs on many markers, matched by id or by in + text, all or nothing' },
    async (ctx) => {
      const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
      const s = service()
      const timeline = s.timeline(asset)
      const changed = await s.bulkSetGuids(ctx.em, ctx.user, asset, timeline, ctx.input.marker_descriptions, (i, f) => `marker_descriptions[${i}][${f}]`)
      const out = []
      for (const m of changed) out.push(await one(s, asset.id, m.id, timeline))
      return { array: out }
    },
  )

  routes.put(
    '/assets/:asset_id/marker_descriptions/:id',
    { access: 'authenticated', params: MarkerParams, input: MarkerInputSchema, summary: 'change a marker' },
    async (ctx) => {
      const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
      const s = service()
      const timeline = s.timeline(asset)
      const marker = await s.get(ctx.em, asset.id, ctx.params.id)
      const { fields, param } = readFields(ctx.input)
      await s.update(ctx.em, ctx.user, asset, timeline, marker, fields, param)
      return { markerdescription: await one(s, asset.id, marker.id, timeline) }
    },
  )

  routes.delete('/assets/:asset_id/marker_descriptions/:id', { access: 'authenticated', params: MarkerParams, summary: 'delete a marker and its replies' }, async (ctx) => {
    const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
    const s = service()
    const timeline = s.timeline(asset)
    const marker = await s.get(ctx.em, asset.id, ctx.params.id)
    const body = { markerdescription: await one(s, asset.id, marker.id, timeline) }
    await s.remove(ctx.em, marker)
    return body
  })

  routes.get(
    '/assets/:asset_id/marker_descriptions/:id/username',
    { access: 'authenticated', params: MarkerParams, summary: "guess the user name of a marker's creator: exact login, then full name, then the editing suite's user string" },
    async (ctx) => {
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
      const marker = await service().get(ctx.em, asset.id, ctx.params.id)
      return { hash: { marker_description_id: marker.id, ...(await guessUser(ctx, marker.author, marker.createdById)) } }
    },
  )

  routes.put(
    '/assets/:asset_id/marker_descriptions/:id/push_to_app',
    { access: 'authenticated', params: MarkerParams, input: PushInput, summary: 'queue the marker and its replies for the editing client of the X-APP-EDIT edit (a job it collects)' },
    async (ctx) => {
      if (!ctx.app_client.edit) throw new MamError('bad_request', 'Name the edit whose client collects the marker in the X-APP-EDIT header', { errors: [{ param: 'X-APP-EDIT', message: 'is required' }] })
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
      const marker = await service().get(ctx.em, asset.id, ctx.params.id)
      const edit = (await edits().fromRequest(ctx))!
      const job = await jobs().enqueue(PushToApp.type, { assetId: asset.id, markerId: marker.id, editId: edit.id }, { userId: ctx.user.userId, editId: edit.id, projectId: asset.project.id, assetId: asset.id })
      return acceptedJob(ctx, job)
    },
  )

  routes.get(
    '/assets/:id/download_editor_xml',
    { access: 'authenticated', params: IdParams, input: ExportInput, summary: 'markers for an editing suite: format=avid_xml (default), avid_txt, edl, fcp7_xml, fcpxml, resolve_edl' },
    async (ctx) => {
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
      const s = service()
      const timeline = s.timeline(asset)
      const format = requestedFormat(ctx, EXPORT_FORMATS) ?? 'avid_xml'
      const text = writeMarkers(format, exportClip(asset, timeline, await s.all(asset.id)))
      const file = FORMAT_FILES[format]
      ctx.type = file.type
      ctx.set('Content-Disposition', `attachment; filename="${clipName(asset).replace(/[^\w.-]+/g, '_')}_markers.${file.extension}"`)
      return Buffer.from(text, 'utf8')
    },
  )
}

/** an uploaded marker list: every marker checked against the asset, then all inserted or none */
async function importFile(ctx: MamContext<any, any, Principal>, s: MarkerService, asset: Asset, timeline: Timeline) {
  const upload = ctx.files[0]
  const text = (await readFile(upload.tempPath)).toString('utf8')
  const format: ImportFormat | null = requestedFormat(ctx, IMPORT_FORMATS) ?? sniffFormat(text)
  if (!format) throw invalidParam('file', 'is not a marker list this server reads (Avid marker XML or text, EDL, FCP7 XML, FCPXML); name it with format=')
  let read
  try {
    read = readMarkers(format, text, timeline.base)
  } catch (err) {
    if (err instanceof FormatError) throw invalidParam('file', `${err.message}`)
    throw invalidParam('file', `is not a readable ${format} file`)
  }
  const errors: ParamError[] = []
  for (const m of read) {
    if (m.in < 0) errors.push({ param: 'file', message: `${m.source}: before the asset's start timecode` })
    else if (timeline.frames !== null && m.in >= timeline.frames) errors.push({ param: 'file', message: `${m.source}: beyond the asset's duration (${timeline.frames} frames)` })
    else if (timeline.frames !== null && m.out >= timeline.frames) m.out = timeline.frames - 1
    if (m.text.length > 10_000) errors.push({ param: 'file', message: `${m.source}: text longer than 10000 characters` })
    if (m.guid && m.guid.length > 128) errors.push({ param: 'file', message: `${m.source}: marker id longer than 128 characters` })
  }
  if (errors.length) throw invalid(errors.slice(0, 20))
  const ids = await s.insertMany(ctx.em, ctx.user, asset, timeline, read.map(({ source: _s, ...m }) => ({ ...m, track: m.track && /^(V|A|TC)\d{1,2}$/.test(m.track) ? m.track : null })))
  const out = []
  for (const id of ids) out.push(s.serialize(await s.row(asset.id, id), timeline, []))
  ctx.status = 201
  return { array: out, format }
}

/** exact login, then full name, then the editing suite's user string as it is */
async function guessUser(ctx: MamContext, author: string | null, createdById: number | null) {
  const em = ctx.em
  if (author) {
    const login = await em.findOne(User, { username: author })
    if (login) return { username: login.username, user_id: login.id, matched_by: 'login' }
    const name = author.trim().replace(/\s+/g, ' ').toLowerCase()
    const full = await ctx.resolve(coreServices.knex)('users')
      .whereRaw("lower(trim(coalesce(firstname, '') || ' ' || coalesce(lastname, ''))) = ?", [name])
      .orderBy('id')
      .first('id', 'username')
    if (full) return { username: full.username as string, user_id: Number(full.id), matched_by: 'full_name' }
    return { username: author, user_id: null, matched_by: 'editor' }
  }
  if (createdById !== null) {
    const creator = await em.findOne(User, createdById)
    if (creator) return { username: creator.username, user_id: creator.id, matched_by: 'creator' }
  }
  return { username: null, user_id: null, matched_by: null }
}
