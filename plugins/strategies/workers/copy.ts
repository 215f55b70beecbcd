import { createHash } from 'node:crypto'
import { readSync, writeSync } from 'node:fs'
import { crc32 } from 'node:zlib'

export interface CopyTask {
  /**
   * Descriptors the caller opened and checked (the original inside its project, a temporary on the
   * target). Worker threads share the process's descriptors, so the worker reads the very file that
   * was checked; the caller closes both once the task has settled.
   */
  from: number
  /** null: only read and hash (a verification read-back, the checksums S3 needs before an upload) */
  to: number | null
  /** set to 1 by the caller to stop the copy between two chunks (a cancelled job) */
  stop: Int32Array
}

export type CopyResult = { size: number; sha256: string; crc32: string; error?: undefined } | { error: { message: string; code?: string } }

const CHUNK = 1 << 20

/**
 * Runs in a piscina worker thread (or in the caller's thread for a small file): one pass of 1 MiB
 * positional reads from offset 0 feeds SHA-256 and CRC-32 and, when `to` is given, the same buffer
 * is written at the same offset, so the bytes written are the bytes hashed. Plain synchronous
 * calls: the thread has nothing else to do, and every call has returned when the task settles
 * (no read or write is left in flight on a descriptor the caller is about to close).
 */
export default function copy(task: CopyTask): CopyResult {
  try {
    return copyHashed(task)
  } catch (err) {
    // an error crosses to the caller's thread without its `code` (ENOSPC is a full target, 507): handed back as a value
    return { error: { message: (err as Error).message, code: (err as NodeJS.ErrnoException).code } }
  }
}

function copyHashed(task: CopyTask): CopyResult {
  const sha = createHash('sha256')
  let crc = 0
  let pos = 0
  const buf = Buffer.allocUnsafe(CHUNK)
  for (;;) {
    if (Atomics.load(task.stop, 0)) throw Object.assign(new Error('The copy was stopped'), { code: 'ABORT_ERR' })
    const n = readSync(task.from, buf, 0, CHUNK, pos)
    if (!n) break
    const chunk = buf.subarray(0, n)
    sha.update(chunk)
    crc = crc32(chunk, crc)
    if (task.to !== null) for (let off = 0; off < n; ) off += writeSync(task.to, chunk, off, n - off, pos + off)
    pos += n
  }
  return { size: pos, sha256: sha.digest('hex'), crc32: crc.toString(16).padStart(8, '0') }
}
