import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { access, mkdir, rm, stat, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { Type } from 'typebox'
import { Asset, sendProxy, type ProxyStore } from '../assets/index.js'
import { galleryServices } from './refs.js'
import type { GalleryRow, GuestScope } from './service.js'
import type { Style } from './presets.js'

import { IdParam, MamError, accepted, acceptedJob, column, coreServices, defineJob, notFound, permanentError, type JobContext, type JobService, type Knex, type MamContext, type RegisterApi } from '../../core/index.js'

/** where the font for burnt-in text is looked for unless the `watermark_font` setting names another */
export const DEFAULT_WATERMARK_FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'

/** proxy kinds that show a picture and get the mark; audio and the waveform carry nothing to mark */
const MARKED_KINDS = ['lowres', 'image', 'poster', 'thumbnails'] as const
type MarkedKind = (typeof MARKED_KINDS)[number]
const isMarked = (kind: string): kind is MarkedKind => (MARKED_KINDS as readonly string[]).includes(kind)

/** a pending build whose job never got its id written (a crash between claim and enqueue) is claimed again after this */
const ORPHAN_MS = 60_000
/** a failed build is retried by the next request after this */
const RETRY_FAILED_MS = 10 * 60_000
const WATERMARK_ATTEMPTS = 2

export const BuildWatermark = defineJob('galleries.watermark', Type.Object({ watermarkId: IdParam, build: Type.Integer({ minimum: 0 }) }))

interface Spec {
  text: string
  position: NonNullable<Style['watermark_position']>
  opacity: number
}

export interface WatermarkRow {
  id: number
  gallery_id: number
  asset_id: number
  kind: string
  text_hash: string
  spec: unknown
  source: string
  state: 'new' | 'pending' | 'ready' | 'failed'
  build: number
  job_id: number | null
  file: string | null
  error: string | null
  created_at: unknown
  updated_at: unknown
}

/** what the guest's copy says: the preset's text, then who it was shared with and when */
export function watermarkText(style: Style, guest: Pick<GuestScope, 'email'>, sharedAt: Date): string {
  return `${String(style.watermark_text).trim()}\n${guest.email} · ${sharedAt.toISOString().slice(0, 10)}`
}

/** drawtext placement by preset position, a margin of 1/30 of the picture height */
const PLACE: Record<Spec['position'], [string, string]> = {
  top_left: ['h/30', 'h/30'],
  top_right: ['w-tw-h/30', 'h/30'],
  bottom_left: ['h/30', 'h-th-h/30'],
  bottom_right: ['w-tw-h/30', 'h-th-h/30'],
  center: ['(w-tw)/2', '(h-th)/2'],
}

/**
 * The drawtext filter. Font and text are files in ffmpeg's working directory under fixed names
 * (`font.ttf`, `text.txt`), so neither the guest's address nor a data directory with `:` or `'`
 * in it ever needs filter-graph escaping; `expansion=none` keeps `%{…}` in a text literal.
 */
function drawtext(spec: Spec, kind: MarkedKind): string {
  const [x, y] = PLACE[spec.position]
  // the thumbnail strip is one row of small frames: the text is sized to the strip's height
  const size = kind === 'thumbnails' ? 'h/6' : 'h/18'
  const o = Math.max(0, Math.min(1, spec.opacity))
  return [
    'drawtext=fontfile=font.ttf',
    'textfile=text.txt',
    'expansion=none',
    `fontsize=${size}`,
    `fontcolor=white@${o.toFixed(3)}`,
    'box=1',
    `boxcolor=black@${(o * 0.4).toFixed(3)}`,
    'boxborderw=4',
    'line_spacing=4',
    `x=${x}`,
    `y=${y}`,
  ].join(':')
}

const OUTPUT: Record<MarkedKind, { ext: string; args: string[] }> = {
  // the guest's player gets what the plain proxy gives: H.264 with the audio copied, faststart
  lowres: { ext: '.mp4', args: ['-map', '0:v:0', '-map', '0:a?', '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '23', '-pix_fmt', 'yuv420p', '-c:a', 'copy', '-map_metadata', '0', '-movflags', '+faststart'] },
  image: { ext: '.webp', args: ['-frames:v', '1', '-c:v', 'libwebp', '-quality', '85'] },
  poster: { ext: '.jpg', args: ['-frames:v', '1', '-q:v', '3'] },
  thumbnails: { ext: '.jpg', args: ['-frames:v', '1', '-q:v', '4'] },
}

/** ffmpeg with an argument array (never a shell) in `cwd`; rejects with its last error lines */
function ffmpeg(binary: string, args: string[], cwd: string, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['-hide_banner', '-nostdin', '-y', '-v', 'error', ...args], { cwd, stdio: ['ignore', 'ignore', 'pipe'], signal })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`ffmpeg failed (${code}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`))))
  })
}

