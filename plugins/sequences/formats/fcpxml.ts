import { clipEnd, fileNameOf, sequenceLength, type SequenceClip, type SequenceDoc, type SequenceMarker } from '../model.js'
import { canDrop, framesOfSeconds, parseSeconds, secondsOfFrames, toRate } from '../time.js'
import { SequenceFormatError, xmlText as x } from './errors.js'
import { parseXml, textOf } from './xml.js'

/**
 * FCPXML 1.10 (NLE-FORMATS.md §6) for Final Cut Pro and Resolve. The primary storyline holds the
 * first video track, with gaps between its clips; every other clip is a connected clip (`lane`
 * ≥ 1 for video tracks 2…, `lane` ≤ -1 for audio tracks) anchored to the primary item under its
 * start. An anchored item's `offset` is in its parent's local time: parent `start` + (its record
 * position − the parent's). Sequence markers sit on the primary item under them, in its local time.
 */

interface Primary {
  record: number
  length: number
  /** local time of the item's first frame (the source in point for a clip, 0 for a gap) */
  localStart: number
  clip?: SequenceClip
  anchored: string[]
}

const sourceKey = (c: SequenceClip) => (c.assetId ? `asset:${c.assetId}` : c.url ? `url:${c.url}` : `name:${c.name}`)

export function writeFcpxml(doc: SequenceDoc): string {
  const r = doc.rate
  const s = (frames: number) => secondsOfFrames(frames, r)
  const assets = new Map<string, { id: string; clip: SequenceClip; hasVideo: boolean; hasAudio: boolean; out: number }>()
  for (const c of doc.clips) {
    const key = sourceKey(c)
    const a = assets.get(key) ?? { id: `r${assets.size + 2}`, clip: c, hasVideo: false, hasAudio: false, out: 0 }
    a.hasVideo ||= c.kind === 'video'
    a.hasAudio ||= c.kind === 'audio'
    a.out = Math.max(a.out, c.sourceOut)
    assets.set(key, a)
  }
  // the primary storyline: V1's clips, gaps filling the holes and running to the sequence's end
  const total = Math.max(1, sequenceLength(doc))
  const v1 = doc.clips.filter((c) => c.kind === 'video' && c.track === 1).sort((a, b) => a.record - b.record)
  const primary: Primary[] = []
  let at = 0
  for (const c of v1) {
    if (c.record > at) primary.push({ record: at, length: c.record - at, localStart: 0, anchored: [] })
    if (c.record < at) continue // an overlap on V1 cannot be said in a storyline; the clip stays out of it
    primary.push({ record: c.record, length: c.sourceOut - c.sourceIn, localStart: (c.sourceStart ?? 0) + c.sourceIn, clip: c, anchored: [] })
    at = clipEnd(c)
  }
  if (at < total) primary.push({ record: at, length: total - at, localStart: 0, anchored: [] })
  const inStoryline = new Set(primary.flatMap((p) => (p.clip ? [p.clip] : [])))
  /** the primary item under a frame: a binary search, the items being in record order without holes */
  const parentAt = (frame: number) => {
    let lo = 0
    let hi = primary.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (primary[mid].record <= frame) lo = mid
      else hi = mid - 1
    }
    return primary[lo]
  }
  const clipAttrs = (c: SequenceClip) => {
    const a = assets.get(sourceKey(c))!
    return `ref="${a.id}" name="${x(c.name)}" duration="${s(c.sourceOut - c.sourceIn)}" start="${s((c.sourceStart ?? 0) + c.sourceIn)}"`
  }
  for (const c of doc.clips) {
    if (inStoryline.has(c)) continue
    const parent = parentAt(c.record)
    const lane = c.kind === 'video' ? Math.max(1, c.track - 1) : -c.track
    const audio = c.kind === 'audio' ? ' srcEnable="audio"' : ''
    parent.anchored.push(`<asset-clip lane="${lane}" offset="${s(parent.localStart + c.record - parent.record)}" ${clipAttrs(c)}${audio}/>`)
  }
  for (const m of doc.markers) {
    const parent = parentAt(m.frame)
    const value = m.name || m.comment
    const note = m.name && m.comment ? ` note="${x(m.comment)}"` : ''
    parent.anchored.push(`<marker start="${s(parent.localStart + m.frame - parent.record)}" duration="${s(Math.max(1, m.duration))}" value="${x(value)}"${note}/>`)
  }
  // the DTD's order inside an asset-clip or a gap: anchored items first, then markers
  const children = (p: Primary) => [...p.anchored.filter((a) => !a.startsWith('<marker')), ...p.anchored.filter((a) => a.startsWith('<marker'))]
  const spine = primary.map((p) => {
    const kids = children(p)
    const open = p.clip ? `<asset-clip offset="${s(p.record)}" ${clipAttrs(p.clip)}` : `<gap name="Gap" offset="${s(p.record)}" duration="${s(p.length)}" start="0s"`
    const tag = p.clip ? 'asset-clip' : 'gap'
    return kids.length ? `          ${open}>\n${kids.map((k) => `            ${k}\n`).join('')}          </${tag}>\n` : `          ${open}/>\n`
  })
  const df = doc.dropFrame && canDrop(r)
  const tcFormat = canDrop(r) ? ` tcFormat="${df ? 'DF' : 'NDF'}"` : ''
  const size = doc.width && doc.height ? ` width="${doc.width}" height="${doc.height}"` : ''
  const resources = [...assets.values()].map((a) => {
    const src = a.clip.url ?? `file:///${encodeURIComponent(a.clip.name)}`
    return `    <asset id="${a.id}" name="${x(fileNameOf(a.clip.url) ?? a.clip.name)}" start="${s(a.clip.sourceStart ?? 0)}" duration="${s(a.out)}" hasVideo="${a.hasVideo ? 1 : 0}" hasAudio="${a.hasAudio ? 1 : 0}"${a.hasVideo ? ' format="r1"' : ''}>\n      <media-rep kind="original-media" src="${x(src)}"/>\n    </asset>\n`
  })
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE fcpxml>\n<fcpxml version="1.10">\n  <resources>\n' +
    `    <format id="r1" frameDuration="${s(1)}"${size}/>\n` +
    resources.join('') +
    '  </resources>\n  <library>\n' +
    `    <event name="${x(doc.name)}">\n      <project name="${x(doc.name)}">\n        <sequence format="r1" duration="${s(total)}" tcStart="${s(doc.start)}"${tcFormat}>\n          <spine>\n` +
    spine.join('').replace(/^ {10}/gm, '            ') +
    '          </spine>\n        </sequence>\n      </project>\n    </event>\n  </library>\n</fcpxml>\n'
  )
}

