import { createDecipheriv } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdtemp, open, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { MediaTools } from '../../core/index.js'
import type { Asset, ProxyStore } from '../assets/index.js'
import { rateValue, type TimecodeBase } from './timecode.js'

/**
 * Frame grabs for reports, taken with ffmpeg from the asset's low-res proxy. Proxies are stored
 * encrypted (AES-256-CTR, the 16-byte initial counter first), so the proxy is decrypted once into a
 * private temporary folder that is removed afterwards. Assets without a video proxy get no grabs.
 */
export class FrameGrabber {
  private constructor(
    private readonly tools: MediaTools,
    readonly dir: string,
    private readonly source: string | null,
    private readonly base: TimecodeBase,
  ) {}

  static async open(tools: MediaTools, store: ProxyStore, asset: Asset, base: TimecodeBase): Promise<FrameGrabber> {
    const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-grabs-'))
    const encrypted = asset.type === 'video' ? store.fileOf(asset, 'lowres') : null
    let source: string | null = null
    if (encrypted && (await stat(encrypted).catch(() => null))) {
      source = path.join(dir, 'proxy.mp4')
      const handle = await open(encrypted, 'r')
      const iv = Buffer.alloc(16)
      try {
        await handle.read(iv, 0, 16, 0)
      } finally {
        await handle.close()
      }
      await pipeline(createReadStream(encrypted, { start: 16, highWaterMark: 1 << 20 }), createDecipheriv('aes-256-ctr', store.keyOf(asset), iv), createWriteStream(source))
    }
    return new FrameGrabber(tools, dir, source, base)
  }

  get available() {
    return this.source !== null
  }

  /** a JPEG of the frame at `frame` (asset timeline), `width` pixels wide; null without a proxy or when ffmpeg finds no frame there */
  async grab(frame: number, width = 240): Promise<string | null> {
    if (!this.source) return null
    const out = path.join(this.dir, `f${frame}-${width}.jpg`)
    if (await stat(out).catch(() => null)) return out
    const seconds = (frame / rateValue(this.base.rate)).toFixed(4)
    try {
      await this.tools.run('ffmpeg', ['-hide_banner', '-nostdin', '-v', 'error', '-y', '-ss', seconds, '-i', this.source, '-frames:v', '1', '-vf', `scale=${width}:-2`, '-q:v', '5', out], { timeoutMs: 60_000 })
    } catch {
      return null
    }
    return (await stat(out).catch(() => null)) ? out : null
  }

  /** grabs of many frames, two ffmpeg processes at a time */
  async grabAll(frames: number[], width = 240, signal?: AbortSignal): Promise<Map<number, string>> {
    const out = new Map<number, string>()
    const queue = [...new Set(frames)]
    const worker = async () => {
      for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
        signal?.throwIfAborted()
        const file = await this.grab(f, width)
        if (file) out.set(f, file)
      }
    }
    await Promise.all([worker(), worker()])
    return out
  }

  close() {
    return rm(this.dir, { recursive: true, force: true })
  }
}
