/** What every reader returns: the sequences of a project file and the media it references. */
export type ProjectFormat = 'premiere' | 'resolve' | 'fcpxml' | 'xmeml' | 'aaf'

export interface MediaReference {
  /** the file name as the editing suite shows it */
  name: string
  /** the absolute path the editing suite last used, `/`-separated; null when the file names none (Avid-managed media) */
  path: string | null
  /** a path relative to the project file, when the suite stores one (Premiere) */
  relativePath: string | null
  /** bytes, when the project file records them */
  size: number | null
}

export interface ProjectReading {
  format: ProjectFormat
  sequences: string[]
  media: MediaReference[]
}

/** bounds a reader works within; a file beyond them is refused with a reason, never half-read */
export interface ReadLimits {
  /** bytes of the project file itself */
  maxFileBytes: number
  /** bytes read whole into memory (zip containers, AAF compound files) */
  maxContainerBytes: number
  /** bytes after decompression (gzip and zip entries): a guard against decompression bombs */
  maxExpandedBytes: number
  /** sequences plus media references kept */
  maxEntries: number
}

/**
 * A path written by an editing suite, made comparable: `file://` URLs decoded (xmeml, FCPXML, AAF
 * locators), Windows separators turned to `/`, the drive letter or UNC host kept as the first segment.
 * Returns null for values that are no file path (Premiere writes a number for generated media).
 */
export function normalizeMediaPath(raw: string | undefined | null): string | null {
  if (!raw) return null
  let p = raw.trim()
  if (/^file:/i.test(p)) {
    p = p.replace(/^file:(\/\/localhost)?/i, '').replace(/^\/\/\/?/, '/')
    try {
      p = decodeURIComponent(p)
    } catch {
      // a stray % is kept as written
    }
  }
  p = p.replace(/\\/g, '/')
  if (!p.includes('/')) return null
  // `file:///D:/x` names the Windows path `D:/x`; UNC `//host/share` keeps its host as the first segment
  return p.replace(/^\/([A-Za-z]:\/)/, '$1').replace(/(?!^)\/{2,}/g, '/')
}

/**
 * A copy of a string that does not keep the chunk it was cut from alive: V8 implements slices and
 * concatenations as views of their parent, so a name kept from a 1 MB chunk would pin the chunk,
 * and a 200 MB project would stay in memory whole through the names taken from it.
 */
export const retain = (s: string): string => (s.length > 0 ? Buffer.from(s, 'utf8').toString('utf8') : '')

export const baseName = (p: string) => p.slice(p.lastIndexOf('/') + 1)

/** collects references once per path (or per name for path-less ones), within the entry limit */
export class MediaCollector {
  private readonly seen = new Map<string, MediaReference>()
  constructor(private readonly limits: Pick<ReadLimits, 'maxEntries'>) {}
  add(ref: MediaReference) {
    const key = ref.path ? `p:${ref.path}` : `n:${ref.name}`
    const known = this.seen.get(key)
    if (known) {
      known.size ??= ref.size
      known.relativePath ??= ref.relativePath
      return
    }
    if (this.seen.size >= this.limits.maxEntries) throw new TooManyEntries(this.limits.maxEntries)
    this.seen.set(retain(key), { name: retain(ref.name), path: ref.path && retain(ref.path), relativePath: ref.relativePath && retain(ref.relativePath), size: ref.size })
  }
  list() {
    return [...this.seen.values()]
  }
}

/** a project file that cannot be read as asked; its message is shown to the client */
export class ProjectFileError extends Error {
  constructor(
    message: string,
    /** 413: over a configured size; 422: not what its name says, malformed, or too many entries */
    readonly status: 413 | 422 = 422,
  ) {
    super(message)
  }
}

export class TooManyEntries extends ProjectFileError {
  constructor(max: number) {
    super(`the project references more than ${max} media files or sequences`)
  }
}

/** sequence names in file order, each once */
export class NameList {
  private readonly names = new Set<string>()
  constructor(private readonly limits: Pick<ReadLimits, 'maxEntries'>) {}
  add(name: string | undefined) {
    const n = name?.trim()
    if (!n || this.names.has(n)) return
    if (this.names.size >= this.limits.maxEntries) throw new TooManyEntries(this.limits.maxEntries)
    this.names.add(retain(n))
  }
  list() {
    return [...this.names]
  }
}
