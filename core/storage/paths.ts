import { constants, existsSync, type Stats } from 'node:fs'
import { lstat, mkdir, open, readdir, readlink, realpath, rmdir, stat, type FileHandle } from 'node:fs/promises'
import path from 'node:path'
import { MamError, invalidParam } from '../errors.js'

/**
 * The one module every client-supplied path goes through (SECURITY.md). A relative path from a
 * client is resolved inside a root; `..`, absolute paths, NUL bytes, overlong names and symlinks
 * that lead outside are refused. Containment is checked on resolved real paths, segment by segment,
 * never by string prefix. Reads of stored files go through `openInside`, which checks the file it
 * opened, because anyone who writes to a storage (SMB users) can swap a file for a symlink.
 */

const MAX_SEGMENT_BYTES = 255
const MAX_PATH_BYTES = 4096

/** names are compared and created in Unicode NFC: `café` typed on a Mac (NFD) and on Windows (NFC) is one name */
const nfc = (name: string) => name.normalize('NFC')

/** Checks a client path and returns its clean segments, in NFC; throws 422 naming `param`. */
export function relativeSegments(input: string, param: string): string[] {
  if (typeof input !== 'string') throw invalidParam(param, 'must be a string')
  if (input.includes('\0')) throw invalidParam(param, 'must not contain NUL bytes')
  if (Buffer.byteLength(input) > MAX_PATH_BYTES) throw invalidParam(param, `must be at most ${MAX_PATH_BYTES} bytes`)
  if (path.isAbsolute(input) || /^[A-Za-z]:[\\/]/.test(input) || input.startsWith('\\'))
    throw invalidParam(param, 'must be a relative path')
  const segments = nfc(input).split(/[\\/]+/).filter((s) => s !== '' && s !== '.')
  for (const s of segments) {
    if (s === '..') throw invalidParam(param, 'must not contain ".." segments')
    if (Buffer.byteLength(s) > MAX_SEGMENT_BYTES) throw invalidParam(param, `has a name longer than ${MAX_SEGMENT_BYTES} bytes`)
  }
  return segments
}

/** true when `child` is `root` or lies below it (both absolute, resolved) */
export function isInside(root: string, child: string): boolean {
  const rel = path.relative(root, child)
  return rel === '' || (!rel.startsWith('..' + path.sep) && rel !== '..' && !path.isAbsolute(rel))
}

const outside = (param: string) => new MamError('forbidden', `${param} leads outside its storage`, { errors: [{ param, message: 'leads outside its storage' }] })

/**
 * The entry of `dir` that is `name` in another Unicode normalisation (a folder made by a Mac over
 * SMB is NFD), so that a client's NFC name finds it instead of creating a look-alike sibling.
 */
async function equivalentEntry(dir: string, name: string): Promise<string | undefined> {
  if (/^[\x00-\x7f]*$/.test(name)) return undefined // ASCII reads the same in every normalisation
  const entries = await readdir(dir).catch(() => [] as string[])
  return entries.find((e) => e !== name && nfc(e) === name)
}

/**
 * Resolves a client path below `root`. The deepest existing ancestor is resolved with realpath, so
 * a symlink inside the tree that points outside it is refused even when the final name does not
 * exist yet (a write target). A broken symlink on the way is refused too (403 when it points
 * outside, else 422): writing through it would create its target. Segments that do not exist are
 * returned in NFC.
 */
export async function resolveInside(root: string, input: string, param: string): Promise<string> {
  const segments = relativeSegments(input, param)
  const realRoot = await realpath(root)
  let existing = realRoot
  let i = 0
  for (; i < segments.length; i++) {
    let name = segments[i]
    let real = await realOf(path.join(existing, name), segments, i, param)
    if (real === null) {
      name = (await equivalentEntry(existing, name)) ?? name
      if (name !== segments[i]) real = await realOf(path.join(existing, name), segments, i, param)
      if (real === null) {
        await refuseBrokenLink(path.join(existing, name), realRoot, param)
        break
      }
    }
    existing = real
    if (!isInside(realRoot, existing)) throw outside(param)
  }
  return path.join(existing, ...segments.slice(i))
}