/**
 * Watermarked review proxies (issue 12): a guest of a gallery whose style preset has watermark text
 * streams proxies with that text, their address and the share's date burnt in, never the plain
 * proxy. Each is made once by a job from the asset's plain proxy and cached per gallery, asset, kind
 * and text (`gallery_watermarks`), encrypted with the asset's proxy key in the asset's proxy folder.
 * A row goes new → pending (claimed with a conditional update on `build`, so two first requests
 * start one job) → ready | failed; a re-encoded asset (another source proxy) is claimed again.
 */
export class WatermarkService {
  constructor(
    private readonly knex: Knex,
    private readonly store: () => ProxyStore,
    private readonly jobs: () => JobService,
    private readonly font: () => string,
  ) {}

  /** the plain proxy a mark is burnt into, named by what changes when the asset is re-encoded */
  async sourceOf(asset: Asset, kind: string): Promise<{ file: string; fingerprint: string }> {
    const file = this.store().fileOf(asset, kind)
    const st = file ? await stat(file).catch(() => null) : null
    if (!file || !st) throw notFound(`${kind} proxy of asset`, asset.id)
    return { file, fingerprint: `${path.basename(file)}:${st.size}:${Math.floor(st.mtimeMs)}` }
  }

  async row(id: number): Promise<WatermarkRow | undefined> {
    return this.knex('gallery_watermarks').where({ id }).first()
  }

  /** the cache row of this rendering, made if missing (a unique key: racing requests share one) */
  async ensure(galleryId: number, assetId: number, kind: string, spec: Spec, source: string): Promise<WatermarkRow> {
    const textHash = createHash('sha256').update(JSON.stringify([spec.text, spec.position, spec.opacity])).digest('hex')
    const key = { gallery_id: galleryId, asset_id: assetId, kind, text_hash: textHash }
    await this.knex('gallery_watermarks')
      .insert({ ...key, spec: JSON.stringify(spec), source, state: 'new', build: 0, created_at: new Date(), updated_at: new Date() })
      .onConflict(['gallery_id', 'asset_id', 'kind', 'text_hash'])
      .ignore()
    return this.knex('gallery_watermarks').where(key).first()
  }

  /** whether the row needs (another) build for `source` */
  private async stale(row: WatermarkRow, source: string): Promise<boolean> {
    if (row.state === 'new' || row.source !== source) return true
    const age = Date.now() - column.date(row.updated_at)!.getTime()
    if (row.state === 'failed') return age > RETRY_FAILED_MS
    if (row.state === 'ready') return !row.file || !(await this.fileExists(row))
    // pending: its job may have died for good (failed, cancelled, pruned) or never been queued
    if (row.job_id === null) return age > ORPHAN_MS
    const job = await this.jobs().get(Number(row.job_id))
    return !job || job.state === 'failed' || job.state === 'cancelled'
  }

