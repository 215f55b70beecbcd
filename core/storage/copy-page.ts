/**
 * A page of small files copied in one worker task: for each file the original is opened, read,
 * hashed (SHA-256 + CRC-32), written to a new temporary beside its place, optionally read back,
 * flushed and given its name, with synchronous calls in the worker's thread instead of a dozen
 * thread-pool hops on the event loop per file (open, fstat, readlink, read, open, write, read,
 * fstat, close, fsync, close, rename). Only the flushes stay asynchronous, several at once, so the
 * file system joins their journal commits; each folder is flushed once at the end. This module is
 * also a piscina worker entry (`COPY_PAGE_WORKER`, default export): it imports only Node's
 * built-ins and the light paths and sums modules, so a worker thread loads it in milliseconds.
 *
 * Guarantees, per file: a copy gets its name only once its bytes are on the device; a file whose
 * original changed while it was read, whose copy read back otherwise, or which did not match the
 * checksums it was expected to have, never gets its name (its temporary is removed). Such a file,
 * and any other that met an error, is answered "not copied" alone and the page goes on: the caller
 * copies it its own way, which meets the condition again and records it as it always did.
 */
import { closeSync, constants, fstatSync, fsync, linkSync, lstatSync, openSync, readSync, readlinkSync, renameSync, statSync, unlinkSync, writeSync, type Stats } from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import { PROC_FDS, isInside } from './paths.js'
import { ChunkSums, type ContentSums } from './sums.js'

const fsyncAsync = promisify(fsync)

/** the checksums a copy must have (an asset's recorded ones, an archived file's) */
export interface PageSums {
  size: number
  sha256: string
  crc32: string
}

export interface PageFile {
  /**
   * The original. With `CopyPageTask.insideRoot`: its path through its folder's checked real path
   * (InsideRoot.pathOf); the name is opened with O_NOFOLLOW and the opened descriptor checked
   * inside the root, as InsideRoot.open does. Without: a path of ours (a target's object).
   */
  from: string
  /** the new temporary (created, never over an existing file) beside `to`, in `to`'s folder (made already) */
  temp: string
  /** the name the copy takes: renamed over (`place: 'rename'`) or linked, never over an existing file (`'link'`) */
  to: string
  /** the checksums the copy must have (`expectedWhile`: only while the original has that size and modification time, ms) */
  expected?: PageSums | null
  expectedWhile?: { size: number; mtimeMs: number }
  /** a copy already at `to` with the expected checksums is kept (a rerun after a crash): see `CopyPageTask.readBack` */
  reuse?: boolean
}

export interface CopyPageTask {
  files: PageFile[]
  /** the real path of the originals' root: every opened original must lie inside it (readlink of /proc/self/fd) */
  insideRoot?: string
  place: 'rename' | 'link'
  /**
   * Each temporary read back through its own descriptor before its flush (size and SHA-256 against
   * what was written; a reused copy is read and hashed too). Without it, the copy's size is checked
   * on its descriptor.
   */
  readBack: boolean
  /** originals of this size or more are not copied here (left to the caller's path, as are names that are symbolic links) */
  below: number
  /** flushes in flight at once */
  syncsAtOnce: number
  /** set to 1 by the caller to stop between two files (a cancelled job) */
  stop?: Int32Array
}

/**
 * A copy made, flushed and named (`sums` of the bytes written, `size` and `mtimeMs` the original's;
 * `placedMtimeMs`: the name's modification time, `place: 'link'`), or not: whatever went wrong (a
 * missing or changed original, a symbolic link, other checksums than expected, a full disk, an
 * existing name, a large file, a stop) leaves the file to the caller's own path, which meets the
 * same condition again and answers it as it always did. Nothing of an uncopied file is left behind.
 */
export type PageOutcome = { copied: true; sums: ContentSums; size: number; mtimeMs: number; reused: boolean; placedMtimeMs?: number } | { copied: false }

export interface CopyPageResult {
  outcomes: PageOutcome[]
  stopped: boolean
  /** a failure of the page as a whole (a folder's flush): no copy of it may be trusted */
  error?: { message: string; code?: string }
}

const changed = (a: Stats, b: Stats) => a.size !== b.size || a.mtimeMs !== b.mtimeMs || a.ctimeMs !== b.ctimeMs
const sameSums = (a: ContentSums, b: PageSums) => a.size === b.size && a.sha256 === b.sha256 && a.crc32 === b.crc32

/** one buffer per task, grown to the largest file (small files: no garbage per file) */
class Buffers {
  private buf = Buffer.allocUnsafe(64 * 1024)
  /** room for `size` + 1 bytes: a read that fills it found a file longer than it was */
  of(size: number): Buffer {
    if (this.buf.length < size + 1) this.buf = Buffer.allocUnsafe(size + 1)
    return this.buf
  }
}