/** the real path of `next`, or null when nothing is there (or only a broken symlink) */
async function realOf(next: string, segments: string[], i: number, param: string): Promise<string | null> {
  try {
    return await realpath(next)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return null
    if (code === 'ENOTDIR') throw invalidParam(param, `goes through "${segments[i - 1] ?? segments[i]}", which is a file`)
    if (code === 'ELOOP') throw invalidParam(param, `goes through "${segments[i]}", a symbolic link that loops`)
    if (code === 'ENAMETOOLONG') throw invalidParam(param, 'is too long once its symbolic links are followed')
    throw err
  }
}

async function refuseBrokenLink(candidate: string, realRoot: string, param: string): Promise<void> {
  const info = await lstat(candidate).catch(() => null)
  if (!info?.isSymbolicLink()) return
  const target = path.resolve(path.dirname(candidate), await readlink(candidate))
  // the target's own parent may be a symlink too: resolve what exists of it
  const parent = await realpath(path.dirname(target)).catch(() => path.dirname(target))
  if (!isInside(realRoot, path.join(parent, path.basename(target)))) throw outside(param)
  throw invalidParam(param, `goes through "${path.basename(candidate)}", a symbolic link to something that does not exist`)
}

/** A stored file opened for reading after its real path was checked to lie inside its root. */
export interface OpenedFile {
  handle: FileHandle
  stats: Stats
  realPath: string
  /**
   * A path by which other programs (ffmpeg, ffprobe, sharp) open exactly this file, whatever is
   * swapped in at its name meanwhile: the descriptor's entry in /proc where there is one.
   * Elsewhere it is the checked real path (a small window remains there).
   */
  descriptorPath: string
  close(): Promise<void>
}

/** whether an opened descriptor's real path can be read (/proc/self/fd: Linux) */
export const PROC_FDS = existsSync('/proc/self/fd')

/** the real path of the file a descriptor has open; without /proc, the path's, if it is the same file */
async function realPathOfOpened(handle: FileHandle, file: string, stats: Stats): Promise<string> {
  if (PROC_FDS) return readlink(`/proc/self/fd/${handle.fd}`)
  const real = await realpath(file)
  const now = await stat(real)
  if (now.dev !== stats.dev || now.ino !== stats.ino) throw Object.assign(new Error(`${file} changed while it was opened`), { code: 'ECHANGED' })
  return real
}

/**
 * Opens `relative` (a stored `/`-path) below `root` for reading, refusing with 403 (`permanent`, so
 * a job fails at once) a file whose real path leads outside `root`: a symlink planted in place of a
 * registered file must not hand out the server's key or another project's media. The real path is
 * checked before the open (nothing outside is even opened) and again on the opened descriptor (a
 * swap in between is caught); callers read from the descriptor, never the name again. Anything but
 * a regular file (a folder, a FIFO) is a 409. `what` names the file in messages (`asset 12 (a/b.mov)`).
 */
export async function openInside(root: string, relative: string, what: string): Promise<OpenedFile> {
  const realRoot = await realpath(root)
  const file = path.join(realRoot, ...relative.split('/'))
  if (!isInside(realRoot, await realpath(file))) throw leadsOutside(what)
  return openChecked(realRoot, file, what, 0)
}

const leadsOutside = (what: string) => Object.assign(new MamError('forbidden', `The file of ${what} leads outside its storage; it is not read`), { permanent: true })

/** opens `file` (its folders checked already), then checks the descriptor's real path against `realRoot` (a swap in between) */
async function openChecked(realRoot: string, file: string, what: string, extraFlags: number): Promise<OpenedFile> {
  // O_NONBLOCK: a FIFO swapped in must not hang the open; regular files ignore it
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | extraFlags)
  try {
    const stats = await handle.stat()
    const realPath = await realPathOfOpened(handle, file, stats)
    if (!isInside(realRoot, realPath)) throw leadsOutside(what)
    if (!stats.isFile()) throw Object.assign(new MamError('conflict', `The file of ${what} is not a regular file`), { permanent: true })
    return {
      handle,
      stats,
      realPath,
      descriptorPath: PROC_FDS ? `/proc/${process.pid}/fd/${handle.fd}` : realPath,
      close: () => handle.close(),
    }
  } catch (err) {
    await handle.close()
    throw err
  }
}

