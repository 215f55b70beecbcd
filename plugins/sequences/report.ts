import type ExcelJS from 'exceljs'
import { clipEnd, clipLength, fileNameOf, pathOfUrl, trackName, type SequenceClip, type SequenceDoc } from './model.js'
import { durationTimecode, timecode } from './time.js'

/**
 * The two sequence reports of NLE-FORMATS.md §13, as XLSX workbooks:
 * - `clip_usage`: every event (track, clip, reel, source and record timecodes, duration, the MAM
 *   asset) and, on a second sheet, every source with its number of uses and total used duration;
 * - `music_cue_sheet`: the music cues of the audio tracks (clips of audio-only sources), adjacent
 *   edits of one source on one track merged, a stereo pair counted once; title, composer,
 *   publisher, PRO, ISRC/ISWC from the asset's custom metadata when fields of those names exist.
 */
export const REPORT_TYPES = ['clip_usage', 'music_cue_sheet'] as const
export type ReportType = (typeof REPORT_TYPES)[number]

export interface ReportAsset {
  id: number
  name: string
  path: string
  type: string
  size: number
  /** custom metadata by lower-case field name */
  custom: Record<string, string>
}

const AUDIO_FILE = /\.(wav|bwf|aif|aiff|mp3|m4a|aac|flac|ogg|opus)$/i
const sourceKey = (c: SequenceClip) => (c.assetId ? `asset:${c.assetId}` : `file:${pathOfUrl(c.url) ?? c.name}`)

/** a clip of music: on an audio track, from an audio-only source */
export function isMusic(c: SequenceClip, assets: Map<number, ReportAsset>): boolean {
  if (c.kind !== 'audio') return false
  const asset = c.assetId ? assets.get(c.assetId) : undefined
  if (asset) return asset.type === 'audio'
  return AUDIO_FILE.test(fileNameOf(c.url) ?? c.name)
}

export interface Cue {
  number: string
  key: string
  name: string
  assetId: number | null
  tracks: string[]
  record: number
  end: number
}

/** the cues: music clips in record order, merged when one source continues on the same track or plays as a pair */
export function musicCues(doc: SequenceDoc, assets: Map<number, ReportAsset>): Cue[] {
  const clips = doc.clips.filter((c) => isMusic(c, assets)).sort((a, b) => a.record - b.record || a.track - b.track)
  const cues: Cue[] = []
  for (const c of clips) {
    const key = sourceKey(c)
    // the same source already playing here (the other side of a stereo pair), or continuing an edit on this track
    const open = cues.find((q) => q.key === key && ((q.record === c.record && q.end === clipEnd(c)) || (q.tracks.includes(trackName(c)) && q.end === c.record)))
    if (open) {
      open.end = Math.max(open.end, clipEnd(c))
      if (!open.tracks.includes(trackName(c))) open.tracks.push(trackName(c))
      continue
    }
    cues.push({ number: '', key, name: c.name, assetId: c.assetId ?? null, tracks: [trackName(c)], record: c.record, end: clipEnd(c) })
  }
  cues.forEach((q, i) => (q.number = `1M${String(i + 1).padStart(2, '0')}`))
  return cues
}

const header = (sheet: ExcelJS.Worksheet, columns: Array<{ header: string; key: string; width: number }>) => {
  sheet.columns = columns
  sheet.getRow(1).font = { bold: true }
  sheet.views = [{ state: 'frozen', ySplit: 1 }]
  sheet.autoFilter = { from: { row: 1, column: 1 }, to: { row: 1, column: columns.length } }
}

/** `HH:MM:SS` of a duration in frames (cue sheets give whole seconds, rounded up) */
const clock = (frames: number, doc: SequenceDoc) => {
  const seconds = Math.ceil((frames * doc.rate.den) / doc.rate.num)
  const p = (n: number) => String(n).padStart(2, '0')
  return `${p(Math.floor(seconds / 3600))}:${p(Math.floor(seconds / 60) % 60)}:${p(seconds % 60)}`
}

const pick = (custom: Record<string, string> | undefined, ...names: string[]) => {
  if (!custom) return ''
  for (const n of names) for (const [k, v] of Object.entries(custom)) if (k === n || k.includes(n)) return v
  return ''
}

