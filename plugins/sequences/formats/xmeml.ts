import { clipEnd, clipLength, fileNameOf, ordered, sequenceLength, type SequenceClip, type SequenceDoc, type SequenceMarker } from '../model.js'
import { canDrop, convertFrames, framesOfTimecode, nominal, rateOfTimebase, timecode, type Rate } from '../time.js'
import { SequenceFormatError, xmlText as x } from './errors.js'
import { parseXml, textOf } from './xml.js'

/**
 * Final Cut Pro 7 XML, `xmeml` version 4 as Premiere writes it (NLE-FORMATS.md §5): the sequence
 * with its video and audio tracks of clipitems, one `<file>` per source (later uses refer to it by
 * id), sequence markers. Premiere and Resolve import it.
 */

const rateXml = (r: Rate) => `<rate><timebase>${nominal(r)}</timebase><ntsc>${r.den === 1001 ? 'TRUE' : 'FALSE'}</ntsc></rate>`

/** one `<file>` per source: the asset, else the URL, else the clip name */
const sourceKey = (c: SequenceClip) => (c.assetId ? `asset:${c.assetId}` : c.url ? `url:${c.url}` : `name:${c.name}`)

export function writeXmeml(doc: SequenceDoc): string {
  const r = doc.rate
  const df = doc.dropFrame && canDrop(r)
  const files = new Map<string, string>()
  const sourceLength = new Map<string, number>()
  for (const c of doc.clips) sourceLength.set(sourceKey(c), Math.max(sourceLength.get(sourceKey(c)) ?? 0, c.sourceOut))
  let clipId = 0
  const clipitem = (c: SequenceClip, pad: string) => {
    const key = sourceKey(c)
    let file = files.get(key)
    let fileXml: string
    if (file) fileXml = `${pad}  <file id="${file}"/>\n`
    else {
      file = `file-${files.size + 1}`
      files.set(key, file)
      const start = c.sourceStart ?? 0
      fileXml =
        `${pad}  <file id="${file}">\n${pad}    <name>${x(fileNameOf(c.url) ?? c.name)}</name>\n` +
        (c.url ? `${pad}    <pathurl>${x(c.url)}</pathurl>\n` : '') +
        `${pad}    ${rateXml(r)}\n${pad}    <duration>${sourceLength.get(key)}</duration>\n` +
        `${pad}    <timecode>${rateXml(r)}<string>${timecode(start, r, df)}</string><frame>${start}</frame><displayformat>${df ? 'DF' : 'NDF'}</displayformat>` +
        (c.reel ? `<reel><name>${x(c.reel)}</name></reel>` : '') +
        `</timecode>\n${pad}    <media>${c.kind === 'video' ? '<video/>' : '<audio/>'}</media>\n${pad}  </file>\n`
    }
    clipId++
    return (
      `${pad}<clipitem id="clipitem-${clipId}">\n${pad}  <name>${x(c.name)}</name>\n${pad}  <enabled>TRUE</enabled>\n${pad}  <duration>${sourceLength.get(key)}</duration>\n${pad}  ${rateXml(r)}\n` +
      `${pad}  <start>${c.record}</start>\n${pad}  <end>${clipEnd(c)}</end>\n${pad}  <in>${c.sourceIn}</in>\n${pad}  <out>${c.sourceOut}</out>\n` +
      fileXml +
      (c.kind === 'audio' ? `${pad}  <sourcetrack><mediatype>audio</mediatype><trackindex>1</trackindex></sourcetrack>\n` : '') +
      `${pad}</clipitem>\n`
    )
  }
  const tracks = (kind: 'video' | 'audio') => {
    const clips = ordered(doc.clips.filter((c) => c.kind === kind))
    const count = clips.reduce((n, c) => Math.max(n, c.track), kind === 'video' ? 1 : 0)
    let out = ''
    for (let t = 1; t <= count; t++) out += `        <track>\n${clips.filter((c) => c.track === t).map((c) => clipitem(c, '          ')).join('')}        </track>\n`
    return out
  }
  const format = doc.width && doc.height ? `        <format><samplecharacteristics>${rateXml(r)}<width>${doc.width}</width><height>${doc.height}</height></samplecharacteristics></format>\n` : ''
  const video = tracks('video')
  const audio = tracks('audio')
  const markers = [...doc.markers]
    .sort((a, b) => a.frame - b.frame)
    .map((m) => `    <marker>\n      <name>${x(m.name)}</name>\n      <comment>${x(m.comment)}</comment>\n      <in>${m.frame}</in>\n      <out>${m.duration > 0 ? m.frame + m.duration : -1}</out>\n    </marker>\n`)
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE xmeml>\n<xmeml version="4">\n  <sequence id="sequence-1">\n' +
    `    <name>${x(doc.name)}</name>\n    <duration>${sequenceLength(doc)}</duration>\n    ${rateXml(r)}\n` +
    `    <timecode>${rateXml(r)}<string>${timecode(doc.start, r, df)}</string><frame>${doc.start}</frame><displayformat>${df ? 'DF' : 'NDF'}</displayformat></timecode>\n` +
    `    <media>\n      <video>\n${format}${video}      </video>\n      <audio>\n${audio}      </audio>\n    </media>\n` +
    markers.join('') +
    '  </sequence>\n</xmeml>\n'
  )
}

