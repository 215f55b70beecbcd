import { normalizeColor } from '../../markers/index.js'
import { clipEnd, fileNameOf, pathOfUrl, sequenceLength, type SequenceClip, type SequenceDoc, type SequenceMarker } from '../model.js'
import { canDrop, framesOfTimecode, timecode, type Rate } from '../time.js'
import { SequenceFormatError, oneLine } from './errors.js'

/**
 * CMX3600 EDL (NLE-FORMATS.md §4): one event per clip, `V` for the first video track and `A`,
 * `A2` … for audio tracks; other video tracks cannot be said in an EDL and are left out (the writer
 * reports them). Source timecode = the source's start timecode + the clip's in point; record
 * timecode = the sequence's start + the clip's position. Markers are `* LOC:` comments.
 */

const TC = String.raw`(\d{2}:\d{2}:\d{2}[:;]\d{2})`
const EVENT = new RegExp(String.raw`^(\d{3,6})\s+(\S+)\s+(\S+)\s+(C|D|W\d+|K\w*)(?:\s+(\d+))?\s+${TC}\s+${TC}\s+${TC}\s+${TC}\s*$`)

/** a reel name as the EDL column takes it: letters, digits, underscore; `AX` (auxiliary) when none */
const reelOf = (clip: SequenceClip) => (clip.reel ?? '').replace(/[^A-Za-z0-9_]/g, '_').slice(0, 32) || 'AX'

function channel(clip: SequenceClip): string | null {
  if (clip.kind === 'video') return clip.track === 1 ? 'V' : null
  return clip.track === 1 ? 'A' : `A${clip.track}`
}

export function writeEdl(doc: SequenceDoc): { text: string; skipped: number } {
  const rate = doc.rate
  const df = doc.dropFrame && canDrop(rate)
  const tc = (frames: number) => timecode(frames, rate, df)
  const lines = [`TITLE: ${oneLine(doc.name).slice(0, 70)}`, `FCM: ${df ? 'DROP FRAME' : 'NON-DROP FRAME'}`, '']
  const events = doc.clips.filter((c) => channel(c) !== null).sort((a, b) => a.record - b.record || (a.kind === b.kind ? a.track - b.track : a.kind === 'video' ? -1 : 1))
  const markers = [...doc.markers].sort((a, b) => a.frame - b.frame)
  let m = 0
  events.forEach((clip, i) => {
    const srcStart = (clip.sourceStart ?? 0) + clip.sourceIn
    const srcEnd = (clip.sourceStart ?? 0) + clip.sourceOut
    const number = String(i + 1).padStart(3, '0')
    lines.push(`${number}  ${reelOf(clip).padEnd(8)} ${channel(clip)!.padEnd(5)} C        ${tc(srcStart)} ${tc(srcEnd)} ${tc(doc.start + clip.record)} ${tc(doc.start + clipEnd(clip))}`)
    lines.push(`* FROM CLIP NAME:  ${oneLine(clip.name)}`)
    const path = pathOfUrl(clip.url)
    if (path) lines.push(`* FROM FILE: ${oneLine(path)}`)
    // a locator follows the event it falls in (the last event for those after every event)
    const next = events[i + 1]?.record ?? Infinity
    while (m < markers.length && markers[m].frame < next) {
      const marker = markers[m++]
      const text = oneLine([marker.name, marker.comment].filter(Boolean).join(': '))
      lines.push(`* LOC: ${tc(doc.start + marker.frame)} ${marker.color.toUpperCase().padEnd(7)} ${text}`)
    }
  })
  return { text: `${lines.join('\n')}\n`, skipped: doc.clips.length - events.length }
}

/** tracks an EDL channel field names: `V`, `A`, `A2`, `AA` (A1+A2), `B` (V+A1), `AA/V` … */
function tracksOf(field: string): Array<{ kind: 'video' | 'audio'; track: number }> {
  const f = field.toUpperCase()
  const out: Array<{ kind: 'video' | 'audio'; track: number }> = []
  if (f === 'B') return [{ kind: 'video', track: 1 }, { kind: 'audio', track: 1 }]
  for (const part of f.split('/')) {
    if (part === 'V') out.push({ kind: 'video', track: 1 })
    else if (part === 'A') out.push({ kind: 'audio', track: 1 })
    else if (part === 'AA') out.push({ kind: 'audio', track: 1 }, { kind: 'audio', track: 2 })
    else if (/^A\d{1,2}$/.test(part)) out.push({ kind: 'audio', track: Number(part.slice(1)) })
    else if (/^V\d{1,2}$/.test(part)) out.push({ kind: 'video', track: Number(part.slice(1)) })
  }
  return out
}

