import { createReadStream, createWriteStream, existsSync } from 'node:fs'
import { rename, rm, stat } from 'node:fs/promises'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { Type } from 'typebox'
import { coreServices, IdParam, IdParams, acceptedJob, defineJob, MamError, notFound, permanentError, type RegisterApi, type Principal, type AuthService } from '../../core/index.js'
import { assetServices, Asset } from '../assets/index.js'
import { markerServices } from './refs.js'
import { PdfInput } from './schemas.js'
import { FrameGrabber } from './grabs.js'
import { clipName } from './routes.js'
import { tcOf } from './timecode.js'
import type { PlainMarker } from './service.js'
import { makeDirs } from '../../core/index.js'

const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'
const GRAB_WIDTH = 160
const ROW_HEIGHT = 92 // points: a 160 px wide 16:9 grab

const SWATCH: Record<string, string> = {
  red: 'FFE53935', green: 'FF43A047', blue: 'FF1E88E5', cyan: 'FF00ACC1', magenta: 'FFD81B60', yellow: 'FFFDD835', white: 'FFFFFFFF', black: 'FF000000',
  orange: 'FFFB8C00', pink: 'FFF48FB1', violet: 'FF8E24AA', purple: 'FF6A1B9A', grey: 'FF9E9E9E', gold: 'FFFFB300', forest: 'FF2E7D32', denim: 'FF3949AB',
}

/** the annotation PDF of several assets, built in a job; the PDF is the job's result */
export const AnnotationsPdf = defineJob('markers.annotations-pdf', Type.Object({ assetIds: Type.Array(IdParam), userId: IdParam }))

const pdfFile = (dataDir: string, jobId: number) => path.join(dataDir, 'markers', 'annotations', `${jobId}.pdf`)
const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'
const FONT_BOLD = '/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf'

