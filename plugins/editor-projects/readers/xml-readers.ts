import { PathHandler } from './xml-stream.js'
import { MediaCollector, NameList, ProjectFileError, baseName, normalizeMediaPath, retain, type ProjectReading, type ReadLimits } from './types.js'

/**
 * Handlers for the XML project formats. Each sees the document as a stream (`XmlStream`) and keeps
 * only names and paths, so their memory does not grow with the file.
 */
export interface ProjectXmlHandler extends PathHandler {
  result(): ProjectReading
}

/**
 * Premiere Pro `.prproj` (gunzipped): `<PremiereData>` holds a flat list of objects that point at
 * each other by `ObjectRef` (numeric `ObjectID`) or `ObjectURef` (`ObjectUID`). Sequences are
 * top-level `<Sequence>` objects with a `<Name>`; media are top-level `<Media>` objects with
 * `FilePath`/`ActualMediaFilePath`/`RelativePath`/`Title`. Objects no longer reachable from the
 * project (left behind by deletions) are not reported; generated media (black video, bars,
 * adjustment layers) carry a number instead of a path and are left out.
 */
export class PremiereHandler extends PathHandler implements ProjectXmlHandler {
  // the object graph in compact form: object keys interned to numbers, edges as pairs in one typed
  // array (a 200 MB project has ~500k objects; strings and arrays per object would cost gigabytes)
  private readonly ids = new Map<string, number>()
  private edges = new Int32Array(1 << 16)
  private edgeCount = 0
  private readonly roots: number[] = []
  private current: { id: number; kind: string } | null = null
  private readonly sequences = new Map<number, string>()
  private readonly media = new Map<number, { path: string; relative: string | null }>()
  private fields: Record<string, string> = {}
  private sawRoot = false

  private idOf(key: string) {
    let id = this.ids.get(key)
    if (id === undefined) this.ids.set(retain(key), (id = this.ids.size))
    return id
  }

  private addEdge(from: number, to: number) {
    if (this.edgeCount * 2 + 2 > this.edges.length) {
      if (this.edgeCount > this.limits.maxEntries * 200) throw new ProjectFileError('the Premiere project has too many object references to read')
      const grown = new Int32Array(this.edges.length * 2)
      grown.set(this.edges)
      this.edges = grown
    }
    this.edges[this.edgeCount * 2] = from
    this.edges[this.edgeCount * 2 + 1] = to
    this.edgeCount++
  }

  constructor(private readonly limits: ReadLimits) {
    super()
  }

  protected override onOpen(attrs: Record<string, string>) {
    const depth = this.path.length
    if (depth === 1) {
      if (this.path[0] !== 'PremiereData') throw new ProjectFileError('the file is not a Premiere Pro project (no PremiereData root)')
      this.sawRoot = true
      return
    }
    const ref = attrs.ObjectRef !== undefined ? `i:${attrs.ObjectRef}` : attrs.ObjectURef !== undefined ? `u:${attrs.ObjectURef}` : null
    if (depth === 2) {
      const key = attrs.ObjectID !== undefined ? `i:${attrs.ObjectID}` : attrs.ObjectUID !== undefined ? `u:${attrs.ObjectUID}` : null
      if (key) {
        this.current = { id: this.idOf(key), kind: this.path[1] }
        this.fields = {}
      } else {
        // `<Project ObjectRef="1"/>` at the top: where the project starts
        if (ref) this.roots.push(this.idOf(ref))
        this.current = null
      }
      return
    }
    if (ref && this.current) this.addEdge(this.current.id, this.idOf(ref))
  }

  protected collect() {
    if (this.path.length !== 3 || !this.current) return false
    const kind = this.current.kind
    const field = this.path[2]
    return (kind === 'Sequence' && field === 'Name') || (kind === 'Media' && (field === 'FilePath' || field === 'ActualMediaFilePath' || field === 'RelativePath' || field === 'Title'))
  }

  protected override onClose(text: string | undefined) {
    if (text !== undefined && this.current) this.fields[this.path[2]] = text
    if (this.path.length === 2 && this.current) {
      if (this.current.kind === 'Sequence' && this.fields.Name) this.sequences.set(this.current.id, retain(this.fields.Name))
      if (this.current.kind === 'Media') {
        const f = this.fields
        const path = normalizeMediaPath(f.ActualMediaFilePath) ?? normalizeMediaPath(f.FilePath)
        if (path) this.media.set(this.current.id, { path: retain(path), relative: f.RelativePath ? retain(f.RelativePath.replace(/\\/g, '/')) : null })
      }
      if (this.sequences.size + this.media.size > this.limits.maxEntries * 2) throw new ProjectFileError(`the project holds more than ${this.limits.maxEntries} sequences or media`)
      this.current = null
    }
  }

