import { readFile, rm, writeFile, rename } from 'node:fs/promises'
import path from 'node:path'
import { Type } from 'typebox'
import { IdParam, IdParams, MamError, acceptedJob, coreServices, defineJob, invalidParam, makeDirs, notFound, paginate, permanentError, type MamContext, type Principal, type RegisterApi } from '../../core/index.js'
import { Asset, assetServices, withOriginal } from '../assets/index.js'
import { customMetadataServices } from '../custom-metadata/index.js'
import { normalizeColor } from '../markers/index.js'
import { parseRate } from './conform.js'
import { DOWNLOAD_FORMATS, FILE_TYPES, READ_FORMATS, SequenceFormatError, readSequence, sniffSequence, writeSequence, type DownloadFormat, type ReadFormat } from './formats/index.js'
import type { SequenceDoc, SequenceMarker, TrackKind } from './model.js'
import { sequenceServices } from './refs.js'
import { REPORT_TYPES, buildReport, type ReportAsset, type ReportType } from './report.js'
import { AddAssetInput, DownloadInput, ImportInput, ListInput, ReportInput, ReportParams, SequenceInput } from './schemas.js'
import { docOf, normalizeRow, offlineJson, rateOf, type LoadedSequence, type SequenceRow } from './service.js'
import { canDrop, framesOfTimecode, rateString, type Rate } from './time.js'

const MAX_FILE_BYTES = 20 * 1024 * 1024
const CUSTOM_METADATA = 'custom-metadata'
const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'

/** the XLSX report of a sequence file, built in a job; downloaded from GET /assets/:id/sequence_reports/:job_id */
export const SequenceReportJob = defineJob('sequences.sequence-report', Type.Object({ assetId: IdParam, userId: IdParam, type: Type.String(), frameRate: Type.String() }))
const reportFile = (dataDir: string, jobId: number) => path.join(dataDir, 'sequences', 'reports', `${jobId}.xlsx`)

const param = (f: string) => `preditor_sequence[${f}]`
const fileName = (name: string) => name.replace(/[^\w.-]+/g, '_').slice(0, 120) || 'sequence'

/**
 * `format`: the core drops it from the input (Rails sends it for `.json`), but these routes name a
 * file format with it, so it is read from the query string (or a form/JSON body) here
 */
function requestedFormat<T extends string>(ctx: MamContext, allowed: readonly T[]): T | undefined {
  const raw = ctx.query.format ?? (ctx.request as { body?: Record<string, unknown> }).body?.format
  if (raw === undefined || raw === '' || raw === 'json') return undefined
  if (typeof raw !== 'string' || !(allowed as readonly string[]).includes(raw)) throw invalidParam('format', `must be one of: ${allowed.join(', ')}`)
  return raw as T
}

function rateParam(value: unknown, name: string): Rate {
  const rate = parseRate(value)
  if (!rate) throw invalidParam(name, 'is not a frame rate (25, 29.97, "30000/1001")')
  return rate
}

function startParam(text: string, rate: Rate, dropFrame: boolean, name: string): number {
  const frames = framesOfTimecode(text, rate, text.includes(';') || dropFrame ? canDrop(rate) : false)
  if (frames === null) throw invalidParam(name, `is not a timecode at ${rateString(rate)} fps (HH:MM:SS:FF)`)
  return frames
}

function markersParam(list: Array<{ frame: number; duration?: number; name?: string; comment?: string; color?: string }>): SequenceMarker[] {
  return list.map((m, i) => {
    const color = m.color === undefined ? 'red' : normalizeColor(m.color)
    if (!color) throw invalidParam(`${param('markers')}[${i}][color]`, 'is not a marker colour (red, green, blue, cyan, magenta, yellow …)')
    return { frame: m.frame, duration: m.duration ?? 0, name: m.name ?? '', comment: m.comment ?? '', color }
  })
}

