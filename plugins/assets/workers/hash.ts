import { createHash } from 'node:crypto'
import { read } from 'node:fs'
import { promisify } from 'node:util'
import { crc32 } from 'node:zlib'

export interface HashTask {
  /**
   * A descriptor the job opened and checked (`withOriginal`). Worker threads share the process's
   * descriptors, so the worker hashes the very file that was checked, never a name that may have
   * been swapped for a symlink since; the job closes it when the task is done.
   */
  fd: number
  sha256: boolean
  /**
   * Set to 1 when the job is cancelled or stopped (`hashDescriptor`, hash-jobs.ts): the task stops
   * between two reads, once the read in flight settled. The task is never ended from outside (its
   * thread terminated while the job closes the descriptor), which could leave a read queued on a
   * closed descriptor, or on one the process had meanwhile reused for another file.
   */
  stop?: Int32Array
}

export interface HashResult {
  crc32: string
  sha256: string | null
  bytes: number
}

const CHUNK = 1 << 20
const readAt = promisify(read)

/**
 * Runs in a piscina worker thread: one read pass with 1 MiB chunks feeds CRC-32 (native zlib) and,
 * on request, SHA-256. Gets a descriptor, never file contents (PERFORMANCE.md).
 *
 * The descriptor belongs to the job: it is read with positional reads only, never handed to a
 * stream (a read stream that errors or is left early closes its descriptor, autoClose or not, and
 * the job's own close later could close a number the process has reused for another file). Two
 * buffers keep the next read in flight while a chunk is hashed; no read is left running when this
 * returns or throws, so the job may close the descriptor as soon as the task settles.
 */
export default async function hash(task: HashTask): Promise<HashResult> {
  let crc = 0
  let bytes = 0
  const sha = task.sha256 ? createHash('sha256') : null
  const buffers = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)]
  let pending: Promise<{ bytesRead: number }> | null = readAt(task.fd, buffers[0], 0, CHUNK, 0)
  try {
    for (let i = 0; ; i ^= 1) {
      const { bytesRead } = await pending
      pending = null
      if (!bytesRead) break
      if (task.stop && Atomics.load(task.stop, 0)) throw Object.assign(new Error('cancelled'), { name: 'AbortError' })
      const chunk = buffers[i].subarray(0, bytesRead)
      bytes += bytesRead
      pending = readAt(task.fd, buffers[i ^ 1], 0, CHUNK, bytes)
      crc = crc32(chunk, crc)
      sha?.update(chunk)
    }
  } finally {
    // a failure while a read is in flight: let it settle before the job may close the descriptor
    await pending?.catch(() => {})
  }
  return { crc32: crc.toString(16).padStart(8, '0'), sha256: sha ? sha.digest('hex') : null, bytes }
}
