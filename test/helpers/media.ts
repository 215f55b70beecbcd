import { execFile } from 'node:child_process'
import { createDecipheriv } from 'node:crypto'
import { mkdir, readdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import { inflateRawSync } from 'node:zlib'
import sharp from 'sharp'
import { waitForJob, waitForJobs, type TestServer } from '../../core/testing/index.js'
import { MediaTools } from '../../core/media/tools.js'

/**
 * Media for tests, generated on the spot with ffmpeg and sharp (no binary fixtures), and the
 * small readers the media tests need: ffprobe, proxy decryption, zip entries.
 */

const run = promisify(execFile)
// the server's own lookup (MAMKIT_FFMPEG/MAMKIT_FFPROBE, PATH, npm packages): `npm ci` is enough for the tests too
let tools: Promise<MediaTools> | undefined
const tool = async (name: 'ffmpeg' | 'ffprobe') => (await (tools ??= new MediaTools().ready())).get(name)?.path ?? name

export interface VideoOptions {
  seconds?: number
  size?: string
  rate?: number
  timecode?: string
  /** written as the container title: the clip name analysis reports */
  title?: string
  reel?: string
  creationTime?: string
  /** sine frequency of the audio track; null for a video without audio */
  frequency?: number | null
}

/** ffmpeg (found as the server finds it) with the given arguments, quiet, overwriting */
export async function ffmpeg(args: string[]): Promise<void> {
  await run(await tool('ffmpeg'), ['-hide_banner', '-nostdin', '-v', 'error', '-y', ...args], { timeout: 120_000 })
}

/** a test-pattern clip with a sine tone and a start timecode (container from the extension: .mov, .mp4 …) */
export async function makeVideo(file: string, o: VideoOptions = {}): Promise<string> {
  const { seconds = 2, size = '320x240', rate = 25, timecode = '01:00:00:00', frequency = 440 } = o
  await mkdir(path.dirname(file), { recursive: true })
  const meta: string[] = []
  if (o.title) meta.push('-metadata', `title=${o.title}`)
  if (o.reel) meta.push('-metadata', `reel_name=${o.reel}`)
  if (o.creationTime) meta.push('-metadata', `creation_time=${o.creationTime}`)
  await ffmpeg([
    '-f', 'lavfi', '-i', `testsrc2=size=${size}:rate=${rate}`,
    ...(frequency === null ? [] : ['-f', 'lavfi', '-i', `sine=frequency=${frequency}`]),
    '-t', String(seconds),
    '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p',
    ...(frequency === null ? [] : ['-c:a', 'aac']),
    '-timecode', timecode,
    // keeps custom keys such as reel_name in a QuickTime file
    ...(file.endsWith('.mov') ? ['-movflags', 'use_metadata_tags'] : []),
    ...meta,
    file,
  ])
  return file
}

/** a sine tone as WAV (PCM) or MP3, by extension */
export async function makeAudio(file: string, o: { seconds?: number; frequency?: number; channels?: number } = {}): Promise<string> {
  const { seconds = 2, frequency = 440, channels = 2 } = o
  await mkdir(path.dirname(file), { recursive: true })
  const codec = file.endsWith('.mp3') ? ['-c:a', 'libmp3lame', '-b:a', '64k'] : ['-c:a', 'pcm_s16le']
  await ffmpeg(['-f', 'lavfi', '-i', `sine=frequency=${frequency}:sample_rate=44100`, '-t', String(seconds), '-ac', String(channels), ...codec, file])
  return file
}

/** a JPEG still with camera EXIF (Make/Model/DateTimeOriginal) */
export async function makeStill(file: string, o: { width?: number; height?: number; make?: string; model?: string } = {}): Promise<string> {
  const { width = 640, height = 480, make = 'TestCam', model = 'X1' } = o
  await mkdir(path.dirname(file), { recursive: true })
  const buffer = await sharp({ create: { width, height, channels: 3, background: { r: 200, g: 60, b: 30 } } })
    .withMetadata({ exif: { IFD0: { Make: make, Model: model }, IFD2: { DateTimeOriginal: '2024:05:06 07:08:09' } } } as any)
    .jpeg()
    .toBuffer()
  await writeFile(file, buffer)
  return file
}

/** ffprobe's JSON (format and streams) of a file */
export async function probe(file: string): Promise<{ format: any; streams: any[] }> {
  const { stdout } = await run(await tool('ffprobe'), ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file], { timeout: 60_000, maxBuffer: 16 << 20 })
  return JSON.parse(stdout)
}