const ARRAYS = ['asset', 'format', 'media', 'media-rep', 'event', 'project', 'spine', 'clip', 'asset-clip', 'ref-clip', 'gap', 'video', 'audio', 'marker', 'chapter-marker', 'sync-clip', 'mc-clip', 'transition', 'title']
const ITEMS = ['asset-clip', 'clip', 'ref-clip', 'gap', 'sync-clip', 'mc-clip', 'title', 'video', 'audio']

/**
 * The first project's sequence (or the first sequence anywhere): clips of the primary storyline
 * and every connected clip and secondary storyline, as tracks by lane; markers on any item become
 * sequence markers. Media are found through `ref` on the item or the first `video`/`audio`
 * (or `asset-clip`) inside it; a `ref-clip` (compound clip) is kept without a media path.
 */
export function readFcpxml(text: string): SequenceDoc {
  const doc = parseXml(text, ARRAYS)
  const root = doc.fcpxml
  if (!root) throw new SequenceFormatError('not an FCPXML file (no <fcpxml> root)')
  const resources = root.resources ?? {}
  const formats = new Map<string, any>((resources.format ?? []).map((f: any) => [f['@id'], f]))
  const assets = new Map<string, any>((resources.asset ?? []).map((a: any) => [a['@id'], a]))
  const findSequence = (node: any): { sequence: any; name: string } | null => {
    for (const event of node?.event ?? []) for (const project of event.project ?? []) if (project.sequence) return { sequence: project.sequence, name: project['@name'] ?? event['@name'] }
    for (const project of node?.project ?? []) if (project.sequence) return { sequence: project.sequence, name: project['@name'] }
    return null
  }
  const found = findSequence(root.library) ?? findSequence(root) ?? findSequence({ event: root.event })
  if (!found) throw new SequenceFormatError('the FCPXML file holds no project with a <sequence>')
  const seq = found.sequence
  const format = formats.get(seq['@format'])
  const frame = parseSeconds(format?.['@frameDuration'])
  const rate = frame && frame.num > 0 ? toRate(`${frame.den}/${frame.num}`) : null
  if (!rate) throw new SequenceFormatError(`the sequence's format "${seq['@format'] ?? ''}" has no frameDuration`)
  const f = (attr: unknown, where: string, fallback?: number): number => {
    if (attr === undefined && fallback !== undefined) return fallback
    const sec = parseSeconds(attr as string)
    if (!sec) throw new SequenceFormatError(`${where}: "${String(attr).slice(0, 40)}" is not an FCPXML time`)
    return framesOfSeconds(sec, rate)
  }
  const clips: SequenceClip[] = []
  const markers: SequenceMarker[] = []
  const mediaOf = (item: any): any => {
    if (item['@ref'] && assets.has(item['@ref'])) return assets.get(item['@ref'])
    for (const kind of ['video', 'audio', 'asset-clip'] as const) for (const child of item[kind] ?? []) {
      const m = mediaOf(child)
      if (m) return m
    }
    for (const gap of item.gap ?? []) {
      const m = mediaOf(gap)
      if (m) return m
    }
    return null
  }
  /**
   * The items of a storyline (`storyline`: every item, lane-less ones in sequence) or the items
   * anchored to one item (only those with a `lane`: lane-less children of a clip are its own media).
   * `parentRecord`/`parentStart` place them: record = parent's record + offset − parent's local start.
   */
  const visit = (node: any, parentRecord: number, parentStart: number, lane: number, where: string, storyline: boolean) => {
    for (const kind of ITEMS) {
      for (const [i, item] of (node[kind] ?? []).entries()) {
        if (!storyline && item['@lane'] === undefined) continue
        const here = `${where}/${kind}[${i + 1}]`
        const itemLane = item['@lane'] !== undefined ? Number(item['@lane']) : lane
        const record = parentRecord + f(item['@offset'], `${here} offset`, parentStart) - parentStart
        const localStart = f(item['@start'], `${here} start`, 0)
        const length = f(item['@duration'], `${here} duration`)
        if (kind !== 'gap' && length > 0) {
          const media = mediaOf(item)
          const mediaStart = media ? f(media['@start'], `asset ${media['@id']} start`, 0) : 0
          const src = media?.['media-rep']?.[0]?.['@src'] ?? media?.['media-rep']?.['@src'] ?? media?.['@src'] ?? null
          const audio = kind === 'audio' || itemLane < 0 || item['@srcEnable'] === 'audio' || (media && media['@hasVideo'] !== '1' && media['@hasAudio'] === '1')
          const sourceIn = localStart - mediaStart
          clips.push({
            kind: audio ? 'audio' : 'video',
            track: audio ? Math.max(1, -itemLane) : Math.max(0, itemLane) + 1,
            record,
            sourceIn,
            sourceOut: sourceIn + length,
            sourceStart: media ? mediaStart : null,
            name: item['@name'] ?? media?.['@name'] ?? kind,
            url: src,
          })
        }
        for (const mk of ['marker', 'chapter-marker'] as const)
          for (const [j, m] of (item[mk] ?? []).entries()) {
            const at = record + f(m['@start'], `${here}/${mk}[${j + 1}] start`) - localStart
            const duration = f(m['@duration'], `${here}/${mk}[${j + 1}] duration`, 0)
            markers.push({ frame: at, duration: duration > 1 ? duration : 0, name: m['@value'] ?? '', comment: m['@note'] ?? '', color: mk === 'chapter-marker' ? 'orange' : m['@completed'] === '1' ? 'green' : m['@completed'] === '0' ? 'red' : 'blue' })
          }
        visit(item, record, localStart, itemLane, here, false)
        for (const [j, sp] of (item.spine ?? []).entries()) {
          const spRecord = record + f(sp['@offset'], `${here}/spine[${j + 1}] offset`, localStart) - localStart
          visit(sp, spRecord, 0, sp['@lane'] !== undefined ? Number(sp['@lane']) : itemLane, `${here}/spine[${j + 1}]`, true)
        }
      }
    }
  }
  for (const [i, spine] of (seq.spine ?? []).entries()) visit(spine, 0, 0, 0, `sequence/spine[${i + 1}]`, true)
  const start = f(seq['@tcStart'], 'sequence tcStart', 0)
  return {
    name: textOf(found.name) || 'Sequence',
    rate,
    dropFrame: seq['@tcFormat'] === 'DF' && canDrop(rate),
    start,
    width: Number(format?.['@width']) || null,
    height: Number(format?.['@height']) || null,
    clips: clips.sort((a, b) => a.record - b.record),
    markers: markers.sort((a, b) => a.frame - b.frame),
  }
}
