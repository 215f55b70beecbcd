import { XMLParser } from 'fast-xml-parser'
import { avid, fcpx, normalizeColor, premiere, resolve, DEFAULT_COLOR, type MarkerColor } from './colors.js'
import { canDrop, frameOf, nominal, parseRationalSeconds, rateValue, rationalSeconds, tcOf, type TimecodeBase } from './timecode.js'
import type { PlainMarker } from './service.js'

/**
 * Marker lists in the editing suites' formats (NLE-FORMATS.md §2–§6): writers for every format the
 * download offers, and readers for the ones an upload may carry. Times are frames on the asset's
 * timeline; the files carry timecode in the asset's start timecode (`base`).
 */

export const EXPORT_FORMATS = ['avid_xml', 'avid_txt', 'edl', 'fcp7_xml', 'fcpxml', 'resolve_edl'] as const
export type ExportFormat = (typeof EXPORT_FORMATS)[number]

export interface ExportClip {
  /** the clip name the suite shows (the asset's clip name) */
  name: string
  base: TimecodeBase
  /** frames in the asset (its duration); at least the last marker's out + 1 */
  frames: number
  markers: PlainMarker[]
  /** `file:///…` of the original, for formats that reference media */
  url?: string
  width?: number
  height?: number
  reel?: string
  hasVideo: boolean
  hasAudio: boolean
}

export const FORMAT_FILES: Record<ExportFormat, { extension: string; type: string }> = {
  avid_xml: { extension: 'xml', type: 'application/xml; charset=utf-8' },
  avid_txt: { extension: 'txt', type: 'text/plain; charset=utf-8' },
  edl: { extension: 'edl', type: 'text/plain; charset=utf-8' },
  fcp7_xml: { extension: 'xml', type: 'application/xml; charset=utf-8' },
  fcpxml: { extension: 'fcpxml', type: 'application/xml; charset=utf-8' },
  resolve_edl: { extension: 'edl', type: 'text/plain; charset=utf-8' },
}

const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '')
/** one line: suites' marker lists and EDL comments have no line breaks or tabs inside a field */
const oneLine = (s: string) => s.replace(/\r\n|\r|\n|\t/g, ' ')

export function writeMarkers(format: ExportFormat, clip: ExportClip): string {
  switch (format) {
    case 'avid_xml':
      return avidXml(clip)
    case 'avid_txt':
      return avidText(clip)
    case 'edl':
      return locatorEdl(clip)
    case 'fcp7_xml':
      return xmeml(clip)
    case 'fcpxml':
      return fcpxml(clip)
    case 'resolve_edl':
      return resolveEdl(clip)
  }
}

// ---------------------------------------------------------------- Avid marker XML (§2)

function avidXml(clip: ExportClip): string {
  const attr = (kind: 1 | 2, name: string, value: string | number) =>
    `        <ListElem>\n          <AvProp id="ATTR" name="OMFI:ATTB:Kind" type="int32">${kind}</AvProp>\n          <AvProp id="ATTR" name="OMFI:ATTB:Name" type="string">${name}</AvProp>\n          <AvProp id="ATTR" name="OMFI:ATTB:${kind === 1 ? 'IntAttribute' : 'StringAttribute'}" type="${kind === 1 ? 'int32' : 'string'}">${typeof value === 'number' ? value : xml(value)}</AvProp>\n        </ListElem>\n`
  const blocks = clip.markers.map((m) => {
    const items: string[] = [
      attr(2, '_ATN_CRM_USER', m.author ?? ''),
      attr(2, '_ATN_CRM_COM', oneLine(m.text)),
      attr(2, '_ATN_CRM_TC', tcOf(clip.base, m.in)),
      attr(2, '_ATN_CRM_TRK', m.track ?? 'V1'),
      attr(2, '_ATN_CRM_COLOR', avid.legacy(m.color)),
    ]
    const extended = avid.extended(m.color)
    if (extended) items.push(attr(2, '_ATN_CRM_COLOR_EXTENDED', extended))
    items.push(attr(1, '_ATN_CRM_LENGTH', m.out - m.in + 1))
    if (m.guid) items.push(attr(2, '_ATN_CRM_ID', m.guid))
    if (m.createdAt) items.push(attr(1, '_ATN_CRM_LONG_CREATE_DATE', Math.floor(m.createdAt.getTime() / 1000)))
    return `    <AvClass id="ATTR">\n      <AvProp id="ATTR" name="__OMFI:ATTR:NumItems" type="int32">${items.length}</AvProp>\n      <List id="OMFI:ATTR:AttrRefs">\n${items.join('')}        <ListElem/>\n      </List>\n    </AvClass>\n`
  })
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE Avid:StreamItems SYSTEM "AvidSettingsFile.dtd">\n<Avid:StreamItems xmlns:Avid="http://www.avid.com">\n  <Avid:XMLFileData>\n' +
    '    <AvProp name="DomainMagic" type="string">Domain</AvProp>\n    <AvProp name="DomainKey" type="char4">58424a44</AvProp>\n' +
    blocks.join('') +
    '  </Avid:XMLFileData>\n</Avid:StreamItems>\n'
  )
}

