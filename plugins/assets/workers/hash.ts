import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { crc32 } from 'node:zlib'

export interface HashTask {
  /**
   * A descriptor the job opened and checked (`withOriginal`). Worker threads share the process's
   * descriptors, so the worker hashes the very file that was checked, never a name that may have
   * been swapped for a symlink since; the job closes it when the task is done.
   */
  fd: number
  sha256: boolean
}

export interface HashResult {
  crc32: string
  sha256: string | null
  bytes: number
}

/**
 * Runs in a piscina worker thread: one read pass with 1 MiB chunks feeds CRC-32 (native zlib) and,
 * on request, SHA-256. Gets a descriptor, never file contents (PERFORMANCE.md).
 */
export default async function hash(task: HashTask): Promise<HashResult> {
  let crc = 0
  let bytes = 0
  const sha = task.sha256 ? createHash('sha256') : null
  // positional reads from 0 (`start`), so the descriptor's offset does not matter; it stays open for the job to close
  for await (const chunk of createReadStream('', { fd: task.fd, start: 0, autoClose: false, highWaterMark: 1 << 20 })) {
    crc = crc32(chunk as Buffer, crc)
    sha?.update(chunk as Buffer)
    bytes += (chunk as Buffer).length
  }
  return { crc32: crc.toString(16).padStart(8, '0'), sha256: sha ? sha.digest('hex') : null, bytes }
}
