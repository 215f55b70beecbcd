import { randomBytes } from 'node:crypto'
import { open, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import sharp from 'sharp'
import { MamError, makeDirs } from '../../core/index.js'

export type BrandingKind = 'logo' | 'default_background' | 'default_gallery_background' | 'watermark'

interface Variant {
  name: string
  /** longest side in pixels (never enlarged) */
  size: number
}

/** per kind: the output format (alpha kept for logo and watermark) and the sizes served */
const KINDS: Record<BrandingKind, { format: 'png' | 'jpeg'; variants: Variant[]; original: () => Promise<Buffer> }> = {
  logo: { format: 'png', variants: [{ name: 'large', size: 1024 }, { name: 'medium', size: 256 }, { name: 'small', size: 64 }], original: () => render(logoSvg(), 'png') },
  default_background: { format: 'jpeg', variants: [{ name: 'large', size: 3840 }, { name: 'medium', size: 1920 }, { name: 'small', size: 480 }], original: () => render(backgroundSvg('#1d2733', '#3b5068'), 'jpeg') },
  default_gallery_background: { format: 'jpeg', variants: [{ name: 'large', size: 3840 }, { name: 'medium', size: 1920 }, { name: 'small', size: 480 }], original: () => render(backgroundSvg('#202020', '#4a4a4a'), 'jpeg') },
  watermark: { format: 'png', variants: [{ name: 'large', size: 2048 }, { name: 'medium', size: 512 }, { name: 'small', size: 128 }], original: () => render(watermarkSvg(), 'png') },
}

export const VARIANTS = ['large', 'medium', 'small'] as const

/** recognised by their first bytes, never by the name or type the client gave */
const MAGIC: Array<{ type: string; test: (b: Buffer) => boolean }> = [
  { type: 'jpeg', test: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
  { type: 'png', test: (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) },
  { type: 'webp', test: (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP' },
  { type: 'gif', test: (b) => b.subarray(0, 4).toString('latin1') === 'GIF8' },
]

export async function sniffImage(file: string): Promise<string | undefined> {
  const handle = await open(file, 'r')
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(16), 0, 16, 0)
    return MAGIC.find((m) => m.test(buffer.subarray(0, bytesRead)))?.type
  } finally {
    await handle.close()
  }
}

/**
 * Logo, default backgrounds and watermark. An upload is checked by its first bytes (415), its size
 * and pixel count (413), then decoded whole by sharp (a file that only starts like an image is a
 * 415) into its variants, written to a fresh folder that becomes current by an atomic rename of
 * the pointer file: readers see the old set or the new one, never a mix. DELETE goes back to the
 * shipped original, which is rendered from the SVG drawings below.
 */
export class BrandingService {
  private readonly root: string
  private readonly shipped = new Map<string, Buffer>()
  /** uploads and resets of one kind run one after the other in this process: the last one wins whole */
  private readonly turns = new Map<BrandingKind, Promise<unknown>>()

  constructor(dataDir: string) {
    this.root = path.join(dataDir, 'branding')
  }

  private async current(kind: BrandingKind): Promise<string | undefined> {
    const id = await readFile(path.join(this.root, kind, 'current'), 'utf8').catch(() => '')
    return /^[0-9a-f]{16}$/.test(id.trim()) ? id.trim() : undefined
  }

  async isCustom(kind: BrandingKind): Promise<boolean> {
    return (await this.current(kind)) !== undefined
  }

  /** the bytes and type of one variant: the uploaded image's, or the shipped original's */
  async read(kind: BrandingKind, variant: string): Promise<{ body: Buffer; type: string }> {
    const spec = KINDS[kind]
    const type = spec.format === 'png' ? 'image/png' : 'image/jpeg'
    const id = await this.current(kind)
    if (id) {
      const body = await readFile(path.join(this.root, kind, id, `${variant}.${spec.format}`)).catch(() => undefined)
      if (body) return { body, type }
    }
    const key = `${kind}/${variant}`
    let body = this.shipped.get(key)
    if (!body) {
      const size = spec.variants.find((v) => v.name === variant)!.size
      body = await sharp(await spec.original()).resize({ width: size, height: size, fit: 'inside', withoutEnlargement: true }).toBuffer()
      this.shipped.set(key, body)
    }
    return { body, type }
  }

  async store(kind: BrandingKind, file: string, size: number, limits: { maxBytes: number; maxPixels: number }): Promise<{ width: number; height: number }> {
    if (size > limits.maxBytes) throw new MamError('payload_too_large', `The image has ${size} bytes; at most ${limits.maxBytes} are accepted (setting platform.branding.max_bytes)`)
    if (!(await sniffImage(file))) throw new MamError('unsupported_media_type', 'The image must be a JPEG, PNG, WebP or GIF file')
    let meta: Awaited<ReturnType<ReturnType<typeof sharp>['metadata']>>
    try {
      meta = await sharp(file, { limitInputPixels: false }).metadata()
    } catch {
      throw new MamError('unsupported_media_type', 'The file is not a readable image')
    }
    const pixels = (meta.width ?? 0) * (meta.height ?? 0)
    if (pixels > limits.maxPixels)
      throw new MamError('payload_too_large', `The image has ${meta.width}×${meta.height} pixels; at most ${limits.maxPixels} are decoded (setting platform.branding.max_pixels)`)
    return this.inTurn(kind, () => this.write(kind, file, limits.maxPixels))
  }

  private inTurn<T>(kind: BrandingKind, work: () => Promise<T>): Promise<T> {
    const next = (this.turns.get(kind) ?? Promise.resolve()).catch(() => undefined).then(work)
    this.turns.set(kind, next)
    return next
  }

  private async write(kind: BrandingKind, file: string, maxPixels: number): Promise<{ width: number; height: number }> {
    const spec = KINDS[kind]
    const id = randomBytes(8).toString('hex')
    const dir = path.join(this.root, kind, id)
    await makeDirs(dir)
    try {
      // decoded whole once (failOn: a truncated or corrupt file is refused, not half drawn)
      const decoded = await sharp(file, { limitInputPixels: maxPixels, failOn: 'error' }).rotate().png().toBuffer({ resolveWithObject: true })
      for (const v of spec.variants) {
        const resized = sharp(decoded.data).resize({ width: v.size, height: v.size, fit: 'inside', withoutEnlargement: true })
        const out = spec.format === 'png' ? resized.png() : resized.flatten({ background: '#000000' }).jpeg({ quality: 88, mozjpeg: true })
        await out.toFile(path.join(dir, `${v.name}.${spec.format}`))
      }
      const pointer = path.join(this.root, kind, `current.${id}`)
      await writeFile(pointer, id)
      await rename(pointer, path.join(this.root, kind, 'current'))
      await this.prune(kind, id)
      return { width: decoded.info.width, height: decoded.info.height }
    } catch (err) {
      await rm(dir, { recursive: true, force: true })
      if (err instanceof MamError) throw err
      throw new MamError('unsupported_media_type', 'The file is not a readable image (it could not be decoded)')
    }
  }

  /** back to the shipped original */
  reset(kind: BrandingKind): Promise<void> {
    return this.inTurn(kind, async () => {
      await rm(path.join(this.root, kind, 'current'), { force: true })
      await this.prune(kind, undefined)
    })
  }

  /** removes sets other than the current one (an upload that lost a race is removed by the winner) */
  private async prune(kind: BrandingKind, keep: string | undefined) {
    const current = (await this.current(kind)) ?? keep
    for (const entry of await readdir(path.join(this.root, kind)).catch(() => [] as string[])) {
      if (/^[0-9a-f]{16}$/.test(entry) && entry !== current && entry !== keep) await rm(path.join(this.root, kind, entry), { recursive: true, force: true })
    }
  }
}

async function render(svg: string, format: 'png' | 'jpeg'): Promise<Buffer> {
  const image = sharp(Buffer.from(svg))
  return format === 'png' ? image.png().toBuffer() : image.jpeg({ quality: 90 }).toBuffer()
}

function logoSvg() {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="1024" height="1024" viewBox="0 0 1024 1024">
<rect x="64" y="64" width="896" height="896" rx="160" fill="#1f6feb"/>
<path d="M232 760V296l140 0 140 220 140-220h140v464H664V480L512 700 360 480v280z" fill="#ffffff"/></svg>`
}

function backgroundSvg(a: string, b: string) {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="3840" height="2160" viewBox="0 0 3840 2160">
<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="${a}"/><stop offset="1" stop-color="${b}"/></linearGradient></defs>
<rect width="3840" height="2160" fill="url(#g)"/></svg>`
}

function watermarkSvg() {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="2048" height="512" viewBox="0 0 2048 512">
<rect width="2048" height="512" fill="none"/>
<path d="M96 416V96h96l96 152 96-152h96v320h-96V224L288 376 192 224v192z" fill="#ffffff" fill-opacity="0.45"/></svg>`
}
