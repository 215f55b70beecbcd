import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import { COPY_PAGE, COPY_PAGE_WORKER, SUMS_WORKER, stopFlagOf, sumsOrThrow, type CopyPageTask, type DescriptorSumsResult, type DescriptorSumsTask, type Removal, type UnchangedFile } from '../../core/index.js'
import { PARALLEL } from './transfer.js'
import { SYNCS_AT_ONCE, copyInThread, type CopyFds, type CopyPage } from './targets/types.js'
import { COMPARE_WORKER, compareInThread, type CompareFds, type CompareResult, type CompareTask } from './compare.js'

/** the stop flag of a copy without a signal: never set */
const NEVER = new Int32Array(new SharedArrayBuffer(4))
const COMPARE_FILE = fileURLToPath(COMPARE_WORKER)
const COPY_PAGE_FILE = fileURLToPath(COPY_PAGE_WORKER)

/**
 * Below this a file is copied in the event loop's thread: a worker round trip (~50 µs,
 * PERFORMANCE.md) costs more than hashing it, and the thread pool's reads and writes stay async.
 */
export const IN_THREAD_BELOW = 1 << 20

/** a page's files in `count` tasks at once (as many as `run` is given), their answers in the files' order */
function inParts<F, R>(files: F[], count: number, run: (part: F[]) => Promise<R>): Promise<R[]> {
  const size = Math.ceil(files.length / Math.max(1, Math.min(count, files.length)))
  const parts: F[][] = []
  for (let i = 0; i < files.length; i += size) parts.push(files.slice(i, i + size))
  return Promise.all(parts.map(run))
}

/**
 * Copies and hashes files in one pass off the event loop: SHA-256 of a large file takes the event
 * loop's thread for about a second per GiB, so a large file is copied (read, hashed, written with
 * positional I/O) in a worker thread, as many at once as there are cores, and the event loop only
 * waits for the sums. A pool of its own, not the job runner's: a task must never be abandoned
 * while it still reads or writes a descriptor its caller is about to close, so a cancelled job
 * stops the copy between two chunks (a shared flag) and waits for the worker to return.
 */
export class Copier {
  private pool?: Piscina
  /**
   * `threads` (the plugin's `copyThreads`): by default one per file a transfer has in flight
   * (PARALLEL), at least one per core. A thread waits in its synchronous reads and writes (a file
   * not in the page cache, writeback throttling); with only one thread per core a core would idle
   * meanwhile. On a machine loaded by other work the four threads also keep the share of CPU the
   * thread pool's four threads gave the in-thread copy. 0: every file in the caller's thread.
   */
  constructor(private readonly threads = Math.max(availableParallelism(), PARALLEL)) {}

  /** CopyFds: the bytes of `from` from offset 0 written to `to` at the same offsets (or only read, `to` null), and their sums (a bound function: passed on as is) */
  readonly copy: CopyFds = async (from, to, size, signal, readBack) => {
    signal?.throwIfAborted()
    if (size < IN_THREAD_BELOW || this.threads === 0) return copyInThread(from, to, size, signal, readBack)
    // the core's sums worker (the same loop hashes assets): the next chunk is read while this one is hashed and written
    const task: DescriptorSumsTask = { from: from.fd, to: to?.fd ?? null, sha256: true, crc32: !(readBack && !to), stop: signal ? stopFlagOf(signal) : NEVER }
    const r: DescriptorSumsResult = await this.workers().run(task)
    if ('error' in r) signal?.throwIfAborted()
    const sums = sumsOrThrow(r)
    return { size: sums.size, sha256: sums.sha256!, crc32: sums.crc32 ?? '' }
  }

  /**
   * CompareFds: in a worker thread of the same pool (the comparison's own module), so reading and
   * comparing large files stays off the event loop like their copy; in the caller's thread with
   * copyThreads 0. The callers compare large files only (transfer.ts COMPARE_FROM).
   */
  readonly compare: CompareFds = async (a, b, signal) => {
    signal?.throwIfAborted()
    if (this.threads === 0) return compareInThread(a, b, signal)
    const task: CompareTask = { a: a.fd, b: b.fd, stop: signal ? stopFlagOf(signal) : NEVER }
    const r: CompareResult = await this.workers().run(task, { filename: COMPARE_FILE })
    if ('error' in r) {
      signal?.throwIfAborted()
      throw Object.assign(new Error(r.error.message), r.error.name ? { name: r.error.name } : {}, r.error.code ? { code: r.error.code } : {})
    }
    return r
  }

  /**
   * CopyPage: a page of files below IN_THREAD_BELOW in one task of the same pool (the core's
   * copy-page module), one round trip instead of a dozen thread-pool hops per file on the event
   * loop; absent with copyThreads 0 (everything in the caller's thread) and where /proc is missing.
   */
  get copyPage(): CopyPage | undefined {
    return this.threads > 0 && COPY_PAGE ? this.runPage : undefined
  }

  private readonly runPage: CopyPage = async (task, signal) => {
    signal?.throwIfAborted()
    const full: CopyPageTask = { ...task, below: IN_THREAD_BELOW, syncsAtOnce: SYNCS_AT_ONCE, stop: signal ? stopFlagOf(signal) : NEVER }
    return this.workers().run(full, { filename: COPY_PAGE_FILE })
  }

  /**
   * A page of originals removed in PARALLEL tasks of the same pool at once (the core's
   * removeUnchanged: lstat, compare, unlink each), as copyPage; absent where copyPage is. Not one
   * task: an unlink often waits in the file system (a journal commit), and one thread's unlinks in
   * a row were slower than the per-file way's four in flight (bench/README.md, `--only pages`);
   * a page copy's waits are its flushes, which its task runs several at once already.
   */
  get removePage(): ((files: UnchangedFile[]) => Promise<Removal[]>) | undefined {
    return this.copyPage && this.runRemoval
  }

  private readonly runRemoval = async (files: UnchangedFile[]): Promise<Removal[]> => {
    const results = await inParts(files, PARALLEL, (part) => this.workers().run({ files: part }, { filename: COPY_PAGE_FILE, name: 'removeUnchanged' }) as Promise<Removal[]>)
    return results.flat()
  }

  private workers(): Piscina {
    this.pool ??= new Piscina({ filename: fileURLToPath(SUMS_WORKER), maxThreads: this.threads, minThreads: 0, idleTimeout: 10_000 })
    return this.pool
  }

  /** copies (and comparisons) done in worker threads so far (the small copies, done in the caller's thread, do not count) */
  get inWorkers(): number {
    return this.pool?.completed ?? 0
  }

  async close(): Promise<void> {
    const pool = this.pool
    this.pool = undefined
    await pool?.destroy()
  }
}