// ---------------------------------------------------------------- Avid marker list, tab-delimited (§3)

/** eight columns: name (the author), timecode, track, legacy colour, comment, length, user, extended colour */
function avidText(clip: ExportClip): string {
  return clip.markers
    .map((m) => [m.author ?? '', tcOf(clip.base, m.in), m.track ?? 'V1', avid.legacy(m.color).toLowerCase(), m.text, String(m.out - m.in + 1), m.author ?? '', (avid.extended(m.color) ?? '').toLowerCase()].map(oneLine).join('\t'))
    .map((line) => `${line}\n`)
    .join('')
}

// ---------------------------------------------------------------- CMX3600 EDL with locators (§4)

const edlReel = (clip: ExportClip) => (clip.reel ?? 'AX').replace(/[^A-Za-z0-9_]/g, '_').slice(0, 8) || 'AX'
const fcm = (base: TimecodeBase) => (base.dropFrame ? 'DROP FRAME' : 'NON-DROP FRAME')
const edlTitle = (name: string) => oneLine(name).slice(0, 70)

/** one event covering the clip (source = record = the clip's timecode), markers as `* LOC:` comments */
function locatorEdl(clip: ExportClip): string {
  const start = tcOf(clip.base, 0)
  const end = tcOf(clip.base, clip.frames)
  const reel = edlReel(clip).padEnd(8)
  const lines = [`TITLE: ${edlTitle(clip.name)}`, `FCM: ${fcm(clip.base)}`, '', `001  ${reel} V     C        ${start} ${end} ${start} ${end}`, `* FROM CLIP NAME:  ${oneLine(clip.name)}`]
  for (const m of clip.markers) lines.push(`* LOC: ${tcOf(clip.base, m.in)} ${avid.legacy(m.color).toUpperCase().padEnd(7)} ${oneLine(m.text)}`)
  return `${lines.join('\n')}\n`
}

// ---------------------------------------------------------------- DaVinci Resolve marker EDL (§4.1)

function resolveEdl(clip: ExportClip): string {
  const lines = [`TITLE: ${edlTitle(clip.name)}`, `FCM: ${fcm(clip.base)}`, '']
  clip.markers.forEach((m, i) => {
    const a = tcOf(clip.base, m.in)
    const b = tcOf(clip.base, m.in + 1)
    lines.push(`${String(i + 1).padStart(3, '0')}  001      V     C        ${a} ${b} ${a} ${b}  `)
    // the note first (Resolve reads it as the marker's note), then colour, name and duration
    lines.push(`${noteText(m.text)} |C:${resolve.write(m.color)} |M:${oneLine(m.text).slice(0, 80) || 'Marker'} |D:${m.out - m.in + 1}`, '')
  })
  return `${lines.join('\n')}\n`
}
/** a note must not start with a digit (Resolve would take it for an event) nor contain the field separator */
const noteText = (text: string) => {
  const t = oneLine(text).replace(/\|/g, '/')
  return /^\d/.test(t) ? ` ${t}` : t
}

// ---------------------------------------------------------------- Final Cut Pro 7 XML / xmeml (§5)

function xmemlRate(base: TimecodeBase) {
  return `<rate><timebase>${nominal(base.rate)}</timebase><ntsc>${base.rate.den === 1001 ? 'TRUE' : 'FALSE'}</ntsc></rate>`
}