export function registerSequenceRoutes(api: RegisterApi) {
  const { routes } = api
  const sequences = api.use(sequenceServices.service)
  const conformer = api.use(sequenceServices.conformer)
  const assets = api.use(assetServices.service)
  const jobs = api.use(coreServices.jobs)
  const config = api.use(coreServices.config)
  const defaultRate = () => parseRate((api.settings() as { defaultRate: string }).defaultRate) ?? { num: 25, den: 1 }

  const show = async (ctx: MamContext, loaded: LoadedSequence, extra: Record<string, unknown> = {}) => {
    const usernames = await sequences().usernames([loaded.row.locked_by_id])
    return { preditorsequence: { ...sequences().serialize(loaded, { usernames, viewer: ctx.requireUser() }), ...extra } }
  }

  /** the stored timeline with every online clip pointing at its original as it is now */
  const exportDoc = async (loaded: LoadedSequence): Promise<SequenceDoc> => {
    const doc = docOf(loaded)
    const timings = await conformer().timings(doc.clips.flatMap((c) => (c.assetId ? [c.assetId] : [])), doc.rate)
    doc.clips = doc.clips.map((c) => {
      const t = c.assetId ? timings.get(c.assetId) : undefined
      return t ? { ...c, url: t.url, reel: c.reel ?? t.reel } : c
    })
    return doc
  }

  routes.get('/preditor_sequences', { access: 'authenticated', input: ListInput, summary: 'the sequences you may read (of one project with project_id), paged' }, async (ctx) => {
    const rows = (await paginate(ctx, sequences().listQuery(ctx.user, ctx.input.project_id), ctx.input, { orderBy: ['name', 'id'], total: true })) as unknown as SequenceRow[]
    const list = rows.map((r) => normalizeRow(r))
    const counts = await sequences().counts(list.map((r) => r.id))
    const usernames = await sequences().usernames(list.map((r) => r.locked_by_id))
    return { preditor_sequences: list.map((row) => sequences().serialize({ row }, { usernames, counts: counts.get(row.id), viewer: ctx.requireUser() })) }
  })

  routes.get('/preditor_sequences/:id', { access: 'authenticated', params: IdParams, summary: 'a sequence with its clips and markers' }, async (ctx) => {
    await sequences().readable(ctx.user, ctx.params.id)
    return show(ctx, await sequences().load(ctx.params.id))
  })

  routes.post('/preditor_sequences', { access: 'authenticated', input: SequenceInput, wrap: 'preditor_sequence', summary: 'a new empty sequence in a project you may change (name, frame_rate, drop_frame, start_timecode)' }, async (ctx) => {
    const input = ctx.input.preditor_sequence ?? {}
    if (input.project_id === undefined) throw invalidParam(param('project_id'), 'is required')
    if (input.name === undefined || !input.name.trim()) throw invalidParam(param('name'), 'is required')
    const rate = input.frame_rate === undefined ? defaultRate() : rateParam(input.frame_rate, param('frame_rate'))
    if (input.drop_frame && !canDrop(rate)) throw invalidParam(param('drop_frame'), `drop-frame counting exists at 29.97 and 59.94 only, not ${rateString(rate)}`)
    const dropFrame = input.drop_frame ?? (input.start_timecode?.includes(';') ?? false)
    const start = startParam(input.start_timecode ?? '01:00:00:00', rate, dropFrame, param('start_timecode'))
    const markers = markersParam(input.markers ?? [])
    if (input.remove_clip_ids?.length) throw invalidParam(param('remove_clip_ids'), 'a new sequence has no clips')
    await sequences().assertProjectWritable(ctx.em, ctx.user, input.project_id, param('project_id'))
    const id = await sequences().create(ctx.em, ctx.user, { projectId: input.project_id, doc: { name: input.name, rate, dropFrame: dropFrame && canDrop(rate), start, width: input.width ?? null, height: input.height ?? null, clips: [], markers } }, { nameParam: param('name') })
    ctx.status = 201
    return show(ctx, await sequences().load(id))
  })

  routes.put('/preditor_sequences/:id', { access: 'authenticated', params: IdParams, input: SequenceInput, wrap: 'preditor_sequence', summary: 'rename, change rate or start timecode, replace markers, remove clips' }, async (ctx) => {
    const input = ctx.input.preditor_sequence ?? {}
    if (input.project_id !== undefined) throw invalidParam(param('project_id'), 'cannot change: a sequence stays in its project')
    const current = await sequences().writableNow(ctx.user, ctx.params.id)
    const rate = input.frame_rate === undefined ? undefined : rateParam(input.frame_rate, param('frame_rate'))
    const startRate = rate ?? rateOf(current)
    const dropFrame = input.drop_frame ?? (input.start_timecode !== undefined ? input.start_timecode.includes(';') : Boolean(current.drop_frame))
    const start = input.start_timecode === undefined ? undefined : startParam(input.start_timecode, startRate, dropFrame, param('start_timecode'))
    const markers = input.markers === undefined ? undefined : markersParam(input.markers)
    await sequences().update(ctx.user, ctx.params.id, { name: input.name, rate, dropFrame: input.drop_frame ?? (input.start_timecode !== undefined ? dropFrame && canDrop(startRate) : undefined), start, width: input.width, height: input.height, markers, removeClipIds: input.remove_clip_ids }, param)
    return show(ctx, await sequences().load(ctx.params.id))
  })

  routes.delete('/preditor_sequences/:id', { access: 'authenticated', params: IdParams, summary: 'delete a sequence (never its assets)' }, async (ctx) => {
    await sequences().writableNow(ctx.user, ctx.params.id)
    const body = await show(ctx, await sequences().load(ctx.params.id))
    await sequences().remove(ctx.em, ctx.user, ctx.params.id)
    return body
  })

  routes.get('/preditor_sequences/:id/download', { access: 'authenticated', params: IdParams, input: DownloadInput, summary: 'the sequence for an editing suite: format=xml (FCP7 xmeml, default), fcpxml, edl, otio; aaf answers 501' }, async (ctx) => {
    await sequences().readable(ctx.user, ctx.params.id)
    const format: DownloadFormat = requestedFormat(ctx, DOWNLOAD_FORMATS) ?? 'xml'
    if (format === 'aaf')
      throw new MamError('not_implemented', 'AAF writing is not built yet: an AAF needs a MetaDictionary and a CompositionMob → MasterMob → SourceMob chain written in compound-file streams (NLE-FORMATS.md §8); download format=xml (Premiere, Resolve), fcpxml, edl or otio instead', { format: 'aaf', alternatives: ['xml', 'fcpxml', 'edl', 'otio'] })
    const loaded = await sequences().load(ctx.params.id)
    const text = writeSequence(format, await exportDoc(loaded))
    const file = FILE_TYPES[format]
    ctx.type = file.type
    ctx.set('Content-Disposition', `attachment; filename="${fileName(loaded.row.name)}.${file.extension}"`)
    return Buffer.from(text, 'utf8')
  })

  routes.put('/preditor_sequences/:id/open', { access: 'authenticated', params: IdParams, summary: 'take the editing lock (409 naming the holder when another user has it)' }, async (ctx) => {
    await sequences().open(ctx.user, ctx.params.id)
    return show(ctx, await sequences().load(ctx.params.id))
  })

  routes.delete('/preditor_sequences/:id/close', { access: 'authenticated', params: IdParams, summary: 'release the editing lock (its holder, or an administrator)' }, async (ctx) => {
    await sequences().close(ctx.user, ctx.params.id)
    return show(ctx, await sequences().load(ctx.params.id))
  })

  routes.post('/preditor_sequences/:id/addasset', { access: 'authenticated', params: IdParams, input: AddAssetInput, summary: 'append a clip of an asset (asset_id, in, out, track, position), checked against its rate and duration' }, async (ctx) => {
    const row = await sequences().writableNow(ctx.user, ctx.params.id)
    const rate = rateOf(row)
    const input = ctx.input
    const { asset } = await assets().readable(ctx.em, ctx.user, input.asset_id).catch((err) => {
      if (err instanceof MamError && err.code === 'not_found') throw invalidParam('asset_id', `is not an asset you can read (${input.asset_id})`)
      throw err
    })
    const timing = (await conformer().timings([asset.id], rate)).get(asset.id)!
    if (asset.type !== 'video' && asset.type !== 'audio') throw invalidParam('asset_id', `is ${asset.type === 'image' ? 'an image' : 'not media'}; a sequence takes video and audio assets`)
    if (timing.frames === null) throw invalidParam('asset_id', 'has no duration yet (its analysis has not finished)')
    if (timing.rate && (timing.rate.num * rate.den !== rate.num * timing.rate.den))
      throw invalidParam('asset_id', `runs at ${rateString(timing.rate)} fps and the sequence at ${rateString(rate)} fps; a sequence holds clips of its own rate`)
    const kind: TrackKind = input.track ? (input.track[0].toUpperCase() === 'V' ? 'video' : 'audio') : asset.type === 'video' ? 'video' : 'audio'
    const track = input.track ? Number(input.track.slice(1)) : 1
    if (kind === 'video' && asset.type !== 'video') throw invalidParam('track', 'is a video track and the asset has no picture')
    if (kind === 'audio' && !timing.hasAudio) throw invalidParam('track', 'is an audio track and the asset has no sound')
    const frameOf = (value: number | string | undefined, name: 'in' | 'out', fallback: number) => {
      if (value === undefined) return fallback
      if (typeof value === 'number') return value
      const abs = framesOfTimecode(value, rate)
      if (abs === null) throw invalidParam(name, `is neither a frame number nor a timecode at ${rateString(rate)} fps`)
      return abs - timing.start
    }
    const sourceIn = frameOf(input.in, 'in', 0)
    const sourceOut = frameOf(input.out, 'out', timing.frames)
    if (sourceIn < 0 || sourceIn >= timing.frames) throw invalidParam('in', `is outside the asset (frames 0–${timing.frames - 1})`)
    if (sourceOut > timing.frames) throw invalidParam('out', `is beyond the asset's end (${timing.frames} frames)`)
    if (sourceOut <= sourceIn) throw invalidParam('out', 'must come after in')
    const clipId = await sequences().addClip(ctx.user, ctx.params.id, timing, { kind, track, sourceIn, sourceOut, position: input.position, name: input.name }, { in: 'in', out: 'out', position: 'position', track: 'track' })
    ctx.status = 201
    return show(ctx, await sequences().load(ctx.params.id), { added_clip_id: clipId })
  })

  routes.post(
    '/projects/:id/importsequence',
    { access: 'authenticated', params: IdParams, input: ImportInput, multipart: { maxFileSize: MAX_FILE_BYTES, maxFiles: 1 }, summary: 'a new sequence from an EDL, FCP7 XML, FCPXML or OTIO file (upload `file`, or `asset_id`), clips conformed to the project\'s assets' },
    async (ctx) => {
      const projectId = ctx.params.id
      const project = await sequences().assertProjectWritable(ctx.em, ctx.user, projectId, 'id').catch((err) => {
        if (err instanceof MamError && err.code === 'invalid_parameters') throw notFound('project', projectId)
        throw err
      })
      const upload = ctx.files[0]
      if (upload && ctx.input.asset_id !== undefined) throw invalidParam('asset_id', 'cannot be combined with an uploaded file')
      let text: string
      let sourceAssetId: number | null = null
      if (upload) text = (await readFile(upload.tempPath)).toString('utf8')
      else if (ctx.input.asset_id !== undefined) {
        const { asset } = await assets().readable(ctx.em, ctx.user, ctx.input.asset_id).catch((err) => {
          if (err instanceof MamError && err.code === 'not_found') throw invalidParam('asset_id', `is not an asset you can read (${ctx.input.asset_id})`)
          throw err
        })
        if (asset.size > MAX_FILE_BYTES) throw invalidParam('asset_id', `is ${asset.size} bytes; sequence files of at most ${MAX_FILE_BYTES} are read`)
        text = await withOriginal(ctx, asset, async (o) => (await o.handle.readFile()).toString('utf8'))
        sourceAssetId = asset.id
      } else throw invalidParam('file', 'is required: a multipart `file` part, or asset_id')
      const where = upload ? 'file' : 'asset_id'
      const format: ReadFormat | null = requestedFormat(ctx, READ_FORMATS) ?? sniffSequence(text)
      if (!format) throw invalidParam(where, 'is not a sequence file this server reads (CMX3600 EDL, FCP7 XML, FCPXML, OTIO); name it with format=')
      const edlRate = ctx.input.frame_rate !== undefined ? rateParam(ctx.input.frame_rate, 'frame_rate') : /FCM:\s*DROP FRAME/i.test(text) ? { num: 30000, den: 1001 } : { num: 24, den: 1 }
      let doc: SequenceDoc
      try {
        doc = readSequence(format, text, edlRate)
      } catch (err) {
        if (err instanceof SequenceFormatError) throw invalidParam(where, err.message)
        throw err
      }
      if (ctx.input.name) doc.name = ctx.input.name
      const conformed = await conformer().conform(doc, project.id)
      const id = await sequences().create(ctx.em, ctx.user, { projectId: project.id, doc: conformed.doc, sourceFormat: format, sourceAssetId }, { nameParam: 'name', uniqueName: true })
      ctx.status = 201
      return show(ctx, await sequences().load(id), {
        import: { format, clips: conformed.doc.clips.length, markers: conformed.doc.markers.length, matched: conformed.matched, offline_clips: conformed.offline.map((c) => offlineJson(c, conformed.doc)) },
      })
    },
  )

  routes.post('/assets/:id/generate_sequence_report', { access: 'authenticated', params: IdParams, input: ReportInput, summary: 'XLSX report of a sequence file (type=clip_usage or music_cue_sheet), built in a job; GET /assets/:id/sequence_reports/:job_id' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
    const type = ctx.input.type ?? 'clip_usage'
    if (!(REPORT_TYPES as readonly string[]).includes(type)) throw invalidParam('type', `must be one of: ${REPORT_TYPES.join(', ')}`)
    const rate = ctx.input.frame_rate === undefined ? null : rateParam(ctx.input.frame_rate, 'frame_rate')
    const job = await jobs().enqueue(SequenceReportJob.type, { assetId: asset.id, userId: ctx.user.userId, type, frameRate: rate ? rateString(rate) : '' }, { userId: ctx.user.userId, projectId: asset.project.id })
    return acceptedJob(ctx, job)
  })

  routes.get('/assets/:id/sequence_reports/:job_id', { access: 'authenticated', params: ReportParams, summary: 'the XLSX a generate_sequence_report job made' }, async (ctx) => {
    await assets().readable(ctx.em, ctx.user, ctx.params.id)
    const job = await jobs().get(ctx.params.job_id)
    const payload = job?.payload as { assetId?: number; type?: string } | undefined
    if (!job || job.type !== SequenceReportJob.type || payload?.assetId !== ctx.params.id || (job.user_id !== ctx.user.userId && !ctx.user.isAdmin)) throw notFound('sequence report', ctx.params.job_id)
    if (job.state !== 'finished') throw new MamError('conflict', `The sequence report of job ${job.id} is ${job.state}${job.error ? `: ${job.error}` : ''}; poll GET /status/${job.id}`)
    const body = await readFile(reportFile(config().dataDir, job.id)).catch(() => {
      throw new MamError('gone', `The report of job ${job.id} is no longer stored; generate it again`)
    })
    ctx.type = XLSX_TYPE
    ctx.set('Content-Disposition', `attachment; filename="sequence_${payload?.type ?? 'report'}_${job.id}.xlsx"`)
    return body
  })

  api.jobs.define(SequenceReportJob, {
    kind: 'generic',
    maxAttempts: 2,
    async handler(job) {
      const auth = job.resolve(coreServices.auth)
      const principal: Principal | null = await auth.principalFor(job.payload.userId)
      if (!principal) throw permanentError(`user ${job.payload.userId} is gone`)
      // rights are checked again: they may have changed since the request
      const { asset } = await job.resolve(assetServices.service).readable(job.em, principal, job.payload.assetId).catch(() => {
        throw permanentError(`asset ${job.payload.assetId} is gone or no longer readable`)
      })
      const s = job.resolve(sequenceServices.service)
      const c = job.resolve(sequenceServices.conformer)
      // a sequence imported from this file is the parsed form; else the file is read now
      const imported = await s.importedFrom(asset.id)
      let doc: SequenceDoc
      if (imported) doc = docOf(await s.load(imported))
      else {
        if (asset.size > MAX_FILE_BYTES) throw permanentError(`asset ${asset.id} is ${asset.size} bytes; sequence files of at most ${MAX_FILE_BYTES} are read`)
        const text = await withOriginal(job, asset as Asset, async (o) => (await o.handle.readFile()).toString('utf8'))
        const format = sniffSequence(text)
        if (!format) throw permanentError(`asset ${asset.id} (${asset.name}) is not a sequence file this server reads (CMX3600 EDL, FCP7 XML, FCPXML, OTIO)`)
        const edlRate = parseRate(job.payload.frameRate) ?? (/FCM:\s*DROP FRAME/i.test(text) ? { num: 30000, den: 1001 } : { num: 24, den: 1 })
        try {
          doc = (await c.conform(readSequence(format, text, edlRate), asset.project.id)).doc
        } catch (err) {
          if (err instanceof SequenceFormatError) throw permanentError(`asset ${asset.id} (${asset.name}): ${err.message}`)
          throw err
        }
      }
      const rows = new Map<number, ReportAsset>()
      for (const r of await c.describe(doc.clips.flatMap((cl) => (cl.assetId ? [cl.assetId] : [])))) rows.set(r.id, { ...r, custom: {} })
      const metadataOn = job.resolve(coreServices.features).isActive(CUSTOM_METADATA)
      if (metadataOn && job.payload.type === 'music_cue_sheet') {
        const values = job.resolve(customMetadataServices.values)
        for (const r of rows.values()) {
          if (r.type !== 'audio') continue
          for (const v of await values.list(job.em, { type: 'asset', id: r.id })) {
            const field = String((v.custom_metadata_field as { name?: string } | undefined)?.name ?? '').toLowerCase()
            if (field && v.value !== null && v.value !== undefined) r.custom[field] = Array.isArray(v.value) ? v.value.join(', ') : String(v.value)
          }
        }
      }
      const { buffer, rows: count } = await buildReport(job.payload.type as ReportType, doc, rows)
      const target = reportFile(job.resolve(coreServices.config).dataDir, job.id)
      await makeDirs(path.dirname(target))
      await writeFile(`${target}.partial`, buffer)
      await rename(`${target}.partial`, target).catch(async (err) => {
        await rm(`${target}.partial`, { force: true })
        throw err
      })
      return { url: `/api/v1/assets/${asset.id}/sequence_reports/${job.id}`, type: job.payload.type, rows: count, clips: doc.clips.length }
    },
  })
}
