import { mkdir, readFile, rename, rm, open } from 'node:fs/promises'
import path from 'node:path'
import sharp, { type Metadata } from 'sharp'
import { MamError, column, conflict, invalidParam, isUniqueViolation, iso, notFound, type Knex } from '../../core/index.js'
export const IMAGE_KINDS = ['logo', 'background_image'] as const
export type ImageKind = (typeof IMAGE_KINDS)[number]
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024
/** more pixels than this is refused before decoding (decompression bombs) */
export const MAX_PIXELS = 50_000_000
/** the resized variants made of each image, by width bound */
const VARIANTS: Record<ImageKind, Record<string, number>> = { logo: { small: 128, large: 512 }, background_image: { small: 640, large: 1920 } }
export const WATERMARK_POSITIONS = ['top_left', 'top_right', 'bottom_left', 'bottom_right', 'center'] as const

export interface Style {
  primary_color?: string | null
  secondary_color?: string | null
  background_color?: string | null
  text_color?: string | null
  font?: string | null
  watermark_text?: string | null
  watermark_position?: (typeof WATERMARK_POSITIONS)[number]
  watermark_opacity?: number
}
export const STYLE_KEYS = ['primary_color', 'secondary_color', 'background_color', 'text_color', 'font', 'watermark_text', 'watermark_position', 'watermark_opacity'] as const

interface StoredImage {
  format: string
  width: number
  height: number
  variants: Record<string, { file: string; width: number; height: number }>
}

export interface PresetRow {
  id: number
  name: string
  style: unknown
  images: unknown
  created_by_id: number | null
  created_at: unknown
  updated_at: unknown
}

