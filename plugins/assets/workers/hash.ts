import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { crc32 } from 'node:zlib'

export interface HashTask {
  file: string
  sha256: boolean
}

export interface HashResult {
  crc32: string
  sha256: string | null
  bytes: number
}

/**
 * Runs in a piscina worker thread: one read pass with 1 MiB chunks feeds CRC-32 (native zlib) and,
 * on request, SHA-256. Gets a path, never file contents (PERFORMANCE.md).
 */
export default async function hash(task: HashTask): Promise<HashResult> {
  let crc = 0
  let bytes = 0
  const sha = task.sha256 ? createHash('sha256') : null
  for await (const chunk of createReadStream(task.file, { highWaterMark: 1 << 20 })) {
    crc = crc32(chunk as Buffer, crc)
    sha?.update(chunk as Buffer)
    bytes += (chunk as Buffer).length
  }
  return { crc32: crc.toString(16).padStart(8, '0'), sha256: sha ? sha.digest('hex') : null, bytes }
}