/** §4.6: GET /assets/:id/download_xls and PUT /assets/annotations_to_pdf (with GET of the finished PDF) */
export function registerReportRoutes(api: RegisterApi) {
  const { routes } = api
  const service = api.use(markerServices.service)
  const assets = api.use(assetServices.service)
  const proxyStore = api.use(assetServices.proxyStore)
  const tools = api.use(coreServices.mediaTools)
  const jobs = api.use(coreServices.jobs)
  const config = api.use(coreServices.config)

  routes.get('/assets/:id/download_xls', { access: 'authenticated', params: IdParams, summary: 'XLSX summary of the markers of an asset: timecodes, duration, colour, text, author, replies and a frame grab per marker' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
    const s = service()
    const timeline = s.timeline(asset)
    const markers = await s.all(asset.id)
    const grabber = await FrameGrabber.open(tools(), proxyStore(), asset, timeline.base)
    try {
      const grabs = await grabber.grabAll(markers.map((m) => m.in), GRAB_WIDTH)
      const out = new PassThrough()
      const chunks: Buffer[] = []
      out.on('data', (c: Buffer) => chunks.push(c))
      const ended = new Promise((resolve, reject) => out.on('end', resolve).on('error', reject))
      // exceljs' streaming writer cannot anchor pictures in cells, so the sheet is built in memory; the
      // pictures are read from disk while the file is written (bench/markers.ts measures the memory)
      // exceljs and pdfkit are loaded on the first report, not at start-up (issue 19: restarts)
      const { default: Excel } = await import('exceljs')
      const workbook = new Excel.Workbook()
      workbook.creator = 'mamkit'
      workbook.created = new Date()
      const sheet = workbook.addWorksheet('Markers', { views: [{ state: 'frozen', ySplit: 1 }] })
      sheet.columns = [
        { header: '#', key: 'n', width: 5 },
        { header: 'In', key: 'in', width: 13 },
        { header: 'Out', key: 'out', width: 13 },
        { header: 'Duration', key: 'duration', width: 13 },
        { header: 'Colour', key: 'color', width: 10 },
        { header: 'Text', key: 'text', width: 50 },
        { header: 'Author', key: 'author', width: 16 },
        { header: 'Replies', key: 'replies', width: 40 },
        { header: 'GUID', key: 'guid', width: 24 },
        { header: 'Frame', key: 'frame', width: 24 },
      ]
      sheet.getRow(1).font = { bold: true }
      markers.forEach((m, i) => {
        const row = sheet.addRow({
          n: i + 1,
          in: tcOf(timeline.base, m.in),
          out: tcOf(timeline.base, m.out),
          duration: tcOf({ ...timeline.base, start: 0 }, m.out - m.in + 1),
          color: m.color,
          // a string cell: text starting with = stays text in XLSX
          text: m.text,
          author: m.author ?? '',
          replies: (m.replies ?? []).map((r) => `${r.author ?? ''}: ${r.text}`).join('\n'),
          guid: m.guid ?? '',
        })
        row.getCell('color').fill = { type: 'pattern', pattern: 'solid', fgColor: { argb: SWATCH[m.color] ?? 'FFFFFFFF' } }
        row.alignment = { vertical: 'top', wrapText: true }
        const grab = grabs.get(m.in)
        if (grab) {
          row.height = ROW_HEIGHT
          const image = workbook.addImage({ filename: grab, extension: 'jpeg' })
          sheet.addImage(image, { tl: { col: 9, row: i + 1 }, ext: { width: GRAB_WIDTH, height: Math.round((GRAB_WIDTH * 9) / 16) }, editAs: 'oneCell' })
        }
      })
      sheet.autoFilter = { from: { row: 1, column: 1 }, to: { row: 1, column: 10 } }
      await workbook.xlsx.write(out)
      out.end()
      await ended
      ctx.type = XLSX_TYPE
      ctx.set('Content-Disposition', `attachment; filename="${clipName(asset).replace(/[^\w.-]+/g, '_')}_markers.xlsx"`)
      return Buffer.concat(chunks)
    } finally {
      await grabber.close()
    }
  })

  routes.put('/assets/annotations_to_pdf', { access: 'authenticated', input: PdfInput, summary: 'a PDF of the markers of several assets with frame grabs (job; the PDF at GET /assets/annotations_to_pdf/:job_id)' }, async (ctx) => {
    const ids = [...new Set(ctx.input.asset_ids)]
    for (const id of ids) await assets().readable(ctx.em, ctx.user, id)
    const job = await jobs().enqueue(AnnotationsPdf.type, { assetIds: ids, userId: ctx.user.userId }, { userId: ctx.user.userId })
    return acceptedJob(ctx, job)
  })

  routes.get('/assets/annotations_to_pdf/:id', { access: 'authenticated', params: IdParams, summary: 'the PDF an annotations_to_pdf job made (its id)' }, async (ctx) => {
    const job = await jobs().get(ctx.params.id)
    if (!job || job.type !== AnnotationsPdf.type || (job.user_id !== ctx.user.userId && !ctx.user.isAdmin)) throw notFound('annotation PDF', ctx.params.id)
    if (job.state !== 'finished') throw new MamError('conflict', `The annotation PDF of job ${job.id} is ${job.state}${job.error ? `: ${job.error}` : ''}; poll GET /status/${job.id}`)
    const file = pdfFile(config().dataDir, job.id)
    const info = await stat(file).catch(() => null)
    if (!info) throw new MamError('gone', `The annotation PDF of job ${job.id} is no longer there; ask for it again`)
    ctx.type = 'application/pdf'
    ctx.length = info.size
    ctx.set('Content-Disposition', `attachment; filename="annotations-${job.id}.pdf"`)
    return createReadStream(file)
  })

  api.jobs.define(AnnotationsPdf, {
    kind: 'generic',
    maxAttempts: 2,
    async handler(ctx) {
      const s = ctx.resolve(markerServices.service)
      const assetService = ctx.resolve(assetServices.service)
      const principal = await principalOf(ctx.resolve(coreServices.auth), ctx.payload.userId)
      const target = pdfFile(ctx.resolve(coreServices.config).dataDir, ctx.id)
      await makeDirs(path.dirname(target))
      const temp = `${target}.partial`
      const { default: PDFDocument } = await import('pdfkit')
      const doc = new PDFDocument({ size: 'A4', margin: 40, info: { Title: 'Annotations', Creator: 'mamkit' } })
      const fonts = existsSync(FONT) && existsSync(FONT_BOLD)
      const regular = () => (fonts ? doc.font(FONT) : doc.font('Helvetica'))
      const bold = () => (fonts ? doc.font(FONT_BOLD) : doc.font('Helvetica-Bold'))
      const written = new Promise<void>((resolve, reject) => doc.pipe(createWriteStream(temp)).on('finish', resolve).on('error', reject))
      let images = 0
      try {
        for (const [i, id] of ctx.payload.assetIds.entries()) {
          // rights are checked again: they may have changed since the request
          const { asset } = await assetService.readable(ctx.em, principal, id).catch(() => {
            throw permanentError(`asset ${id} is gone or no longer readable`)
          })
          const timeline = s.timeline(asset)
          const markers = await s.all(asset.id)
          if (i > 0) doc.addPage()
          bold().fontSize(16).text(asset.name)
          regular().fontSize(9).fillColor('#444444')
            .text(`Project ${asset.project.name} · ${timeline.base.rate.num}/${timeline.base.rate.den} fps${timeline.base.dropFrame ? ' DF' : ''} · start ${tcOf(timeline.base, 0)} · ${timeline.frames ?? '?'} frames · ${markers.length} markers · ${new Date().toISOString().slice(0, 10)}`)
          doc.moveDown()
          const grabber = await FrameGrabber.open(ctx.resolve(coreServices.mediaTools), ctx.resolve(assetServices.proxyStore), asset as Asset, timeline.base)
          try {
            for (const m of markers) {
              ctx.signal.throwIfAborted()
              images += await markerBlock(doc, m, timeline.base, await grabber.grab(m.in, 320), regular, bold)
            }
          } finally {
            await grabber.close()
          }
          ctx.progress((i + 1) / ctx.payload.assetIds.length)
        }
        doc.end()
        await written
        await rename(temp, target)
      } catch (err) {
        doc.end()
        await written.catch(() => {})
        await rm(temp, { force: true })
        throw err
      }
      return { url: `/api/v1/assets/annotations_to_pdf/${ctx.id}`, assets: ctx.payload.assetIds.length, images }
    },
  })
}