/** the start timecode anywhere in a probe (format, video or tmcd stream tags) */
export const timecodeOf = (p: { format: any; streams: any[] }): string | undefined =>
  p.format.tags?.timecode ?? p.streams.map((s) => s.tags?.timecode).find(Boolean)

/** decrypts a stored proxy: AES-256-CTR, the first 16 bytes of the file are the initial counter */
export function decryptProxy(encrypted: Buffer, key: Buffer): Buffer {
  const decipher = createDecipheriv('aes-256-ctr', key, encrypted.subarray(0, 16))
  return Buffer.concat([decipher.update(encrypted.subarray(16)), decipher.final()])
}

/** every file below `dir` (absolute paths) */
export async function filesBelow(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) out.push(...(await filesBelow(p)))
    else out.push(p)
  }
  return out
}

export interface ZipEntry {
  name: string
  method: number
  crc32: number
  data: Buffer
}

/** the entries of a zip, read through its central directory (STORE and deflate; zip64 sizes included) */
export function readZip(zip: Buffer): ZipEntry[] {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  if (eocd < 0) throw new Error('not a zip: no end of central directory')
  let count = zip.readUInt16LE(eocd + 10)
  let offset = zip.readUInt32LE(eocd + 16)
  const z64 = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x06, 0x06]))
  if (z64 >= 0 && (offset === 0xffffffff || count === 0xffff)) {
    count = Number(zip.readBigUInt64LE(z64 + 32))
    offset = Number(zip.readBigUInt64LE(z64 + 48))
  }
  const out: ZipEntry[] = []
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(offset) !== 0x02014b50) throw new Error('bad central directory entry')
    const method = zip.readUInt16LE(offset + 10)
    const crc32 = zip.readUInt32LE(offset + 16)
    let compressed = zip.readUInt32LE(offset + 20)
    let size = zip.readUInt32LE(offset + 24)
    const nameLength = zip.readUInt16LE(offset + 28)
    const extraLength = zip.readUInt16LE(offset + 30)
    const commentLength = zip.readUInt16LE(offset + 32)
    let local = zip.readUInt32LE(offset + 42)
    const name = zip.toString('utf8', offset + 46, offset + 46 + nameLength)
    // zip64 extra field: the values that were 0xffffffff above, in order
    for (let e = offset + 46 + nameLength; e < offset + 46 + nameLength + extraLength; ) {
      const id = zip.readUInt16LE(e)
      const len = zip.readUInt16LE(e + 2)
      if (id === 0x0001) {
        let p = e + 4
        if (size === 0xffffffff) (size = Number(zip.readBigUInt64LE(p))), (p += 8)
        if (compressed === 0xffffffff) (compressed = Number(zip.readBigUInt64LE(p))), (p += 8)
        if (local === 0xffffffff) local = Number(zip.readBigUInt64LE(p))
      }
      e += 4 + len
    }
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28)
    const raw = zip.subarray(start, start + compressed)
    out.push({ name, method, crc32, data: method === 0 ? Buffer.from(raw) : inflateRawSync(raw) })
    if (size !== out[out.length - 1].data.length) throw new Error(`zip entry ${name}: ${out[out.length - 1].data.length} bytes, expected ${size}`)
    offset += 46 + nameLength + extraLength + commentLength
  }
  return out
}

/** @deprecated waitForJob of core/testing (it finds the status route of the job's kind itself) */
export const waitForJobEnd = (s: TestServer, token: string, id: number, route?: string, timeoutMs?: number): Promise<any> => waitForJob(s, token, id, { route, timeoutMs })

/** @deprecated waitForJobs of core/testing */
export const waitForQuiet = (s: TestServer, types?: string[], timeoutMs?: number): Promise<void> => waitForJobs(s, { types, timeoutMs })

// moved to core/testing (mamkit/testing); re-exported for tests that import them from here
export { upload, idsByName, waitForAsset, settled, requestWithBody } from '../../core/testing/index.js'
