import CFB from 'cfb'
import { MediaCollector, NameList, ProjectFileError, baseName, normalizeMediaPath, type ProjectReading, type ReadLimits } from './types.js'

/**
 * AAF (Advanced Authoring Format) reader: enough of the object model for sequence names and the
 * media a sequence uses, written from the AAF object specification (structured storage mapping).
 *
 * An AAF file is a Microsoft compound file. Every object is a storage whose CLSID is its class
 * AUID and whose `properties` stream lists `(pid, stored form, length)` entries, then the values.
 * Strong references name a child storage; vectors and sets of them name a collection whose
 * members are `<name>{<hex key>}` and whose order is in the `<name> index` stream.
 *
 * Walk: Header → ContentStorage → Mobs. Sequences are CompositionMobs used as top level (Avid
 * writes the usage code; other writers do not, then a composition no other composition uses is
 * top level). Media: from each sequence, SourceClips lead (through nested compositions and
 * MasterMobs) to file SourceMobs; their essence descriptor's locators carry the file's URL.
 */

// stored forms (how a property value is kept)
const SF_DATA = 0x82
const SF_STRONG_REF = 0x22
const SF_STRONG_REF_VECTOR = 0x32
const SF_STRONG_REF_SET = 0x3a

// property ids of the baseline classes (AAF object specification, "local identification")
const PID = {
  rootHeader: 0x0002,
  headerContent: 0x3b03,
  contentMobs: 0x1901,
  mobId: 0x4401,
  mobName: 0x4402,
  mobSlots: 0x4403,
  mobUsageCode: 0x4408,
  slotSegment: 0x4803,
  sourceId: 0x1101,
  essenceDescription: 0x4701,
  locators: 0x2f01,
  networkLocatorUrl: 0x4001,
  textLocatorName: 0x4101,
} as const

/** strong references that lead from a segment to the segments inside it */
const SEGMENT_CHILDREN = [
  0x1001, // Sequence.Components
  0x0b02, // OperationGroup.InputSegments
  0x0f01, // Selector.Selected
  0x0f02, // Selector.Alternates
  0x0501, // EssenceGroup.Choices
  0x0c01, // NestedScope.Slots
  0x1801, // Transition.OperationGroup
  PID.slotSegment,
]

// class AUIDs 0D010101-0101-<n>-060E-2B3402060101: the distinguishing word <n>
const CLASS_COMPOSITION_MOB = 0x3500
const CLASS_MASTER_MOB = 0x3600
const CLASS_SOURCE_MOB = 0x3700
/** UsageCode AUID of a top-level composition: {0D010102-0101-0700-060E-2B3404010101} */
const USAGE_TOP_LEVEL = '0201010d01010007060e2b3404010101'
const USAGE_PREFIX = '0201010d0101'

interface Property {
  form: number
  value: Buffer
}

type MobKind = 'composition' | 'master' | 'source' | 'other'
interface Mob {
  dir: string
  kind: MobKind
  name: string
  usage: string | null
}

const utf16 = (b: Buffer) => b.toString('utf16le').replace(/\0+$/, '')

class CompoundFile {
  private readonly entries = new Map<string, CFB.CFB$Entry>()
  constructor(file: CFB.CFB$Container) {
    file.FullPaths.forEach((p, i) => this.entries.set(p, file.FileIndex[i]))
  }
  has(dir: string) {
    return this.entries.has(dir)
  }
  classWord(dir: string): number {
    const clsid = this.entries.get(dir)?.clsid ?? ''
    return clsid.length === 32 ? parseInt(clsid.slice(14, 16) + clsid.slice(12, 14), 16) : -1
  }
  properties(dir: string): Map<number, Property> {
    const out = new Map<number, Property>()
    const entry = this.entries.get(`${dir}properties`)
    if (!entry) return out
    const b = Buffer.from(entry.content as Uint8Array)
    if (b.length < 4 || b[0] !== 0x4c) throw new ProjectFileError('the AAF file has a property stream that is not little-endian AAF; it cannot be read')
    const count = b.readUInt16LE(2)
    let header = 4
    let value = 4 + count * 6
    for (let i = 0; i < count; i++, header += 6) {
      const pid = b.readUInt16LE(header)
      const form = b.readUInt16LE(header + 2)
      const length = b.readUInt16LE(header + 4)
      if (value + length > b.length) throw new ProjectFileError('the AAF file has a truncated property stream')
      out.set(pid, { form, value: b.subarray(value, value + length) })
      value += length
    }
    return out
  }
  /** the storage a strong reference names */
  child(dir: string, p: Property | undefined): string | null {
    if (!p || p.form !== SF_STRONG_REF) return null
    const path = `${dir}${utf16(p.value)}/`
    return this.entries.has(path) ? path : null
  }
  /** the members of a strong reference vector (in order) or set */
  members(dir: string, p: Property | undefined): string[] {
    if (!p || (p.form !== SF_STRONG_REF_VECTOR && p.form !== SF_STRONG_REF_SET)) return []
    const name = utf16(p.value)
    const index = this.entries.get(`${dir}${name} index`)
    if (!index) return []
    const b = Buffer.from(index.content as Uint8Array)
    const count = b.readUInt32LE(0)
    const keys: number[] = []
    if (p.form === SF_STRONG_REF_VECTOR) {
      for (let i = 0; i < count && 12 + i * 4 + 4 <= b.length; i++) keys.push(b.readUInt32LE(12 + i * 4))
    } else {
      // a set's index: count, free keys, the identifying property (pid, size), then key, references, identification
      const idSize = b.readUInt8(14)
      const stride = 8 + idSize
      for (let i = 0; i < count && 15 + i * stride + 4 <= b.length; i++) keys.push(b.readUInt32LE(15 + i * stride))
    }
    return keys.map((k) => `${dir}${name}{${k.toString(16)}}/`).filter((d) => this.entries.has(d))
  }
}