/** the whole of a regular file from offset 0 into `buf` (short reads of a regular file read on); the bytes read */
function readWhole(fd: number, buf: Buffer): number {
  let got = 0
  while (got < buf.length) {
    const n = readSync(fd, buf, got, buf.length - got, got)
    if (!n) break
    got += n
  }
  return got
}

function writeWhole(fd: number, chunk: Buffer): void {
  for (let off = 0; off < chunk.length; ) off += writeSync(fd, chunk, off, chunk.length - off, off)
}

const sumsOf = (chunk: Buffer, crc32: boolean): ContentSums => {
  const sums = new ChunkSums({ sha256: true, crc32 })
  sums.update(chunk)
  return sums.result()
}

const NOT_COPIED: PageOutcome = { copied: false }

/** the original opened and checked as InsideRoot.open checks it (O_NOFOLLOW, then the descriptor's real path); null: not here */
function openOriginal(file: PageFile, task: CopyPageTask): { fd: number; stats: Stats } | null {
  const fd = openSync(file.from, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | (task.insideRoot ? constants.O_NOFOLLOW : 0))
  try {
    const stats = fstatSync(fd)
    if (task.insideRoot && !isInside(task.insideRoot, readlinkSync(`/proc/self/fd/${fd}`))) return close(fd)
    if (!stats.isFile() || stats.size >= task.below) return close(fd)
    return { fd, stats }
  } catch (err) {
    closeSync(fd)
    throw err
  }
}

const close = (fd: number): null => {
  closeSync(fd)
  return null
}

/** a copy already in place that has the expected checksums (a rerun after a crash): kept, not sent again */
function reusable(file: PageFile, expected: PageSums, task: CopyPageTask, buffers: Buffers): boolean {
  const there = statSync(file.to, { throwIfNoEntry: false })
  if (!there?.isFile() || there.size !== expected.size) return false
  if (!task.readBack) return true
  const fd = openSync(file.to, 'r')
  try {
    const buf = buffers.of(expected.size)
    const n = readWhole(fd, buf)
    const back = sumsOf(buf.subarray(0, n), false)
    return back.size === expected.size && back.sha256 === expected.sha256
  } finally {
    closeSync(fd)
  }
}

interface Staged {
  fd: number
  outcome: Extract<PageOutcome, { copied: true }>
}

/**
 * One file up to its flush: read, hashed, written to its temporary, checked (the original unchanged
 * meanwhile, the expected checksums, the copy's size or read-back); the temporary stays open for the
 * flush. A reused copy is answered at once; null: not copied (its temporary removed).
 */
function stage(file: PageFile, task: CopyPageTask, buffers: Buffers): Staged | PageOutcome | null {
  const opened = openOriginal(file, task)
  if (!opened) return null
  let temp: number | undefined
  try {
    const { stats: before } = opened
    const mtimeMs = Math.floor(before.mtimeMs)
    const holds = !file.expectedWhile || (file.expectedWhile.size === before.size && file.expectedWhile.mtimeMs === mtimeMs)
    const expected = file.expected && holds ? file.expected : null
    if (file.reuse && expected && reusable(file, expected, task, buffers)) return { copied: true, sums: { ...expected }, size: before.size, mtimeMs, reused: true }
    const buf = buffers.of(before.size)
    const n = readWhole(opened.fd, buf)
    const chunk = buf.subarray(0, n)
    const sums = sumsOf(chunk, true)
    // the bytes written are the bytes hashed (one buffer); a file longer than it was fills the buffer: changed
    if (n !== before.size || changed(before, fstatSync(opened.fd)) || (expected && !sameSums(sums, expected))) return null
    temp = openSync(file.temp, (task.readBack ? constants.O_RDWR : constants.O_WRONLY) | constants.O_CREAT | constants.O_EXCL, 0o666)
    writeWhole(temp, chunk)
    if (task.readBack) {
      // through the temporary's own descriptor, before its flush: what is named is what was read
      // (into the one buffer: the original's bytes are written and hashed by now)
      const back = buffers.of(sums.size)
      const got = sumsOf(back.subarray(0, readWhole(temp, back)), false)
      if (got.size !== sums.size || got.sha256 !== sums.sha256) return null
    } else if (fstatSync(temp).size !== sums.size) return null
    const staged: Staged = { fd: temp, outcome: { copied: true, sums, size: before.size, mtimeMs, reused: false } }
    temp = undefined
    return staged
  } finally {
    closeSync(opened.fd)
    if (temp !== undefined) {
      closeSync(temp)
      unlinkQuietly(file.temp)
    }
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // gone already
  }
}