/**
 * `openInside` for many files below one root in a short while (a page of an archive or a copy):
 * the root's real path is resolved once, and each folder's real path once (checked inside the
 * root), instead of two realpaths per file, each a walk of the whole path. A file is then opened
 * by its checked folder and its name with O_NOFOLLOW, so nothing outside is opened unless a folder
 * is swapped meanwhile, which the check on the opened descriptor catches as openInside's does; a
 * name that is a symbolic link (ELOOP) is checked as openInside checks it. Same errors as openInside.
 * Hold one only for a short while: a folder moved later is not seen moved (the check after the
 * open still holds).
 */
export class InsideRoot {
  private readonly folders = new Map<string, Promise<string>>()
  private constructor(readonly realRoot: string) {}

  static async of(root: string): Promise<InsideRoot> {
    return new InsideRoot(await realpath(root))
  }

  async open(relative: string, what: string): Promise<OpenedFile> {
    try {
      return await openChecked(this.realRoot, await this.pathOf(relative, what), what, constants.O_NOFOLLOW)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ELOOP') throw err
      return openInside(this.realRoot, relative, what)
    }
  }

  /**
   * The path of `relative` through its folder's checked real path, the name itself not resolved:
   * for calls that act on the name and never follow it (lstat, unlink).
   */
  async pathOf(relative: string, what: string): Promise<string> {
    const segments = relative.split('/')
    const name = segments.pop()!
    // a last segment that names a folder (`..`, `.`) is resolved and checked whole
    if (name === '..' || name === '.') return this.folder(relative, what)
    return path.join(await this.folder(segments.join('/'), what), name)
  }

  private folder(relative: string, what: string): Promise<string> {
    let real = this.folders.get(relative)
    if (!real) {
      real = realpath(path.join(this.realRoot, relative)).then((dir) => {
        if (!isInside(this.realRoot, dir)) throw leadsOutside(what)
        return dir
      })
      // a folder that failed (missing, outside) is asked again next time
      real.catch(() => this.folders.delete(relative))
      this.folders.set(relative, real)
    }
    return real
  }
}

/**
 * A single folder or file name derived from free text (a template or project name): separators,
 * control characters and names that mean something to the file system are replaced.
 */
export function safeName(text: string, fallback = 'unnamed'): string {
  let name = nfc(text)
    .replace(/[\u0000-\u001f\u007f/\\:*?"<>|]/g, '_')
    .replace(/^\.+/, (dots) => '_'.repeat(dots.length))
    .trim()
  while (Buffer.byteLength(name) > 200) name = name.slice(0, -1)
  return name || fallback
}

/**
 * The file name an upload is stored under: the last segment of the client's name (never a path),
 * in NFC, without NUL bytes; a leading dot becomes `_` (`.hidden.jpg` → `_hidden.jpg`) so an
 * upload never turns into a hidden file.
 */
export function uploadName(clientName: string, fallback = 'upload'): string {
  const base = path.posix.basename(nfc(clientName).replace(/\\/g, '/')).replace(/\0/g, '')
  return base.replace(/^\./, '_') || fallback
}

/**
 * `mkdir -p` that names the true cause of a failure. Node's recursive mkdir reports ENOENT when a
 * parent could not be made for any reason (a full disk's ENOSPC, EDQUOT, EACCES), which would be
 * a 500 instead of a 507; then the missing levels are made one at a time, the failing one throws
 * its own error, and the levels made before it are removed again (only while empty: another
 * request may be filling them). Returns the first folder made, like `mkdir(…, { recursive: true })`.
 */
export async function makeDirs(dir: string): Promise<string | undefined> {
  try {
    return await mkdir(dir, { recursive: true })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const missing: string[] = []
  for (let p = path.resolve(dir); !(await lstat(p).then(() => true, () => false)); p = path.dirname(p)) {
    missing.unshift(p)
    if (path.dirname(p) === p) break
  }
  const made: string[] = []
  try {
    for (const level of missing) {
      try {
        await mkdir(level)
        made.push(level)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      }
    }
  } catch (err) {
    for (const level of made.reverse()) await rmdir(level).catch(() => {})
    throw err
  }
  return made[0]
}
