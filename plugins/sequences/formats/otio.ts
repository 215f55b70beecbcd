import { normalizeColor } from '../../markers/index.js'
import { clipEnd, ordered, type SequenceClip, type SequenceDoc, type SequenceMarker } from '../model.js'
import { canDrop, framesOfRationalTime, rateValue, type Rate } from '../time.js'
import { SequenceFormatError } from './errors.js'

/**
 * OpenTimelineIO JSON (NLE-FORMATS.md §7): Timeline.1 → Stack.1 → Track.1 (Video/Audio) of Clip.2
 * and Gap.1. Source ranges are in the media's own time (its start timecode included), as OTIO's
 * adapters write them; the available range of the reference carries the media's start. Markers go
 * on the stack (OTIO's converters drop track-level markers). Our ids travel in `metadata.mamkit`.
 */

const rt = (value: number, rate: number) => ({ OTIO_SCHEMA: 'RationalTime.1', rate, value })
const range = (start: number, duration: number, rate: number) => ({ OTIO_SCHEMA: 'TimeRange.1', start_time: rt(start, rate), duration: rt(duration, rate) })
const OTIO_COLORS = ['PINK', 'RED', 'ORANGE', 'YELLOW', 'GREEN', 'CYAN', 'BLUE', 'PURPLE', 'MAGENTA', 'BLACK', 'WHITE']

export function writeOtio(doc: SequenceDoc): string {
  const rate = rateValue(doc.rate)
  const tracks = (kind: 'video' | 'audio') => {
    const clips = ordered(doc.clips.filter((c) => c.kind === kind))
    const count = clips.reduce((n, c) => Math.max(n, c.track), kind === 'video' ? 1 : 0)
    const out = []
    for (let t = 1; t <= count; t++) {
      const children: unknown[] = []
      let at = 0
      for (const c of clips.filter((c) => c.track === t)) {
        if (c.record < at) continue // overlapping clips cannot share an OTIO track
        if (c.record > at) children.push({ OTIO_SCHEMA: 'Gap.1', name: '', source_range: range(0, c.record - at, rate), effects: [], markers: [], metadata: {} })
        const start = c.sourceStart ?? 0
        children.push({
          OTIO_SCHEMA: 'Clip.2',
          name: c.name,
          source_range: range(start + c.sourceIn, c.sourceOut - c.sourceIn, rate),
          media_references: {
            DEFAULT_MEDIA: c.url
              ? { OTIO_SCHEMA: 'ExternalReference.1', name: '', target_url: c.url, available_range: range(start, c.sourceOut, rate), metadata: {} }
              : { OTIO_SCHEMA: 'MissingReference.1', name: '', available_range: range(start, c.sourceOut, rate), metadata: {} },
          },
          active_media_reference_key: 'DEFAULT_MEDIA',
          effects: [],
          markers: [],
          enabled: true,
          metadata: { mamkit: { asset_id: c.assetId ?? null, reel: c.reel ?? null }, cmx_3600: c.reel ? { reel: c.reel } : undefined },
        })
        at = clipEnd(c)
      }
      out.push({ OTIO_SCHEMA: 'Track.1', name: `${kind === 'video' ? 'V' : 'A'}${t}`, kind: kind === 'video' ? 'Video' : 'Audio', source_range: null, effects: [], markers: [], enabled: true, children, metadata: {} })
    }
    return out
  }
  const markers = [...doc.markers]
    .sort((a, b) => a.frame - b.frame)
    .map((m) => ({ OTIO_SCHEMA: 'Marker.2', name: m.name, color: OTIO_COLORS.includes(m.color.toUpperCase()) ? m.color.toUpperCase() : 'RED', comment: m.comment, marked_range: range(m.frame, m.duration, rate), metadata: {} }))
  const timeline = {
    OTIO_SCHEMA: 'Timeline.1',
    name: doc.name,
    global_start_time: rt(doc.start, rate),
    metadata: { mamkit: { rate: `${doc.rate.num}/${doc.rate.den}`, drop_frame: doc.dropFrame } },
    tracks: { OTIO_SCHEMA: 'Stack.1', name: 'tracks', source_range: null, effects: [], markers, enabled: true, children: [...tracks('video'), ...tracks('audio')], metadata: {} },
  }
  return `${JSON.stringify(timeline, null, 2)}\n`
}

const num = (v: any, where: string) => {
  const n = Number(v)
  if (!Number.isFinite(n)) throw new SequenceFormatError(`${where}: not a number`)
  return n
}

/** a `RationalTime.1` → frames at the sequence's rate */
const framesOf = (t: any, to: Rate, where: string) => {
  if (!t || typeof t !== 'object') throw new SequenceFormatError(`${where}: no RationalTime`)
  const rate = num(t.rate, `${where}.rate`)
  if (rate <= 0) throw new SequenceFormatError(`${where}.rate: not positive`)
  return framesOfRationalTime(num(t.value, `${where}.value`), rate, to)
}