/** the temporary takes its name once flushed (`link`: never over an existing file); a temporary without its name is removed */
async function place(file: PageFile, staged: Staged, task: CopyPageTask): Promise<PageOutcome> {
  let named = false
  try {
    try {
      await fsyncAsync(staged.fd)
    } finally {
      closeSync(staged.fd)
    }
    if (task.place === 'rename') renameSync(file.temp, file.to)
    else {
      linkSync(file.temp, file.to)
      staged.outcome.placedMtimeMs = lstatSync(file.to).mtimeMs
    }
    named = true
    return staged.outcome
  } catch {
    return NOT_COPIED
  } finally {
    if (!named || task.place === 'link') unlinkQuietly(file.temp)
  }
}

/**
 * The page: every file written to its temporary first, one after another in this thread, then the
 * temporaries flushed (the thread pool), `syncsAtOnce` at a time, each renamed or linked as soon as
 * its own flush returned; then each folder that got a name is flushed once. Not a flush behind each
 * write: a create waits in the file system while a flush commits its journal, so creates that run
 * between flushes wait for each commit (the per-file path's batch writes all, then flushes too).
 * Settles only once nothing is in flight.
 */
export async function copyPage(task: CopyPageTask): Promise<CopyPageResult> {
  const outcomes: PageOutcome[] = new Array(task.files.length).fill(NOT_COPIED)
  const buffers = new Buffers()
  const staged: Array<{ i: number; staged: Staged }> = []
  let stopped = false
  for (let i = 0; i < task.files.length && !stopped; i++) {
    if (task.stop && Atomics.load(task.stop, 0)) stopped = true
    else {
      const done = stageOrNot(task.files[i], task, buffers)
      if ('fd' in done) staged.push({ i, staged: done })
      else outcomes[i] = done
    }
  }
  const dirs = new Set<string>()
  let next = 0
  const flusher = async () => {
    while (next < staged.length) {
      const { i, staged: s } = staged[next++]
      outcomes[i] = await place(task.files[i], s, task)
      if (outcomes[i].copied) dirs.add(path.dirname(task.files[i].to))
    }
  }
  await Promise.all(Array.from({ length: Math.min(task.syncsAtOnce, staged.length) }, flusher))
  try {
    // the names outlive a crash too
    for (const dir of dirs) {
      const fd = openSync(dir, 'r')
      try {
        await fsyncAsync(fd)
      } finally {
        closeSync(fd)
      }
    }
  } catch (err) {
    return { outcomes, stopped, error: { message: (err as Error).message, code: (err as NodeJS.ErrnoException).code } }
  }
  return { outcomes, stopped }
}

/** stage, any error answered as not copied (the caller's path meets it again) */
function stageOrNot(file: PageFile, task: CopyPageTask, buffers: Buffers): Staged | PageOutcome {
  try {
    return stage(file, task, buffers) ?? NOT_COPIED
  } catch {
    return NOT_COPIED
  }
}

/** the piscina worker entry (COPY_PAGE_WORKER) */
export default copyPage

/** a file to remove (RemoveUnchangedTask): its name through its folder's checked real path (InsideRoot.pathOf), never followed */
export interface UnchangedFile {
  path: string
  /** what it had when it was copied: size and modification time (ms, floored) */
  size: number
  mtimeMs: number
}

export interface RemoveUnchangedTask {
  files: UnchangedFile[]
}

/**
 * Per file: `removed` (it was still a plain file with the size and modification time it was copied
 * with), `missing` (nothing there: gone already), `changed` (written to or replaced since: it stays),
 * `failed` (another error: left to the caller's path, which meets it again).
 */
export type Removal = 'removed' | 'missing' | 'changed' | 'failed'

/**
 * A page of originals removed once their copies were verified (an archive's release), by lstat
 * and unlink of each name in this thread: two synchronous calls per file instead of two
 * thread-pool hops on the event loop. Piscina entry `removeUnchanged` of COPY_PAGE_WORKER.
 */
export function removeUnchanged(task: RemoveUnchangedTask): Removal[] {
  return task.files.map((f) => {
    try {
      const stats = lstatSync(f.path, { throwIfNoEntry: false })
      if (!stats) return 'missing'
      if (!stats.isFile() || stats.size !== f.size || Math.floor(stats.mtimeMs) !== f.mtimeMs) return 'changed'
      unlinkSync(f.path)
      return 'removed'
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'failed'
    }
  })
}

/** Linux with /proc: the opened descriptor's real path can be checked (elsewhere a page is not copied this way) */
export const COPY_PAGE = PROC_FDS

/** the worker module (this file): `piscina.run(task, { filename: fileURLToPath(COPY_PAGE_WORKER) })` */
export const COPY_PAGE_WORKER = new URL(import.meta.url)