  result(): ProjectReading {
    if (!this.sawRoot) throw new ProjectFileError('the file is not a Premiere Pro project (no PremiereData root)')
    // what the project still reaches; without a root pointer (hand-trimmed files) everything counts
    let reachable: Uint8Array | null = null
    if (this.roots.length) {
      // adjacency in CSR form from the edge pairs, then a walk from the roots
      const n = this.ids.size
      const start = new Int32Array(n + 1)
      for (let e = 0; e < this.edgeCount; e++) start[this.edges[e * 2] + 1]++
      for (let i = 0; i < n; i++) start[i + 1] += start[i]
      const targets = new Int32Array(this.edgeCount)
      const fill = start.slice(0, n)
      for (let e = 0; e < this.edgeCount; e++) targets[fill[this.edges[e * 2]]++] = this.edges[e * 2 + 1]
      reachable = new Uint8Array(n)
      const queue = [...this.roots]
      for (const r of queue) reachable[r] = 1
      while (queue.length) {
        const from = queue.pop()!
        for (let k = start[from]; k < start[from + 1]; k++) if (!reachable[targets[k]]) (reachable[targets[k]] = 1), queue.push(targets[k])
      }
    }
    const names = new NameList(this.limits)
    for (const [id, name] of this.sequences) if (!reachable || reachable[id]) names.add(name)
    const media = new MediaCollector(this.limits)
    for (const [id, m] of this.media) if (!reachable || reachable[id]) media.add({ name: baseName(m.path), path: m.path, relativePath: m.relative, size: null })
    return { format: 'premiere', sequences: names.list(), media: media.list() }
  }
}

/**
 * Final Cut Pro X `.fcpxml` (and the `Info.fcpxml` of an `.fcpxmld` bundle): sequences are
 * `project` elements (their `name`), media are `asset` resources with a `src` (up to 1.8) or a
 * `media-rep` (1.9 on; the `original-media` one is preferred over proxies).
 */
export class FcpxmlHandler extends PathHandler implements ProjectXmlHandler {
  private readonly names: NameList
  private readonly media: MediaCollector
  private asset: { name: string; src: string | null; original: string | null } | null = null
  private sawRoot = false

  constructor(limits: ReadLimits) {
    super()
    this.names = new NameList(limits)
    this.media = new MediaCollector(limits)
  }

  protected collect() {
    return false
  }

  protected override onOpen(attrs: Record<string, string>, empty: boolean) {
    const name = this.path[this.path.length - 1]
    if (this.path.length === 1) {
      if (name !== 'fcpxml') throw new ProjectFileError('the file is not FCPXML (no fcpxml root)')
      this.sawRoot = true
    }
    if (name === 'project') this.names.add(attrs.name)
    else if (name === 'asset') this.asset = { name: attrs.name ?? '', src: attrs.src ?? null, original: null }
    else if (name === 'media-rep' && this.asset && attrs.src) {
      if (attrs.kind === 'original-media' || !attrs.kind) this.asset.original ??= attrs.src
      else this.asset.src ??= attrs.src
    }
    if (name === 'asset' && empty) this.flushAsset()
  }

  protected override onClose() {
    if (this.path[this.path.length - 1] === 'asset' && this.asset) this.flushAsset()
  }

  private flushAsset() {
    const a = this.asset!
    this.asset = null
    const path = normalizeMediaPath(a.original ?? a.src)
    if (path) this.media.add({ name: baseName(path), path, relativePath: null, size: null })
  }

  result(): ProjectReading {
    if (!this.sawRoot) throw new ProjectFileError('the file is not FCPXML (no fcpxml root)')
    return { format: 'fcpxml', sequences: this.names.list(), media: this.media.list() }
  }
}

/**
 * Final Cut Pro 7 XML (`xmeml`, what Premiere and Resolve exchange): sequences are `sequence`
 * elements (nested sequences appear again as `<sequence id="…"/>` references and count once);
 * media are `file` elements with a `pathurl` (later uses of a file are `<file id="…"/>` only;
 * generated media have no `pathurl` and are left out).
 */