/** a master clip carrying clip markers (imports into Premiere as a clip with its markers) */
function xmeml(clip: ExportClip): string {
  const markers = clip.markers.map((m) => {
    const color = premiere.write(m.color)
    return (
      `    <marker>\n      <name>${xml(oneLine(m.text).slice(0, 64))}</name>\n      <comment>${xml(m.text)}</comment>\n      <in>${m.in}</in>\n      <out>${m.out === m.in ? -1 : m.out + 1}</out>\n` +
      (color === null ? '' : `      <pproColor>${color}</pproColor>\n`) +
      '    </marker>\n'
    )
  })
  const file = clip.url ? `      <file id="file-1">\n        <name>${xml(clip.name)}</name>\n        <pathurl>${xml(clip.url)}</pathurl>\n        ${xmemlRate(clip.base)}\n        <duration>${clip.frames}</duration>\n      </file>\n` : ''
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE xmeml>\n<xmeml version="4">\n  <clip id="clip-1">\n' +
    `    <name>${xml(clip.name)}</name>\n    <duration>${clip.frames}</duration>\n    ${xmemlRate(clip.base)}\n` +
    `    <timecode>\n      ${xmemlRate(clip.base)}\n      <string>${tcOf(clip.base, 0)}</string>\n      <frame>${clip.base.start}</frame>\n      <displayformat>${clip.base.dropFrame ? 'DF' : 'NDF'}</displayformat>\n    </timecode>\n` +
    (file ? `    <media>\n      <video>\n        <track>\n          <clipitem id="clipitem-1">\n            <name>${xml(clip.name)}</name>\n            <duration>${clip.frames}</duration>\n            <in>0</in>\n            <out>${clip.frames}</out>\n${file.replace(/^/gm, '      ')}          </clipitem>\n        </track>\n      </video>\n    </media>\n` : '') +
    markers.join('') +
    '  </clip>\n</xmeml>\n'
  )
}

// ---------------------------------------------------------------- FCPXML 1.10 (§6)

function fcpxml(clip: ExportClip): string {
  const r = clip.base.rate
  const start = rationalSeconds(clip.base.start, r)
  const duration = rationalSeconds(clip.frames, r)
  const format = `<format id="r1" frameDuration="${rationalSeconds(1, r)}"${clip.width ? ` width="${clip.width}" height="${clip.height}"` : ''}/>`
  const src = clip.url ?? `file:///${encodeURIComponent(clip.name)}`
  const markers = clip.markers.map((m) => {
    const at = `start="${rationalSeconds(clip.base.start + m.in, r)}" duration="${rationalSeconds(m.out - m.in + 1, r)}" value="${xml(oneLine(m.text))}"`
    const note = m.author ? ` note="${xml(oneLine(m.author))}"` : ''
    switch (fcpx.kind(m.color)) {
      case 'chapter':
        return `        <chapter-marker ${at}${note} posterOffset="0s"/>\n`
      case 'todo':
        return `        <marker ${at} completed="0"${note}/>\n`
      case 'done':
        return `        <marker ${at} completed="1"${note}/>\n`
      default:
        return `        <marker ${at}${note}/>\n`
    }
  })
  const tcFormat = canDrop(r) ? ` tcFormat="${clip.base.dropFrame ? 'DF' : 'NDF'}"` : ''
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE fcpxml>\n<fcpxml version="1.10">\n  <resources>\n' +
    `    ${format}\n` +
    `    <asset id="r2" name="${xml(clip.name)}" start="${start}" duration="${duration}" hasVideo="${clip.hasVideo ? 1 : 0}" hasAudio="${clip.hasAudio ? 1 : 0}" format="r1">\n` +
    `      <media-rep kind="original-media" src="${xml(src)}"/>\n    </asset>\n  </resources>\n` +
    `  <library>\n    <event name="${xml(clip.name)}">\n      <asset-clip ref="r2" name="${xml(clip.name)}" start="${start}" duration="${duration}" format="r1"${tcFormat}>\n` +
    markers.join('') +
    '      </asset-clip>\n    </event>\n  </library>\n</fcpxml>\n'
  )
}

// ================================================================ readers

/** a marker read from a file: frames on the asset's timeline; `line` says where it came from (errors) */
export interface ReadMarker extends Omit<PlainMarker, 'id' | 'replies' | 'createdAt'> {
  source: string
}

export class FormatError extends Error {}

export const IMPORT_FORMATS = ['avid_xml', 'avid_txt', 'edl', 'fcp7_xml', 'fcpxml'] as const
export type ImportFormat = (typeof IMPORT_FORMATS)[number]

/** the format of an uploaded marker list, from its content */
export function sniffFormat(text: string): ImportFormat | null {
  const head = text.slice(0, 4096)
  if (/<Avid:StreamItems|AvidSettingsFile/.test(head)) return 'avid_xml'
  if (/<fcpxml[\s>]/.test(head)) return 'fcpxml'
  if (/<xmeml[\s>]/.test(head)) return 'fcp7_xml'
  if (/^\s*(TITLE:|FCM:|\d{3,6}\s)/m.test(head) && /\d{2}:\d{2}:\d{2}[:;]\d{2}/.test(head) && !/\t/.test(head.split('\n')[0])) return 'edl'
  if (/^[^\t\n]*\t\d{2}:\d{2}:\d{2}[:;]\d{2}\t/m.test(head)) return 'avid_txt'
  return null
}

