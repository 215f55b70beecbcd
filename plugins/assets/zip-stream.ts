import { createReadStream } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { Readable } from 'node:stream'

/**
 * A STORE zip of files whose sizes and CRC-32s are known up front, laid out without reading them:
 * local header, the file's bytes, …, central directory, end records. So a download needs no packed
 * copy on disk, its Content-Length is exact, and any byte range maps onto a few header bytes and a
 * range of a file. Media is compressed already: deflate would cost CPU and save nothing.
 * Zip64 records are written only where a size or offset needs them (files of 4 GiB and more).
 */

export interface ZipSource {
  /** the name inside the zip (UTF-8, `/`-separated) */
  name: string
  /** a path, or a descriptor opened (and checked) once, so the bytes come from the file that was checked */
  file: string | FileHandle
  size: number
  crc32: number
  mtime: Date
}

type Segment = { buffer: Buffer } | { file: string | FileHandle; size: number }
export interface ZipLayout {
  size: number
  segments: Segment[]
}

const U32_MAX = 0xffffffff
const UTF8_NAMES = 0x0800
const MADE_BY_UNIX = (3 << 8) | 45
const REGULAR_FILE_0644 = (0o100644 << 16) >>> 0

/** MS-DOS date and time (local time, two-second steps, from 1980), as zip tools expect */
function dosDateTime(d: Date): { date: number; time: number } {
  const year = Math.min(Math.max(d.getFullYear(), 1980), 2107)
  return {
    date: ((year - 1980) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | Math.floor(d.getSeconds() / 2),
  }
}

/** zip64 extended information: the 64-bit values whose 32-bit fields hold 0xffffffff, in spec order */
function zip64Extra(values: number[]): Buffer {
  if (!values.length) return Buffer.alloc(0)
  const extra = Buffer.alloc(4 + 8 * values.length)
  extra.writeUInt16LE(0x0001, 0)
  extra.writeUInt16LE(8 * values.length, 2)
  values.forEach((v, i) => extra.writeBigUInt64LE(BigInt(v), 4 + 8 * i))
  return extra
}

export function zipLayout(sources: ZipSource[]): ZipLayout {
  const segments: Segment[] = []
  const central: Buffer[] = []
  let offset = 0
  for (const s of sources) {
    const name = Buffer.from(s.name, 'utf8')
    const { date, time } = dosDateTime(s.mtime)
    const big = s.size >= U32_MAX
    // a local header carries both sizes in its zip64 field, or neither
    const localExtra = zip64Extra(big ? [s.size, s.size] : [])
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(big ? 45 : 20, 4)
    local.writeUInt16LE(UTF8_NAMES, 6)
    local.writeUInt16LE(0, 8) // STORE
    local.writeUInt16LE(time, 10)
    local.writeUInt16LE(date, 12)
    local.writeUInt32LE(s.crc32 >>> 0, 14)
    local.writeUInt32LE(big ? U32_MAX : s.size, 18)
    local.writeUInt32LE(big ? U32_MAX : s.size, 22)
    local.writeUInt16LE(name.length, 26)
    local.writeUInt16LE(localExtra.length, 28)
    segments.push({ buffer: Buffer.concat([local, name, localExtra]) }, { file: s.file, size: s.size })

    const farOffset = offset >= U32_MAX
    const centralExtra = zip64Extra([...(big ? [s.size, s.size] : []), ...(farOffset ? [offset] : [])])
    const entry = Buffer.alloc(46)
    entry.writeUInt32LE(0x02014b50, 0)
    entry.writeUInt16LE(MADE_BY_UNIX, 4)
    entry.writeUInt16LE(big || farOffset ? 45 : 20, 6)
    entry.writeUInt16LE(UTF8_NAMES, 8)
    entry.writeUInt16LE(0, 10)
    entry.writeUInt16LE(time, 12)
    entry.writeUInt16LE(date, 14)
    entry.writeUInt32LE(s.crc32 >>> 0, 16)
    entry.writeUInt32LE(big ? U32_MAX : s.size, 20)
    entry.writeUInt32LE(big ? U32_MAX : s.size, 24)
    entry.writeUInt16LE(name.length, 28)
    entry.writeUInt16LE(centralExtra.length, 30)
    entry.writeUInt32LE(REGULAR_FILE_0644, 38)
    entry.writeUInt32LE(farOffset ? U32_MAX : offset, 42)
    central.push(entry, name, centralExtra)
    offset += 30 + name.length + localExtra.length + s.size
  }
  const directory = Buffer.concat(central)
  const count = sources.length
  const needs64 = count >= 0xffff || directory.length >= U32_MAX || offset >= U32_MAX
  const end: Buffer[] = [directory]
  if (needs64) {
    const record = Buffer.alloc(56)
    record.writeUInt32LE(0x06064b50, 0)
    record.writeBigUInt64LE(44n, 4)
    record.writeUInt16LE(MADE_BY_UNIX, 12)
    record.writeUInt16LE(45, 14)
    record.writeBigUInt64LE(BigInt(count), 24)
    record.writeBigUInt64LE(BigInt(count), 32)
    record.writeBigUInt64LE(BigInt(directory.length), 40)
    record.writeBigUInt64LE(BigInt(offset), 48)
    const locator = Buffer.alloc(20)
    locator.writeUInt32LE(0x07064b50, 0)
    locator.writeBigUInt64LE(BigInt(offset + directory.length), 8)
    locator.writeUInt32LE(1, 16)
    end.push(record, locator)
  }
  const eocd = Buffer.alloc(22)
  eocd.writeUInt32LE(0x06054b50, 0)
  eocd.writeUInt16LE(Math.min(count, 0xffff), 8)
  eocd.writeUInt16LE(Math.min(count, 0xffff), 10)
  eocd.writeUInt32LE(Math.min(directory.length, U32_MAX), 12)
  eocd.writeUInt32LE(Math.min(offset, U32_MAX), 16)
  end.push(eocd)
  segments.push({ buffer: Buffer.concat(end) })
  return { size: segments.reduce((n, s) => n + ('buffer' in s ? s.buffer.length : s.size), 0), segments }
}

/** bytes start..end (inclusive) of the laid-out zip, reading only the parts of files inside the range */
export function zipRange(layout: ZipLayout, start: number, end: number): Readable {
  async function* parts() {
    let at = 0
    for (const segment of layout.segments) {
      const length = 'buffer' in segment ? segment.buffer.length : segment.size
      const from = Math.max(start, at)
      const to = Math.min(end + 1, at + length) // exclusive
      if (from < to) {
        if ('buffer' in segment) yield segment.buffer.subarray(from - at, to - at)
        else yield* readRange(segment.file, from - at, to - at - 1)
      }
      at += length
      if (at > end) return
    }
  }
  return Readable.from(parts(), { objectMode: false })
}

/** bytes start..end (inclusive) of a file by name, or by an open descriptor (positional reads; the caller closes it) */
function readRange(file: string | FileHandle, start: number, end: number): Readable {
  const options = { start, end, highWaterMark: 1 << 20 }
  return typeof file === 'string' ? createReadStream(file, options) : createReadStream('', { ...options, fd: file, autoClose: false })
}