export async function buildReport(type: ReportType, doc: SequenceDoc, assets: Map<number, ReportAsset>): Promise<{ buffer: Buffer; rows: number }> {
  // loaded on the first report, not at start-up (issue 19: restarts)
  const { default: Excel } = await import('exceljs')
  const workbook = new Excel.Workbook()
  workbook.creator = 'mamkit'
  workbook.created = new Date()
  const tc = (frames: number) => timecode(frames, doc.rate, doc.dropFrame)
  let rows = 0
  if (type === 'clip_usage') {
    const events = workbook.addWorksheet('Events')
    header(events, [
      { header: '#', key: 'n', width: 6 },
      { header: 'Track', key: 'track', width: 7 },
      { header: 'Clip name', key: 'name', width: 32 },
      { header: 'Reel', key: 'reel', width: 12 },
      { header: 'Source in', key: 'src_in', width: 13 },
      { header: 'Source out', key: 'src_out', width: 13 },
      { header: 'Record in', key: 'rec_in', width: 13 },
      { header: 'Record out', key: 'rec_out', width: 13 },
      { header: 'Duration', key: 'duration', width: 13 },
      { header: 'Frames', key: 'frames', width: 9 },
      { header: 'Asset id', key: 'asset_id', width: 9 },
      { header: 'Asset path', key: 'path', width: 40 },
      { header: 'Size (bytes)', key: 'size', width: 14 },
      { header: 'Status', key: 'status', width: 9 },
    ])
    const ordered = [...doc.clips].sort((a, b) => a.record - b.record || (a.kind === b.kind ? a.track - b.track : a.kind === 'video' ? -1 : 1))
    ordered.forEach((c, i) => {
      const asset = c.assetId ? assets.get(c.assetId) : undefined
      const start = c.sourceStart ?? 0
      events.addRow({
        n: i + 1,
        track: trackName(c),
        name: c.name,
        reel: c.reel ?? '',
        src_in: tc(start + c.sourceIn),
        src_out: tc(start + c.sourceOut),
        rec_in: tc(doc.start + c.record),
        rec_out: tc(doc.start + clipEnd(c)),
        duration: durationTimecode(clipLength(c), doc.rate),
        frames: clipLength(c),
        asset_id: asset?.id ?? null,
        path: asset?.path ?? pathOfUrl(c.url) ?? '',
        size: asset?.size ?? null,
        status: asset ? 'online' : 'offline',
      })
    })
    rows = ordered.length
    const sources = workbook.addWorksheet('Sources')
    header(sources, [
      { header: 'Source', key: 'source', width: 40 },
      { header: 'Asset id', key: 'asset_id', width: 9 },
      { header: 'Uses', key: 'uses', width: 7 },
      { header: 'Used frames', key: 'frames', width: 12 },
      { header: 'Used duration', key: 'duration', width: 13 },
      { header: 'Size (bytes)', key: 'size', width: 14 },
    ])
    const bySource = new Map<string, { source: string; asset?: ReportAsset; uses: number; frames: number }>()
    for (const c of ordered) {
      const key = sourceKey(c)
      const asset = c.assetId ? assets.get(c.assetId) : undefined
      const entry = bySource.get(key) ?? { source: asset?.path ?? pathOfUrl(c.url) ?? c.name, asset, uses: 0, frames: 0 }
      entry.uses++
      entry.frames += clipLength(c)
      bySource.set(key, entry)
    }
    for (const e of [...bySource.values()].sort((a, b) => a.source.localeCompare(b.source)))
      sources.addRow({ source: e.source, asset_id: e.asset?.id ?? null, uses: e.uses, frames: e.frames, duration: durationTimecode(e.frames, doc.rate), size: e.asset?.size ?? null })
  } else {
    const sheet = workbook.addWorksheet('Cue sheet')
    sheet.addRow([`Production: ${doc.name}`])
    sheet.addRow([`Frame rate ${doc.rate.num}/${doc.rate.den}${doc.dropFrame ? ' DF' : ''} · start ${tc(doc.start)}`])
    sheet.addRow([])
    const columns = [
      { header: 'Cue', key: 'cue', width: 7 },
      { header: 'Title', key: 'title', width: 32 },
      { header: 'Composer(s)', key: 'composer', width: 24 },
      { header: 'Publisher(s)', key: 'publisher', width: 24 },
      { header: 'PRO', key: 'pro', width: 10 },
      { header: 'ISRC / ISWC', key: 'code', width: 16 },
      { header: 'Usage', key: 'usage', width: 12 },
      { header: 'In', key: 'in', width: 13 },
      { header: 'Out', key: 'out', width: 13 },
      { header: 'Duration', key: 'duration', width: 10 },
      { header: 'Tracks', key: 'tracks', width: 10 },
      { header: 'Source', key: 'source', width: 36 },
    ]
    const head = sheet.addRow(columns.map((c) => c.header))
    head.font = { bold: true }
    columns.forEach((c, i) => (sheet.getColumn(i + 1).width = c.width))
    sheet.views = [{ state: 'frozen', ySplit: 4 }]
    const cues = musicCues(doc, assets)
    for (const q of cues) {
      const asset = q.assetId ? assets.get(q.assetId) : undefined
      const custom = asset?.custom
      sheet.addRow([
        q.number,
        pick(custom, 'title') || q.name.replace(/\.[^.]{2,5}$/, ''),
        pick(custom, 'composer'),
        pick(custom, 'publisher'),
        pick(custom, 'pro', 'society'),
        pick(custom, 'isrc', 'iswc'),
        pick(custom, 'usage') || 'Background',
        tc(doc.start + q.record),
        tc(doc.start + q.end),
        clock(q.end - q.record, doc),
        q.tracks.join(' '),
        asset?.path ?? q.key.replace(/^(asset|file):/, ''),
      ])
    }
    rows = cues.length
    sheet.addRow([])
    sheet.addRow(['Total music', '', '', '', '', '', '', '', '', clock(cues.reduce((n, q) => n + q.end - q.record, 0), doc)]).font = { bold: true }
  }
  return { buffer: Buffer.from(await workbook.xlsx.writeBuffer()), rows }
}