  private async fileExists(row: WatermarkRow): Promise<boolean> {
    const asset = await this.knex('assets').where({ id: row.asset_id }).first('uuid', 'proxy_version')
    if (!asset) return false
    const dir = this.store().dirOf({ uuid: asset.uuid }, Number(asset.proxy_version))
    return access(path.join(dir, row.file!)).then(() => true, () => false)
  }

  /**
   * Claims a build: bumps `build` only if nobody did since `row` was read, then queues the job.
   * Returns the row as it stands afterwards (ours, or the winner's).
   */
  async claim(row: WatermarkRow, source: string, userId: number | null): Promise<WatermarkRow> {
    const build = Number(row.build) + 1
    const won = await this.knex('gallery_watermarks')
      .where({ id: row.id, build: row.build })
      .update({ state: 'pending', build, source, job_id: null, error: null, updated_at: new Date() })
    if (won) {
      const job = await this.jobs().enqueue(BuildWatermark.type, { watermarkId: Number(row.id), build }, { userId, assetId: Number(row.asset_id) })
      await this.knex('gallery_watermarks').where({ id: row.id, build }).update({ job_id: job.id })
    }
    return (await this.row(Number(row.id)))!
  }

  /** serves the guest's watermarked proxy: 200/206 when it is made, else 202 with the job making it */
  async serve(ctx: MamContext, gallery: GalleryRow, guest: GuestScope, asset: Asset, kind: string, style: Style): Promise<unknown> {
    // an audio proxy or a waveform shows no picture: nothing to mark, nothing more revealed
    if (!isMarked(kind)) return sendProxy(ctx, asset, kind)
    const font = this.font()
    if (!(await access(font).then(() => true, () => false)))
      throw new MamError('service_unavailable', `Watermarked proxies need a TrueType font for the burnt-in text; ${font} (setting galleries.watermark_font) is not installed on this server, and the unmarked proxy is never served to a guest of this gallery`)
    await ctx.resolve(coreServices.mediaTools).require('ffmpeg')
    const share = await ctx.resolve(galleryServices.shares).get(guest.share_id)
    if (!share) throw notFound('gallery share', guest.share_id)
    const spec: Spec = { text: watermarkText(style, guest, column.date(share.created_at)!), position: style.watermark_position ?? 'bottom_right', opacity: style.watermark_opacity ?? 0.5 }
    const source = await this.sourceOf(asset, kind)
    let row = await this.ensure(gallery.id, asset.id, kind, spec, source.fingerprint)
    if (await this.stale(row, source.fingerprint)) row = await this.claim(row, source.fingerprint, Number(share.shared_by_id))
    if (row.state === 'ready' && row.source === source.fingerprint && row.file) {
      // a view of the asset whose only proxy of this kind is the marked file: sendProxy decrypts it with the asset's key, Range included
      const marked = Object.assign(Object.create(asset) as Asset, { proxies: { [kind]: row.file } })
      return sendProxy(ctx, marked, kind)
    }
    if (row.state === 'failed')
      throw new MamError('service_unavailable', `The watermarked ${kind} proxy of asset ${asset.id} could not be made (${row.error ?? 'unknown error'}); it is tried again in a few minutes, and the unmarked proxy is never served to a guest of this gallery`, { headers: { 'Retry-After': String(RETRY_FAILED_MS / 1000) } })
    ctx.set('Retry-After', '2')
    const job = row.job_id === null ? null : await this.jobs().get(Number(row.job_id))
    return job ? acceptedJob(ctx, job) : accepted(ctx, { hash: { state: 'pending', watermark_id: Number(row.id) } })
  }

  /** removes a gallery's marked files (before its rows go with the gallery) */
  async forgetGallery(galleryId: number): Promise<void> {
    const rows: Array<{ file: string; uuid: string; proxy_version: unknown }> = await this.knex('gallery_watermarks as w')
      .join('assets as a', 'a.id', 'w.asset_id')
      .where('w.gallery_id', galleryId)
      .whereNotNull('w.file')
      .select('w.file', 'a.uuid', 'a.proxy_version')
    for (const r of rows) await rm(path.join(this.store().dirOf({ uuid: r.uuid }, Number(r.proxy_version)), r.file), { force: true })
  }