const ARRAYS = ['sequence', 'track', 'clipitem', 'marker', 'file', 'generatoritem', 'transitionitem', 'link']

const int = (v: unknown) => {
  const n = Number(textOf(v))
  return Number.isInteger(n) ? n : null
}

/** a `<timecode>` block → frames since midnight at `rate` (its `<frame>` if given, else its `<string>`) */
function startOf(tc: any, rate: Rate): { frames: number; dropFrame: boolean } | null {
  if (!tc || typeof tc !== 'object') return null
  const own = rateOfTimebase(tc.rate?.timebase, tc.rate?.ntsc) ?? rate
  const dropFrame = textOf(tc.displayformat).toUpperCase() === 'DF'
  const frame = int(tc.frame)
  if (frame !== null) return { frames: convertFrames(frame, own, rate), dropFrame }
  const text = textOf(tc.string).replace(/;/g, dropFrame ? ';' : ':')
  const parsed = text ? framesOfTimecode(text, own, dropFrame && canDrop(own)) : null
  return parsed === null ? null : { frames: convertFrames(parsed, own, rate), dropFrame }
}

/**
 * The first sequence of the file (top level, or inside a project's children). Clip times in a
 * clipitem's own timebase are converted to the sequence's; `start`/`end` of -1 (beside a
 * transition) follow from the other end and the clip's length. A clipitem that is a nested
 * sequence or has no file is kept, without a media path.
 */
export function readXmeml(text: string): SequenceDoc {
  const doc = parseXml(text, ARRAYS)
  const root = doc.xmeml
  if (!root) throw new SequenceFormatError('not an xmeml file (no <xmeml> root)')
  const seq = root.sequence?.[0] ?? root.project?.children?.sequence?.[0]
  if (!seq) throw new SequenceFormatError('the xmeml file holds no <sequence>')
  const rate = rateOfTimebase(seq.rate?.timebase, seq.rate?.ntsc)
  if (!rate) throw new SequenceFormatError('<sequence><rate> has no valid <timebase>')
  const start = startOf(seq.timecode, rate)
  const files = new Map<string, any>()
  const clips: SequenceClip[] = []
  const media = seq.media ?? {}
  for (const kind of ['video', 'audio'] as const) {
    for (const [t, track] of (media[kind]?.track ?? []).entries()) {
      for (const [i, item] of (track?.clipitem ?? []).entries()) {
        const where = `${kind} track ${t + 1}, clipitem ${i + 1}`
        if (textOf(item.enabled).toUpperCase() === 'FALSE') continue
        const own = rateOfTimebase(item.rate?.timebase, item.rate?.ntsc) ?? rate
        const inFrame = int(item.in)
        const outFrame = int(item.out)
        if (inFrame === null || outFrame === null || outFrame < inFrame) throw new SequenceFormatError(`${where}: <in>/<out> are not frame numbers`)
        let file = Array.isArray(item.file) ? item.file[0] : item.file
        const id = file?.['@id']
        if (id && (file.pathurl !== undefined || file.name !== undefined || file.timecode !== undefined)) files.set(id, file)
        else if (id) file = files.get(id) ?? file
        const length = convertFrames(outFrame - inFrame, own, rate)
        let recStart = int(item.start)
        let recEnd = int(item.end)
        if ((recStart === null || recStart < 0) && recEnd !== null && recEnd >= 0) recStart = recEnd - length
        if ((recEnd === null || recEnd < 0) && recStart !== null && recStart >= 0) recEnd = recStart + length
        if (recStart === null || recEnd === null || recStart < 0) throw new SequenceFormatError(`${where}: no record position (<start>/<end>)`)
        const sourceStart = startOf(file?.timecode, rate)
        clips.push({
          kind,
          track: t + 1,
          record: recStart,
          sourceIn: convertFrames(inFrame, own, rate),
          // the record length wins over the source's (a speed change plays more or fewer source frames)
          sourceOut: convertFrames(inFrame, own, rate) + (recEnd - recStart),
          sourceStart: sourceStart?.frames ?? (file ? 0 : null),
          name: textOf(item.name) || textOf(file?.name) || `Clip ${clips.length + 1}`,
          reel: textOf(file?.timecode?.reel?.name) || null,
          url: textOf(file?.pathurl) || null,
        })
      }
    }
  }
  const markers: SequenceMarker[] = (seq.marker ?? []).map((m: any, i: number) => {
    const at = int(m.in)
    if (at === null || at < 0) throw new SequenceFormatError(`sequence marker ${i + 1}: <in> is not a frame number`)
    const end = int(m.out)
    return { frame: at, duration: end !== null && end > at ? end - at : 0, name: textOf(m.name), comment: textOf(m.comment), color: 'red' }
  })
  const out: SequenceDoc = { name: textOf(seq.name) || 'Sequence', rate, dropFrame: Boolean(start?.dropFrame && canDrop(rate)), start: start?.frames ?? 0, clips, markers }
  if (clips.some((c) => clipLength(c) <= 0)) out.clips = clips.filter((c) => clipLength(c) > 0)
  return out
}