/** the requesting user as a principal again (the job runs later; rights are checked as they are now) */
async function principalOf(auth: AuthService, userId: number): Promise<Principal> {
  const principal = await auth.principalFor(userId)
  if (!principal) throw permanentError(`user ${userId} is gone`)
  return principal
}

/** one marker: grab on the left, timecodes, author, colour, text, replies and GUID beside it; returns 1 when a picture was placed */
async function markerBlock(doc: PDFKit.PDFDocument, m: PlainMarker, base: import('./timecode.js').TimecodeBase, grab: string | null, regular: () => unknown, bold: () => unknown): Promise<number> {
  const imageWidth = 160
  const imageHeight = 90
  if (doc.y + imageHeight + 20 > doc.page.height - doc.page.margins.bottom) doc.addPage()
  const top = doc.y
  const left = doc.page.margins.left
  if (grab) doc.image(grab, left, top, { fit: [imageWidth, imageHeight] })
  else doc.rect(left, top, imageWidth, imageHeight).stroke('#cccccc')
  const x = left + imageWidth + 12
  const width = doc.page.width - doc.page.margins.right - x
  doc.rect(x, top + 2, 8, 8).fill(`#${(SWATCH[m.color] ?? 'FFFFFFFF').slice(2)}`)
  doc.fillColor('#000000')
  bold()
  doc.fontSize(10).text(`${tcOf(base, m.in)} – ${tcOf(base, m.out)}   ${m.color}${m.author ? `   ${m.author}` : ''}`, x + 14, top, { width: width - 14 })
  regular()
  doc.fontSize(10).text(m.text || '(no text)', x, doc.y + 2, { width })
  for (const r of m.replies ?? []) doc.fontSize(9).fillColor('#333333').text(`↳ ${r.author ?? ''}: ${r.text}`, x + 10, doc.y + 1, { width: width - 10 })
  if (m.guid) doc.fontSize(7).fillColor('#777777').text(`GUID ${m.guid}`, x, doc.y + 1, { width })
  doc.fillColor('#000000')
  doc.x = left
  doc.y = Math.max(doc.y, top + imageHeight) + 12
  return grab ? 1 : 0
}