export function readMarkers(format: ImportFormat, text: string, base: TimecodeBase): ReadMarker[] {
  switch (format) {
    case 'avid_xml':
      return readAvidXml(text, base)
    case 'avid_txt':
      return readAvidText(text, base)
    case 'edl':
      return readEdl(text, base)
    case 'fcp7_xml':
      return readXmeml(text)
    case 'fcpxml':
      return readFcpxml(text, base)
  }
}

const parser = (arrays: string[]) =>
  new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '@',
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: true,
    processEntities: true,
    // entity expansion stays bounded: no external entities, no DOCTYPE entities
    isArray: (name) => arrays.includes(name),
  })

const tcFrame = (base: TimecodeBase, tc: string, where: string) => {
  const f = frameOf(base, tc)
  if (f === null) throw new FormatError(`${where}: "${tc.slice(0, 40)}" is not a timecode at this asset's rate`)
  return f
}

const lengthFrom = (value: string | undefined) => {
  const n = value === undefined ? 1 : Number(value)
  return Number.isInteger(n) && n >= 1 ? n : 1
}

function readAvidXml(text: string, base: TimecodeBase): ReadMarker[] {
  const doc = parser(['AvClass', 'ListElem', 'AvProp'])
    .parse(text)
  const data = doc['Avid:StreamItems']?.['Avid:XMLFileData']
  if (!data) throw new FormatError('not an Avid marker XML (no Avid:StreamItems/Avid:XMLFileData)')
  const out: ReadMarker[] = []
  for (const [i, block] of (data.AvClass ?? []).entries()) {
    if (block['@id'] !== 'ATTR') continue
    const attrs: Record<string, string> = {}
    for (const el of block.List?.ListElem ?? []) {
      const props: any[] = el?.AvProp ?? []
      const name = props.find((p) => p['@name'] === 'OMFI:ATTB:Name')?.['#text']
      const value = props.find((p) => p['@name'] === 'OMFI:ATTB:StringAttribute' || p['@name'] === 'OMFI:ATTB:IntAttribute')
      if (name) attrs[name] = value === undefined ? '' : typeof value === 'object' ? String(value['#text'] ?? '') : String(value)
    }
    const where = `marker ${i + 1}`
    if (!attrs._ATN_CRM_TC) throw new FormatError(`${where}: no _ATN_CRM_TC`)
    // one tool writes a frame number instead of a timecode
    const at = /^\d+$/.test(attrs._ATN_CRM_TC) ? Number(attrs._ATN_CRM_TC) : tcFrame(base, attrs._ATN_CRM_TC, where)
    out.push({
      in: at,
      out: at + lengthFrom(attrs._ATN_CRM_LENGTH) - 1,
      text: attrs._ATN_CRM_COM ?? '',
      color: avid.read(attrs._ATN_CRM_COLOR, attrs._ATN_CRM_COLOR_EXTENDED) ?? DEFAULT_COLOR,
      track: attrs._ATN_CRM_TRK || null,
      author: attrs._ATN_CRM_USER || null,
      guid: attrs._ATN_CRM_ID || null,
      source: where,
    })
  }
  return out
}

/** six columns (user, tc, track, colour, comment, length) or eight (… user, extended colour) */
function readAvidText(text: string, base: TimecodeBase): ReadMarker[] {
  const out: ReadMarker[] = []
  for (const [i, raw] of text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/).entries()) {
    if (!raw.trim()) continue
    const cols = raw.split('\t')
    const where = `line ${i + 1}`
    if (cols.length < 5) throw new FormatError(`${where}: ${cols.length} columns; Avid marker lists have 6 or 8`)
    const at = tcFrame(base, cols[1], where)
    const color = (cols[7] ? normalizeColor(cols[7]) : null) ?? normalizeColor(cols[3] ?? '') ?? DEFAULT_COLOR
    out.push({ in: at, out: at + lengthFrom(cols[5]) - 1, text: cols[4] ?? '', color, track: cols[2] || null, author: (cols[6] || cols[0]) || null, guid: null, source: where })
  }
  return out
}

