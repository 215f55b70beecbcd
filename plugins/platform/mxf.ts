import { constants } from 'node:fs'
import { open } from 'node:fs/promises'

/** how much of an MXF file's start is read for its header metadata: OP-Atom headers are a few KiB */
const HEADER_BYTES = 64 * 1024
/** the key of a header partition pack (byte 13, the partition status, and 14 vary) */
const HEADER_PARTITION = Buffer.from('060e2b34020501010d010201010200', 'hex').subarray(0, 13)
/** the key of the Material Package set in the header metadata */
const MATERIAL_PACKAGE = Buffer.from('060e2b34025301010d01010101013600', 'hex')
/** local tag of a package's UID (a 32-byte UMID) */
const PACKAGE_UID_TAG = 0x4401

/**
 * The Material Package UID of an MXF file: the UMID that every OP-Atom file of one clip carries
 * (Avid writes its video and each audio track into separate files of one material package). Read
 * from the file's first 64 KiB, undefined when it is not an MXF file or the header holds no
 * Material Package there. `read` fills a buffer from a position of the file.
 */
export async function materialPackageUid(read: (buffer: Buffer, position: number) => Promise<number>): Promise<string | undefined> {
  const buffer = Buffer.alloc(HEADER_BYTES)
  const length = await read(buffer, 0)
  const data = buffer.subarray(0, length)
  if (data.length < 16 || !data.subarray(0, 13).equals(HEADER_PARTITION)) return undefined
  const at = data.indexOf(MATERIAL_PACKAGE)
  if (at < 0) return undefined
  const size = berLength(data, at + 16)
  if (!size) return undefined
  const end = Math.min(data.length, size.start + size.length)
  // a local set: 2-byte tag, 2-byte length, value
  for (let p = size.start; p + 4 <= end; ) {
    const tag = data.readUInt16BE(p)
    const len = data.readUInt16BE(p + 2)
    if (tag === PACKAGE_UID_TAG && len === 32 && p + 4 + len <= end) return data.subarray(p + 4, p + 4 + len).toString('hex')
    p += 4 + len
  }
  return undefined
}

/** a BER length at `at`: the value's start and length */
function berLength(data: Buffer, at: number): { start: number; length: number } | undefined {
  if (at >= data.length) return undefined
  const first = data[at]
  if (first < 0x80) return { start: at + 1, length: first }
  const bytes = first & 0x7f
  if (bytes === 0 || bytes > 8 || at + 1 + bytes > data.length) return undefined
  let length = 0
  for (let i = 0; i < bytes; i++) length = length * 256 + data[at + 1 + i]
  return { start: at + 1 + bytes, length }
}

/** the MXF package UID of a file; a symlink put in its place is not followed (nothing outside a storage is read) */
export async function packageUidOf(file: string): Promise<string | undefined> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => undefined)
  if (!handle) return undefined
  try {
    return await materialPackageUid(async (buffer, position) => (await handle.read(buffer, 0, buffer.length, position)).bytesRead)
  } finally {
    await handle.close()
  }
}