export function readAaf(data: Buffer, limits: ReadLimits): ProjectReading {
  if (data.length < 8 || data.readUInt32BE(0) !== 0xd0cf11e0) throw new ProjectFileError('the file is not an AAF file (no compound file signature)')
  let container: CFB.CFB$Container
  try {
    container = CFB.read(data, { type: 'buffer' })
  } catch (err) {
    throw new ProjectFileError(`the AAF container cannot be read: ${(err as Error).message}`)
  }
  const cfb = new CompoundFile(container)
  const root = 'Root Entry/'
  const header = cfb.child(root, cfb.properties(root).get(PID.rootHeader))
  const content = header && cfb.child(header, cfb.properties(header).get(PID.headerContent))
  if (!content) throw new ProjectFileError('the file is a compound file but has no AAF header and content storage')

  const mobs = new Map<string, Mob>()
  for (const dir of cfb.members(content, cfb.properties(content).get(PID.contentMobs))) {
    const props = cfb.properties(dir)
    const id = props.get(PID.mobId)
    if (!id) continue
    const word = cfb.classWord(dir)
    const kind: MobKind =
      word === CLASS_COMPOSITION_MOB ? 'composition' : word === CLASS_MASTER_MOB ? 'master' : word === CLASS_SOURCE_MOB || props.has(PID.essenceDescription) ? 'source' : 'other'
    const usage = props.get(PID.mobUsageCode)
    mobs.set(id.value.toString('hex'), { dir, kind, name: props.get(PID.mobName) ? utf16(props.get(PID.mobName)!.value) : '', usage: usage ? usage.value.toString('hex') : null })
  }

  /** the mob ids SourceClips in a mob's slots point at (depth-first, bounded) */
  const sourceIdsOf = (mob: Mob): string[] => {
    const out: string[] = []
    const stack = cfb.members(mob.dir, cfb.properties(mob.dir).get(PID.mobSlots))
    let visited = 0
    while (stack.length) {
      const dir = stack.pop()!
      if (++visited > limits.maxEntries * 10) throw new ProjectFileError('the AAF composition is too deep or too large to read')
      const props = cfb.properties(dir)
      const source = props.get(PID.sourceId)
      if (source && source.form === SF_DATA && /[^0]/.test(source.value.toString('hex'))) out.push(source.value.toString('hex'))
      for (const pid of SEGMENT_CHILDREN) {
        const p = props.get(pid)
        if (!p) continue
        const one = cfb.child(dir, p)
        if (one) stack.push(one)
        stack.push(...cfb.members(dir, p).reverse())
      }
    }
    return out
  }

  const locatorOf = (source: Mob): string | null => {
    const descriptor = cfb.child(source.dir, cfb.properties(source.dir).get(PID.essenceDescription))
    if (!descriptor) return null
    for (const loc of cfb.members(descriptor, cfb.properties(descriptor).get(PID.locators))) {
      const props = cfb.properties(loc)
      const url = props.get(PID.networkLocatorUrl) ?? props.get(PID.textLocatorName)
      const path = url && normalizeMediaPath(utf16(url.value))
      if (path) return path
    }
    return null
  }

  const compositions = [...mobs.values()].filter((m) => m.kind === 'composition')
  const withUsage = compositions.some((m) => m.usage?.startsWith(USAGE_PREFIX))
  let topLevel: Mob[]
  if (withUsage) topLevel = compositions.filter((m) => m.usage === USAGE_TOP_LEVEL)
  else {
    // no usage codes (pyaaf2, Resolve, Premiere): a composition no other composition uses is a sequence
    const used = new Set<string>()
    for (const c of compositions) for (const id of sourceIdsOf(c)) used.add(id)
    topLevel = compositions.filter((c) => ![...mobs.entries()].some(([id, m]) => m === c && used.has(id)))
  }

  const names = new NameList(limits)
  const media = new MediaCollector(limits)
  const done = new Set<Mob>()
  const follow = (mob: Mob, clipName: string | null) => {
    if (done.has(mob)) return
    done.add(mob)
    if (mob.kind === 'source') {
      // the first source mob of a chain is the file; the ones behind it (tape, import) are not followed
      const path = locatorOf(mob)
      media.add({ name: path ? baseName(path) : clipName || mob.name || 'unnamed', path, relativePath: null, size: null })
      return
    }
    for (const id of sourceIdsOf(mob)) {
      const next = mobs.get(id)
      if (next) follow(next, mob.kind === 'master' ? mob.name : clipName)
    }
  }
  for (const seq of topLevel) {
    names.add(seq.name)
    follow(seq, null)
  }
  // master clips no sequence uses are in the file too (a bin export has no sequence at all)
  for (const mob of mobs.values()) if (mob.kind === 'master') follow(mob, null)
  return { format: 'aaf', sequences: names.list(), media: media.list() }
}