/** the image type by its first bytes, never by the client's name or content type */
function sniff(head: Buffer): 'png' | 'jpeg' | 'webp' | undefined {
  if (head.length >= 8 && head.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png'
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'jpeg'
  if (head.length >= 12 && head.subarray(0, 4).toString('latin1') === 'RIFF' && head.subarray(8, 12).toString('latin1') === 'WEBP') return 'webp'
  return undefined
}

/**
 * Gallery style presets: colours, font, watermark, and a logo and background image checked by magic
 * bytes and pixel limits, stored as resized WebP variants under `<dataDir>/gallery-presets/<id>/`.
 * A gallery uses one preset; a preset in use is not deleted (409).
 */
export class PresetService {
  constructor(
    private readonly knex: Knex,
    private readonly dataDir: string,
  ) {}

  dirOf(id: number) {
    return path.join(this.dataDir, 'gallery-presets', String(id))
  }

  async get(id: number): Promise<PresetRow> {
    const row = await this.knex('gallery_style_presets').where({ id }).first()
    if (!row) throw notFound('gallery style preset', id)
    return row
  }

  list(): Promise<PresetRow[]> {
    return this.knex('gallery_style_presets').orderBy([{ column: 'name' }, { column: 'id' }])
  }

  /** checks an uploaded image (415 not PNG/JPEG/WebP, 413 too big, 422 undecodable) before anything is stored */
  async checkImage(file: string, param: string): Promise<{ format: string; width: number; height: number }> {
    const fh = await open(file, 'r')
    const head = Buffer.alloc(16)
    const { size } = await fh.stat()
    await fh.read(head, 0, 16, 0)
    await fh.close()
    if (size > MAX_IMAGE_BYTES) throw new MamError('payload_too_large', `${param} is ${size} bytes; at most ${MAX_IMAGE_BYTES} are accepted`, { errors: [{ param, message: `must be at most ${MAX_IMAGE_BYTES} bytes` }] })
    const format = sniff(head)
    if (!format) throw new MamError('unsupported_media_type', `${param} is not a PNG, JPEG or WebP image (judged by its content)`, { errors: [{ param, message: 'must be a PNG, JPEG or WebP image' }] })
    let meta: Metadata
    try {
      meta = await sharp(file, { limitInputPixels: false }).metadata()
    } catch {
      throw invalidParam(param, 'is not a readable image')
    }
    if (!meta.width || !meta.height) throw invalidParam(param, 'is not a readable image')
    if (meta.width * meta.height > MAX_PIXELS)
      throw new MamError('payload_too_large', `${param} has ${meta.width}×${meta.height} pixels; at most ${MAX_PIXELS} are accepted`, { errors: [{ param, message: `must have at most ${MAX_PIXELS} pixels` }] })
    // a truncated or corrupt body passes the header check; decode it once to know
    try {
      await sharp(file, { limitInputPixels: MAX_PIXELS }).resize(8, 8, { fit: 'inside' }).toBuffer()
    } catch {
      throw invalidParam(param, 'is not a readable image (corrupt or truncated)')
    }
    return { format, width: meta.width, height: meta.height }
  }

  /** resized WebP variants of a checked image, written under temporary names then renamed */
  private async store(id: number, kind: ImageKind, file: string, info: { format: string; width: number; height: number }): Promise<StoredImage> {
    const dir = this.dirOf(id)
    await mkdir(dir, { recursive: true })
    const variants: StoredImage['variants'] = {}
    for (const [name, width] of Object.entries(VARIANTS[kind])) {
      const target = `${kind}-${name}.webp`
      const tmp = path.join(dir, `.${target}.${process.pid}.${Date.now()}`)
      const out = await sharp(file, { limitInputPixels: MAX_PIXELS }).rotate().resize(width, width, { fit: 'inside', withoutEnlargement: true }).webp().toFile(tmp)
      await rename(tmp, path.join(dir, target))
      variants[name] = { file: target, width: out.width, height: out.height }
    }
    return { ...info, variants }
  }

  async create(input: { name: string; style: Style; createdById: number }, images: Partial<Record<ImageKind, { file: string; info: { format: string; width: number; height: number } }>>, param: (f: string) => string): Promise<PresetRow> {
    const name = input.name.normalize('NFC').trim()
    if (!name) throw invalidParam(param('name'), 'must not be blank')
    let id: number
    try {
      const [row] = await this.knex('gallery_style_presets').insert({ name, style: JSON.stringify(input.style), images: '{}', created_by_id: input.createdById, created_at: new Date(), updated_at: new Date() }).returning('id')
      id = Number(typeof row === 'object' ? row.id : row)
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A gallery style preset named "${name}" exists already`, { errors: [{ param: param('name'), message: 'is taken' }] })
      throw err
    }
    try {
      await this.setImages(id, {}, images)
    } catch (err) {
      await this.knex('gallery_style_presets').where({ id }).delete()
      await rm(this.dirOf(id), { recursive: true, force: true })
      throw err
    }
    return this.get(id)
  }

  private async setImages(id: number, current: Record<string, StoredImage>, images: Partial<Record<ImageKind, { file: string; info: { format: string; width: number; height: number } }>>) {
    const next = { ...current }
    for (const kind of IMAGE_KINDS) {
      const img = images[kind]
      if (img) next[kind] = await this.store(id, kind, img.file, img.info)
    }
    if (Object.keys(images).length) await this.knex('gallery_style_presets').where({ id }).update({ images: JSON.stringify(next), updated_at: new Date() })
  }

  async update(id: number, input: { name?: string; style: Style; remove?: ImageKind[] }, images: Partial<Record<ImageKind, { file: string; info: { format: string; width: number; height: number } }>>, param: (f: string) => string): Promise<PresetRow> {
    const row = await this.get(id)
    const patch: Record<string, unknown> = {}
    if (input.name !== undefined) {
      const name = input.name.normalize('NFC').trim()
      if (!name) throw invalidParam(param('name'), 'must not be blank')
      patch.name = name
    }
    if (Object.keys(input.style).length) patch.style = JSON.stringify({ ...column.json<Style>(row.style, {}), ...input.style })
    const stored = column.json<Record<string, StoredImage>>(row.images, {})
    for (const kind of input.remove ?? []) {
      for (const v of Object.values(stored[kind]?.variants ?? {})) await rm(path.join(this.dirOf(id), v.file), { force: true })
      delete stored[kind]
      patch.images = JSON.stringify(stored)
    }
    if (Object.keys(patch).length)
      await this.knex('gallery_style_presets')
        .where({ id })
        .update({ ...patch, updated_at: new Date() })
        .catch((err) => {
          if (isUniqueViolation(err)) throw conflict(`A gallery style preset named "${patch.name}" exists already`, { errors: [{ param: param('name'), message: 'is taken' }] })
          throw err
        })
    await this.setImages(id, stored, images)
    return this.get(id)
  }

  /** 409 while a gallery uses it; the foreign key (RESTRICT) backs the check against a gallery taking it meanwhile */
  async remove(id: number): Promise<PresetRow> {
    const row = await this.get(id)
    const users = await this.knex('galleries').where({ gallery_style_preset_id: id }).select('id')
    const inUse = () => conflict(`Gallery style preset ${id} is used by ${users.length || 'a'} galler${users.length === 1 ? 'y' : 'ies'}`, { gallery_ids: users.map((u: any) => Number(u.id)) })
    if (users.length) throw inUse()
    try {
      await this.knex('gallery_style_presets').where({ id }).delete()
    } catch (err) {
      if (/foreign key/i.test(String((err as Error).message))) throw inUse()
      throw err
    }
    await rm(this.dirOf(id), { recursive: true, force: true })
    return row
  }

  async imageFile(id: number, kind: ImageKind, variant: string): Promise<Buffer> {
    const row = await this.get(id)
    const v = column.json<Record<string, StoredImage>>(row.images, {})[kind]?.variants[variant]
    if (!v) throw notFound(`${kind} ${variant} of gallery style preset`, id)
    return readFile(path.join(this.dirOf(id), v.file))
  }

  style(row: PresetRow): Style {
    return column.json<Style>(row.style, {})
  }

  serialize(row: PresetRow) {
    const style = this.style(row)
    const images = column.json<Record<string, StoredImage>>(row.images, {})
    return {
      id: Number(row.id),
      name: row.name,
      ...Object.fromEntries(STYLE_KEYS.map((k) => [k, style[k] ?? null])),
      watermark_position: style.watermark_position ?? 'bottom_right',
      watermark_opacity: style.watermark_opacity ?? 0.5,
      ...Object.fromEntries(
        IMAGE_KINDS.map((k) => [k, images[k] ? { format: images[k].format, width: images[k].width, height: images[k].height, variants: Object.fromEntries(Object.entries(images[k].variants).map(([n, v]) => [n, { width: v.width, height: v.height }])) } : null]),
      ),
      created_by_id: column.intOrNull(row.created_by_id),
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }
}