  /** the job: decrypt the plain proxy, burn the text in with ffmpeg, store it encrypted beside the asset's proxies */
  async build(ctx: JobContext<{ watermarkId: number; build: number }>) {
    const { watermarkId, build } = ctx.payload
    const row = await this.row(watermarkId)
    // a newer claim superseded this build, or the gallery is gone: nothing to do
    if (!row || Number(row.build) !== build) return { skipped: true }
    const asset = await ctx.em.findOne(Asset, row.asset_id)
    if (!asset) return { skipped: true }
    const kind = row.kind as MarkedKind
    const spec = column.json<Spec>(row.spec, { text: '', position: 'bottom_right', opacity: 0.5 })
    const dir = path.join(ctx.resolve(coreServices.config).dataDir, 'tmp', `gallery-watermark-${ctx.id}-${ctx.attempt}`)
    await rm(dir, { recursive: true, force: true })
    await mkdir(dir, { recursive: true })
    try {
      const binary = await ctx.resolve(coreServices.mediaTools).require('ffmpeg')
      const source = this.store().fileOf(asset, kind)
      if (!source) throw permanentError(`asset ${asset.id} has no ${kind} proxy`)
      const { ext, args } = OUTPUT[kind]
      const plain = `plain${path.extname(source).replace(/\.enc$/, '') || ext}`
      await this.store().savePlain(asset, kind, path.join(dir, plain))
      await symlink(this.font(), path.join(dir, 'font.ttf'))
      await writeFile(path.join(dir, 'text.txt'), spec.text)
      const out = `marked${ext}`
      await ffmpeg(binary, ['-protocol_whitelist', 'file', '-i', `file:${plain}`, '-vf', drawtext(spec, kind), ...args, out], dir, ctx.signal)
      // encrypted with the asset's key into its proxy folder; the name carries the build, so a reader never sees half a file
      const stored = await this.store().store(asset, { [`wm-${row.id}-${build}`]: path.join(dir, out) })
      const file = Object.values(stored)[0]
      const done = await this.knex('gallery_watermarks').where({ id: row.id, build }).update({ state: 'ready', file, error: null, updated_at: new Date() })
      const folder = this.store().dirOf(asset, asset.proxyVersion)
      if (!done) await rm(path.join(folder, file), { force: true })
      else if (row.file && row.file !== file) await rm(path.join(folder, row.file), { force: true })
      ctx.count(1, 0)
      return { watermark_id: row.id, kind, file }
    } catch (err) {
      const permanent = (err as { permanent?: boolean }).permanent || ctx.attempt >= WATERMARK_ATTEMPTS
      if (permanent) await this.knex('gallery_watermarks').where({ id: row.id, build }).update({ state: 'failed', error: (err as Error).message.slice(0, 2000), updated_at: new Date() })
      ctx.count(0, 1)
      throw err
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }
}

/** the watermark job (two attempts: a second failure marks the row failed, retried by a request minutes later) */
export function defineWatermarkJob(api: RegisterApi) {
  api.jobs.define(BuildWatermark, { kind: 'asset', maxAttempts: WATERMARK_ATTEMPTS, concurrency: 2, handler: (ctx) => ctx.resolve(galleryServices.watermarks).build(ctx) })
}

/** whether guests of this gallery must see proxies with the preset's watermark burnt in; the preset's style when so */
export async function watermarkStyle(gallery: GalleryRow, ctx: MamContext): Promise<Style | null> {
  if (!gallery.gallery_style_preset_id) return null
  const presets = ctx.resolve(galleryServices.presets)
  const style = presets.style(await presets.get(Number(gallery.gallery_style_preset_id)))
  return style.watermark_text ? style : null
}

