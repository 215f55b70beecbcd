/**
 * Byte-for-byte comparison of two open files (a fingerprint verification: the copy on a disk target
 * against its original, read again). This module is also a piscina worker entry (`COMPARE_WORKER`,
 * default export) run by the Copier's pool: it imports only Node's built-ins, so a worker thread
 * loads it in milliseconds, like the core's sums worker.
 *
 * Why compare instead of hashing the copy again: the copy pass already hashed the very bytes it
 * wrote, so a copy equal to its original (unchanged since: same bytes) is equal to the bytes that
 * were hashed. Comparing 1 MiB chunks costs a memcmp (tens of GB/s) where a second SHA-256 costs a
 * full pass of the hash (about 0.26 CPU-s per 512 MiB on the bench machine, bench/README.md).
 */
import { read } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { promisify } from 'node:util'

export interface CompareTask {
  /** the original (read again), a descriptor the caller opened inside its root */
  a: number
  /** the copy, a descriptor the caller opened on the target */
  b: number
  /** set to 1 by the caller to stop between two chunks (a cancelled job) */
  stop?: Int32Array
}

/** `differsAt`: the first offset where the two differ (a shorter file differs where it ends), -1 when they are equal; `size`: bytes compared */
export interface Compared {
  size: number
  differsAt: number
}

const CHUNK = 1 << 20
const readAt = promisify(read)

/** fills `buf` from `pos` (a short read of a regular file before its end is read on), the bytes read */
async function readFull(fd: number, buf: Buffer, pos: number): Promise<number> {
  let got = 0
  while (got < buf.length) {
    const { bytesRead } = await readAt(fd, buf, got, buf.length - got, pos + got)
    if (!bytesRead) break
    got += bytesRead
  }
  return got
}

/**
 * Reads both files from offset 0 in 1 MiB positional reads (never a stream: it could close the
 * caller's descriptor, see sums.ts) and compares chunk by chunk; the next pair of chunks is being
 * read (the thread pool) while the current one is compared. Settles only once no read is in
 * flight, so the caller may close both descriptors as soon as it has.
 */
export async function compareDescriptors(task: CompareTask): Promise<Compared> {
  const bufs = [
    [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)],
    [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)],
  ]
  const pair = (i: number, pos: number) => Promise.all([readFull(task.a, bufs[i][0], pos), readFull(task.b, bufs[i][1], pos)])
  let pos = 0
  let pending: Promise<number[]> | null = pair(0, 0)
  try {
    for (let i = 0; ; i ^= 1) {
      const [na, nb] = await pending!
      pending = null
      if (task.stop && Atomics.load(task.stop, 0)) throw Object.assign(new Error('The verification was stopped'), { name: 'AbortError', code: 'ABORT_ERR' })
      // the next pair is read while this one is compared (both full chunks: neither file ended yet)
      if (na === CHUNK && nb === CHUNK) pending = pair(i ^ 1, pos + CHUNK)
      const n = Math.min(na, nb)
      if (!bufs[i][0].subarray(0, n).equals(bufs[i][1].subarray(0, n))) {
        let at = 0
        while (bufs[i][0][at] === bufs[i][1][at]) at++
        return { size: pos + at, differsAt: pos + at }
      }
      if (na !== nb) return { size: pos + n, differsAt: pos + n }
      if (na < CHUNK) return { size: pos + na, differsAt: -1 }
      pos += CHUNK
    }
  } finally {
    // a failure while reads are in flight: let them settle before the caller may close the descriptors
    await pending?.catch(() => {})
  }
}

/** a worker's answer: an error crosses threads without its `code`, so it is handed back as a value */
export type CompareResult = Compared | { error: { message: string; name?: string; code?: string } }

/** the piscina worker entry (COMPARE_WORKER): compareDescriptors, its failure as a value */
export default async function compareWorker(task: CompareTask): Promise<CompareResult> {
  try {
    return await compareDescriptors(task)
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    return { error: { message: e.message, name: e.name, code: e.code } }
  }
}

/** two open files compared from offset 0 (Copier.compare: in a worker thread when it has them) */
export type CompareFds = (a: FileHandle, b: FileHandle, signal?: AbortSignal) => Promise<Compared>

/** CompareFds in the caller's thread (async positional reads): tools without a Copier, copyThreads 0 */
export const compareInThread: CompareFds = async (a, b, signal) => {
  signal?.throwIfAborted()
  const stop = new Int32Array(1)
  const onAbort = () => Atomics.store(stop, 0, 1)
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    return await compareDescriptors({ a: a.fd, b: b.fd, stop })
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}

/** the worker module (this file), for the Copier's pool (`run(task, { filename })`) */
export const COMPARE_WORKER = new URL(import.meta.url)