/**
 * Reads events, clip names (`* FROM CLIP NAME:`), source files (`* FROM CLIP:`, `* FROM FILE:`,
 * `* SOURCE FILE:`) and locators. A dissolve's incoming clip starts at the dissolve's record in;
 * zero-length events (the outgoing side of a dissolve) are no clips. An EDL carries no frame rate:
 * the caller gives it. Source timecodes stay timecode frames (`sourceStart` null) until conformed.
 */
export function readEdl(text: string, rate: Rate): SequenceDoc {
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/)
  let name = ''
  let dropFrame: boolean | null = null
  const clips: Array<SequenceClip & { recordTc: number }> = []
  const markers: Array<SequenceMarker & { tc: number }> = []
  let last: Array<SequenceClip & { recordTc: number }> = []
  let events = 0
  const tcAt = (text: string, where: string) => {
    const f = framesOfTimecode(text, rate, text.includes(';') ? true : dropFrame === true && canDrop(rate) ? undefined : false)
    if (f === null) throw new SequenceFormatError(`${where}: "${text}" is not a timecode at ${rate.num}/${rate.den} fps`)
    return f
  }
  for (const [i, raw] of lines.entries()) {
    const line = raw.trimEnd()
    const where = `line ${i + 1}`
    if (/^TITLE:/i.test(line)) {
      name = line.replace(/^TITLE:\s*/i, '').trim()
      continue
    }
    if (/^FCM:/i.test(line)) {
      dropFrame = /DROP FRAME/i.test(line) && !/NON-DROP/i.test(line)
      continue
    }
    const event = EVENT.exec(line)
    if (event) {
      events++
      // the source out is checked, not kept: a clip's source out is its source in plus its record length
      // (the two differ only under a speed change, whose M2 line is not read)
      const [srcIn, , recIn, recOut] = [event[6], event[7], event[8], event[9]].map((t) => tcAt(t, where))
      last = []
      if (recOut <= recIn) continue
      for (const t of tracksOf(event[3])) {
        const clip = { kind: t.kind, track: t.track, record: 0, recordTc: recIn, sourceIn: srcIn, sourceOut: srcIn + (recOut - recIn), sourceStart: null, name: '', reel: event[2] === 'AX' || event[2] === 'BL' ? null : event[2], url: null }
        clips.push(clip)
        last.push(clip)
      }
      continue
    }
    const comment = /^\*?\s*(FROM CLIP NAME|TO CLIP NAME|FROM CLIP|FROM FILE|SOURCE FILE|LOC)\s*:\s*(.*)$/i.exec(line)
    if (!comment) continue
    const key = comment[1].toUpperCase()
    const value = comment[2].trim()
    if (key === 'LOC') {
      const loc = new RegExp(String.raw`^${TC}\s+(\S+)\s*(.*)$`).exec(value)
      if (!loc) continue
      markers.push({ tc: tcAt(loc[1], where), frame: 0, duration: 0, name: loc[3].trim(), comment: '', color: normalizeColor(loc[2]) ?? 'red' })
    } else if (key === 'FROM CLIP NAME' || key === 'TO CLIP NAME') {
      // a dissolve lists the outgoing and the incoming name: the incoming one names the clip
      for (const c of last) if (!c.name || key === 'TO CLIP NAME') c.name = value
    } else {
      for (const c of last) c.url ??= value
    }
  }
  if (!events) throw new SequenceFormatError('no EDL events (lines such as "001  REEL V C 01:00:00:00 01:00:01:00 01:00:00:00 01:00:01:00")')
  const start = clips.reduce((n, c) => Math.min(n, c.recordTc), markers.reduce((n, m) => Math.min(n, m.tc), Infinity))
  const doc: SequenceDoc = {
    name: name || 'EDL',
    rate,
    dropFrame: dropFrame === true && canDrop(rate),
    start: Number.isFinite(start) ? start : 0,
    clips: clips.map(({ recordTc, ...c }) => ({ ...c, record: recordTc - start, name: c.name || fileNameOf(c.url) || c.reel || `Event` })),
    markers: markers.map(({ tc, ...m }) => ({ ...m, frame: tc - start })),
  }
  if (sequenceLength(doc) < 0) throw new SequenceFormatError('record timecodes go backwards')
  return doc
}