export class XmemlHandler extends PathHandler implements ProjectXmlHandler {
  private readonly names: NameList
  private readonly media: MediaCollector
  private readonly sequenceIds = new Set<string>()
  private readonly fileIds = new Set<string>()
  private readonly stack: Array<{ kind: 'sequence' | 'file'; id: string | undefined; depth: number; fields: Record<string, string> }> = []
  private sawRoot = false

  constructor(limits: ReadLimits) {
    super()
    this.names = new NameList(limits)
    this.media = new MediaCollector(limits)
  }

  protected override onOpen(attrs: Record<string, string>, empty: boolean) {
    const name = this.path[this.path.length - 1]
    if (this.path.length === 1) {
      if (name !== 'xmeml') throw new ProjectFileError('the file is not Final Cut Pro 7 XML (no xmeml root)')
      this.sawRoot = true
    }
    if ((name === 'sequence' || name === 'file') && !empty) this.stack.push({ kind: name, id: attrs.id, depth: this.path.length, fields: {} })
  }

  protected collect() {
    const top = this.stack[this.stack.length - 1]
    if (!top || this.path.length !== top.depth + 1) return false
    const field = this.path[this.path.length - 1]
    return field === 'name' || (top.kind === 'file' && field === 'pathurl')
  }

  protected override onClose(text: string | undefined) {
    const top = this.stack[this.stack.length - 1]
    if (!top) return
    if (text !== undefined && this.path.length === top.depth + 1) top.fields[this.path[this.path.length - 1]] = text
    if (this.path.length !== top.depth) return
    this.stack.pop()
    if (top.kind === 'sequence') {
      if (top.id && this.sequenceIds.has(top.id)) return
      if (top.id) this.sequenceIds.add(top.id)
      this.names.add(top.fields.name)
    } else {
      if (top.id && this.fileIds.has(top.id)) return
      if (top.id) this.fileIds.add(top.id)
      const path = normalizeMediaPath(top.fields.pathurl)
      // a file without a pathurl is generated (bars, black video, counting leader): nothing to download
      if (path) this.media.add({ name: baseName(path), path, relativePath: null, size: null })
    }
  }

  result(): ProjectReading {
    if (!this.sawRoot) throw new ProjectFileError('the file is not Final Cut Pro 7 XML (no xmeml root)')
    return { format: 'xmeml', sequences: this.names.list(), media: this.media.list() }
  }
}

/**
 * DaVinci Resolve `.drp` entries (zip members, XML whose tag names contain `::`): timelines are
 * `Sm2MpTimelineClip` (media pool) or `Sm2Timeline` elements with a `Name`; media paths are the
 * `MediaFilePath` of timeline items (`Sm2TiVideoClip`, `Sm2TiAudioClip`) and media-pool clips.
 * One handler reads every entry of the archive in turn.
 */
export class ResolveHandler extends PathHandler implements ProjectXmlHandler {
  private readonly names: NameList
  private readonly media: MediaCollector
  private readonly timelineDepths: number[] = []

  constructor(limits: ReadLimits) {
    super()
    this.names = new NameList(limits)
    this.media = new MediaCollector(limits)
  }

  protected override onOpen() {
    const name = this.path[this.path.length - 1]
    if (name === 'Sm2MpTimelineClip' || name === 'Sm2Timeline') this.timelineDepths.push(this.path.length)
  }

  protected collect() {
    const name = this.path[this.path.length - 1]
    if (name === 'MediaFilePath') return true
    return name === 'Name' && this.timelineDepths.length > 0 && this.path.length === this.timelineDepths[this.timelineDepths.length - 1] + 1
  }

  protected override onClose(text: string | undefined) {
    const name = this.path[this.path.length - 1]
    if (text !== undefined && name === 'MediaFilePath') {
      const path = normalizeMediaPath(text)
      if (path) this.media.add({ name: baseName(path), path, relativePath: null, size: null })
    } else if (text !== undefined && name === 'Name') this.names.add(text)
    if (this.timelineDepths[this.timelineDepths.length - 1] === this.path.length) this.timelineDepths.pop()
  }

  result(): ProjectReading {
    return { format: 'resolve', sequences: this.names.list(), media: this.media.list() }
  }
}