/** `* LOC:` locators of a CMX3600 EDL (Avid, Nucoda), and Resolve's marker EDL notes (`|C: |M: |D:`) */
function readEdl(text: string, base: TimecodeBase): ReadMarker[] {
  const out: ReadMarker[] = []
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/)
  let lastEvent: { at: number } | null = null
  for (const [i, line] of lines.entries()) {
    const where = `line ${i + 1}`
    const loc = /^\*\s*LOC:\s*(\d{2}:\d{2}:\d{2}[:;]\d{2})\s+(\S+)\s*(.*)$/.exec(line)
    if (loc) {
      const at = tcFrame(base, loc[1], where)
      out.push({ in: at, out: at, text: loc[3].trim(), color: normalizeColor(loc[2]) ?? DEFAULT_COLOR, track: null, author: null, guid: null, source: where })
      continue
    }
    const event = /^\d{3,6}\s+\S+\s+\S+\s+\S+(?:\s+\d+)?\s+(\d{2}:\d{2}:\d{2}[:;]\d{2})\s+(\d{2}:\d{2}:\d{2}[:;]\d{2})\s+(\d{2}:\d{2}:\d{2}[:;]\d{2})\s+(\d{2}:\d{2}:\d{2}[:;]\d{2})/.exec(line)
    if (event) {
      lastEvent = { at: tcFrame(base, event[3], where) }
      continue
    }
    const note = /^(.*?)\s*\|C:(\S+)\s*\|M:(.*?)\s*\|D:(\d+)\s*$/.exec(line)
    if (note && lastEvent) {
      const at = lastEvent.at
      out.push({ in: at, out: at + lengthFrom(note[4]) - 1, text: note[1].trim() || note[3].trim(), color: resolve.read(note[2]) ?? DEFAULT_COLOR, track: null, author: null, guid: null, source: where })
      lastEvent = null
    }
  }
  return out
}

/** markers of the first clip or sequence of an xmeml file (frames counted from its start) */
function readXmeml(text: string): ReadMarker[] {
  const doc = parser(['marker', 'clip', 'sequence']).parse(text)
  const root = doc.xmeml
  if (!root) throw new FormatError('not an xmeml file')
  const owner = root.clip?.[0] ?? root.sequence?.[0] ?? root.project?.children?.sequence?.[0] ?? root.project?.children?.clip?.[0]
  const markers: any[] = owner?.marker ?? []
  return markers.map((m, i) => {
    const at = Number(m.in)
    const end = Number(m.out)
    if (!Number.isInteger(at) || at < 0) throw new FormatError(`marker ${i + 1}: <in> is not a frame number`)
    const color = m.pproColor === undefined ? premiere.read(null) : premiere.read(Number(m.pproColor))
    return {
      in: at,
      out: Number.isInteger(end) && end > at ? end - 1 : at,
      text: String(m.comment ?? '') || String(m.name ?? ''),
      color,
      track: null,
      author: null,
      guid: null,
      source: `marker ${i + 1}`,
    }
  })
}

/** markers of the clips of an FCPXML file (source time of the clip → frames from the asset's start timecode) */
function readFcpxml(text: string, base: TimecodeBase): ReadMarker[] {
  const doc = parser(['marker', 'chapter-marker', 'asset-clip', 'clip', 'event', 'project', 'spine', 'video', 'ref-clip', 'sync-clip', 'mc-clip']).parse(text)
  if (!doc.fcpxml) throw new FormatError('not an FCPXML file')
  const out: ReadMarker[] = []
  const rate = rateValue(base.rate)
  const visit = (node: any, path: string) => {
    if (!node || typeof node !== 'object') return
    for (const kind of ['marker', 'chapter-marker'] as const) {
      for (const [i, m] of (node[kind] ?? []).entries()) {
        const start = parseRationalSeconds(m['@start'])
        const duration = parseRationalSeconds(m['@duration']) ?? 0
        const where = `${path}/${kind}[${i + 1}]`
        if (start === null) throw new FormatError(`${where}: start "${String(m['@start']).slice(0, 40)}" is not a time`)
        const at = Math.round(start * rate) - base.start
        const length = Math.max(1, Math.round(duration * rate))
        out.push({ in: at, out: at + length - 1, text: m['@value'] ?? '', color: fcpx.read(kind, m['@completed']), track: null, author: m['@note'] || null, guid: null, source: where })
      }
    }
    for (const [key, value] of Object.entries(node)) {
      if (key.startsWith('@') || key === 'marker' || key === 'chapter-marker') continue
      for (const child of Array.isArray(value) ? value : [value]) visit(child, `${path}/${key}`)
    }
  }
  visit(doc.fcpxml, 'fcpxml')
  // markers and chapter markers are separate lists in the parsed tree: back to timeline order
  return out.map((m, i) => [m, i] as const).sort((a, b) => a[0].in - b[0].in || a[1] - b[1]).map(([m]) => m)
}

export type { MarkerColor }