/** the sequence's rate: our own metadata, else the rate of the first clip's source range or the global start */
function rateOf(timeline: any, first: any): Rate {
  const own = timeline.metadata?.mamkit?.rate
  const m = typeof own === 'string' ? /^(\d+)\/(\d+)$/.exec(own) : null
  if (m) return { num: Number(m[1]), den: Number(m[2]) }
  const value = Number(first?.source_range?.start_time?.rate ?? timeline.global_start_time?.rate ?? 24)
  const fps = [23.976, 29.97, 47.952, 59.94, 119.88].find((n) => Math.abs(n - value) < 0.01)
  return fps ? { num: Math.round(fps * 1.001) * 1000, den: 1001 } : { num: Math.round(value) || 24, den: 1 }
}

export function readOtio(text: string): SequenceDoc {
  let timeline: any
  try {
    timeline = JSON.parse(text)
  } catch {
    throw new SequenceFormatError('not JSON')
  }
  if (!timeline || typeof timeline !== 'object' || !String(timeline.OTIO_SCHEMA ?? '').startsWith('Timeline.')) throw new SequenceFormatError('not an OpenTimelineIO timeline (OTIO_SCHEMA Timeline.1)')
  const stack = timeline.tracks
  const tracks: any[] = Array.isArray(stack?.children) ? stack.children : []
  const firstClip = tracks.flatMap((t) => (Array.isArray(t?.children) ? t.children : [])).find((c) => String(c?.OTIO_SCHEMA).startsWith('Clip.'))
  const rate = rateOf(timeline, firstClip)
  const start = timeline.global_start_time ? framesOf(timeline.global_start_time, rate, 'global_start_time') : 0
  const clips: SequenceClip[] = []
  const markers: SequenceMarker[] = []
  const counters = { video: 0, audio: 0 }
  const readMarkers = (list: unknown, offset: number, where: string) => {
    for (const [i, m] of (Array.isArray(list) ? list : []).entries()) {
      const r = m?.marked_range
      markers.push({
        frame: offset + framesOf(r?.start_time, rate, `${where}.markers[${i}].marked_range.start_time`),
        duration: r?.duration ? framesOf(r.duration, rate, `${where}.markers[${i}].marked_range.duration`) : 0,
        name: String(m?.name ?? ''),
        comment: String(m?.comment ?? ''),
        color: normalizeColor(String(m?.color ?? 'red')) ?? 'red',
      })
    }
  }
  readMarkers(stack?.markers, 0, 'tracks')
  for (const [t, track] of tracks.entries()) {
    if (!String(track?.OTIO_SCHEMA).startsWith('Track.')) continue
    const kind = track.kind === 'Audio' ? 'audio' : 'video'
    const number = ++counters[kind]
    let at = 0
    for (const [i, item] of (Array.isArray(track.children) ? track.children : []).entries()) {
      const where = `tracks.children[${t}].children[${i}]`
      const schema = String(item?.OTIO_SCHEMA ?? '')
      if (schema.startsWith('Transition.')) continue // transitions overlap their neighbours and take no place of their own
      const sr = item?.source_range
      const length = sr?.duration ? framesOf(sr.duration, rate, `${where}.source_range.duration`) : 0
      if (schema.startsWith('Clip.')) {
        const refs = item.media_references ?? {}
        const ref = refs[item.active_media_reference_key ?? 'DEFAULT_MEDIA'] ?? item.media_reference ?? null
        const mediaStart = ref?.available_range?.start_time ? framesOf(ref.available_range.start_time, rate, `${where} available_range`) : 0
        const sourceAt = sr?.start_time ? framesOf(sr.start_time, rate, `${where}.source_range.start_time`) : mediaStart
        const own = item.metadata?.mamkit ?? {}
        clips.push({
          kind,
          track: number,
          record: at,
          sourceIn: sourceAt - mediaStart,
          sourceOut: sourceAt - mediaStart + length,
          sourceStart: mediaStart,
          name: String(item.name || 'Clip'),
          reel: own.reel ?? item.metadata?.cmx_3600?.reel ?? null,
          url: typeof ref?.target_url === 'string' ? ref.target_url : null,
        })
        readMarkers(item.markers, at - sourceAt, where)
      }
      at += length
    }
    readMarkers(track.markers, 0, `tracks.children[${t}]`)
  }
  return { name: String(timeline.name || 'Timeline'), rate, dropFrame: Boolean(timeline.metadata?.mamkit?.drop_frame) && canDrop(rate), start, clips: clips.filter((c) => c.sourceOut > c.sourceIn), markers }
}
