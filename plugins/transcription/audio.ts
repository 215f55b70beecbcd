import { createReadStream } from 'node:fs'
import { open } from 'node:fs/promises'
import { runProgram } from './engine.js'

/** what every engine reads: 16 kHz, mono, signed 16-bit little-endian PCM */
export const SAMPLE_RATE = 16_000
const BYTES_PER_SECOND = SAMPLE_RATE * 2
/** energy is measured in 10 ms frames */
const FRAME_SECONDS = 0.01
const FRAME_BYTES = BYTES_PER_SECOND * FRAME_SECONDS

/**
 * The audio of a media file as raw 16 kHz mono PCM (one ffmpeg run, first audio stream, video
 * ignored). `file:` keeps a file name from being read as a protocol. Returns the duration in seconds.
 */
export async function extractPcm(ffmpeg: string, source: string, target: string, signal?: AbortSignal): Promise<number> {
  await runProgram(ffmpeg, ['-hide_banner', '-nostdin', '-y', '-v', 'error', '-protocol_whitelist', 'file', '-i', `file:${source}`, '-map', '0:a:0', '-vn', '-ac', '1', '-ar', String(SAMPLE_RATE), '-c:a', 'pcm_s16le', '-f', 's16le', `file:${target}`], signal)
  const handle = await open(target, 'r')
  try {
    return (await handle.stat()).size / BYTES_PER_SECOND
  } finally {
    await handle.close()
  }
}

/** the loudness of each 10 ms frame (RMS in dBFS), read as a stream: 100 numbers per second of audio */
export async function frameLevels(pcmFile: string): Promise<Float32Array> {
  const levels: number[] = []
  let carry: Buffer = Buffer.alloc(0)
  for await (const chunk of createReadStream(pcmFile, { highWaterMark: 1 << 20 })) {
    const data = carry.length ? Buffer.concat([carry, chunk as Buffer]) : (chunk as Buffer)
    let at = 0
    for (; at + FRAME_BYTES <= data.length; at += FRAME_BYTES) levels.push(rmsDb(data, at, FRAME_BYTES))
    carry = data.subarray(at)
  }
  if (carry.length >= 2) levels.push(rmsDb(carry, 0, carry.length - (carry.length % 2)))
  return Float32Array.from(levels)
}

function rmsDb(data: Buffer, at: number, length: number): number {
  let sum = 0
  for (let i = at; i < at + length; i += 2) {
    const v = data.readInt16LE(i) / 32768
    sum += v * v
  }
  const rms = Math.sqrt(sum / (length / 2))
  return rms > 0 ? 20 * Math.log10(rms) : -120
}

export interface Chunk {
  /** seconds from the start of the audio */
  start: number
  end: number
}

/**
 * Cuts long audio into chunks of about `target` seconds, each cut in the middle of the longest
 * silence within ±50 % of the target (else at the quietest 10 ms), so no word is split between two
 * engine runs. Silence is relative to the recording: 10 dB above its quietest tenth, at most −35 dBFS.
 */
export function planChunks(levels: Float32Array, duration: number, target: number): Chunk[] {
  const frames = levels.length
  if (duration <= target * 1.5 || frames === 0) return [{ start: 0, end: duration }]
  const sorted = Float32Array.from(levels).sort()
  const floor = sorted[Math.floor(sorted.length * 0.1)]
  const threshold = Math.min(-35, floor + 10)
  const perSecond = 1 / FRAME_SECONDS
  const chunks: Chunk[] = []
  let start = 0
  while (duration - start > target * 1.5) {
    const from = Math.floor((start + target * 0.5) * perSecond)
    const to = Math.min(frames - 1, Math.floor((start + target * 1.5) * perSecond))
    let best: [number, number] | null = null // longest silent run [first, last]
    let quietest = from
    for (let i = from, runStart = -1; i <= to; i++) {
      if (levels[i] < levels[quietest]) quietest = i
      if (levels[i] <= threshold) {
        if (runStart < 0) runStart = i
        if (!best || i - runStart > best[1] - best[0]) best = [runStart, i]
      } else runStart = -1
    }
    const cutFrame = best ? Math.round((best[0] + best[1]) / 2) : quietest
    const cut = cutFrame / perSecond
    chunks.push({ start, end: cut })
    start = cut
  }
  chunks.push({ start, end: duration })
  return chunks
}

/** a WAV file of the PCM between `start` and `end` seconds, as the engines read it */
export async function writeWavSlice(pcmFile: string, target: string, chunk: Chunk): Promise<void> {
  const from = Math.floor(chunk.start * SAMPLE_RATE) * 2
  const to = Math.floor(chunk.end * SAMPLE_RATE) * 2
  const source = await open(pcmFile, 'r')
  const out = await open(target, 'w')
  try {
    const length = Math.max(0, to - from)
    await out.write(wavHeader(length), 0, 44, 0)
    const buffer = Buffer.alloc(1 << 20)
    for (let done = 0; done < length; ) {
      const { bytesRead } = await source.read(buffer, 0, Math.min(buffer.length, length - done), from + done)
      if (!bytesRead) break
      await out.write(buffer, 0, bytesRead, 44 + done)
      done += bytesRead
    }
  } finally {
    await source.close()
    await out.close()
  }
}

export function wavHeader(dataBytes: number): Buffer {
  const h = Buffer.alloc(44)
  h.write('RIFF', 0, 'ascii')
  h.writeUInt32LE(36 + dataBytes, 4)
  h.write('WAVE', 8, 'ascii')
  h.write('fmt ', 12, 'ascii')
  h.writeUInt32LE(16, 16)
  h.writeUInt16LE(1, 20) // PCM
  h.writeUInt16LE(1, 22) // mono
  h.writeUInt32LE(SAMPLE_RATE, 24)
  h.writeUInt32LE(BYTES_PER_SECOND, 28)
  h.writeUInt16LE(2, 32)
  h.writeUInt16LE(16, 34)
  h.write('data', 36, 'ascii')
  h.writeUInt32LE(dataBytes, 40)
  return h
}

/** runs `work` over `items` with at most `limit` at once, in order of the items; results in item order */
export async function inParallel<T, R>(items: T[], limit: number, work: (item: T, index: number) => Promise<R>, signal?: AbortSignal): Promise<R[]> {
  const results = new Array<R>(items.length)
  let next = 0
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) {
      signal?.throwIfAborted()
      results[i] = await work(items[i], i)
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane))
  return results
}
