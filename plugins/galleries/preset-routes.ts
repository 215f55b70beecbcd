import { galleryServices } from './refs.js'
import { IMAGE_KINDS, MAX_IMAGE_BYTES, STYLE_KEYS, type ImageKind, type Style } from './presets.js'
import { Empty, PresetInput } from './schemas.js'

import { IdParams, invalidParam, type MamContext, type RegisterApi } from '../../core/index.js'
const param = (f: string) => `gallery_style_preset[${f}]`

/** §4.16 gallery style presets: everybody reads them (galleries show them), administrators change them */
export function registerPresetRoutes(api: RegisterApi) {
  const { routes } = api
  const presets = api.use(galleryServices.presets)

  /** the uploaded images (`logo`, `background_image`, also as `gallery_style_preset[logo]`), each checked before anything is stored */
  const images = async (ctx: MamContext) => {
    const out: Partial<Record<ImageKind, { file: string; info: { format: string; width: number; height: number } }>> = {}
    for (const f of ctx.files) {
      const kind = IMAGE_KINDS.find((k) => f.field === k || f.field === param(k))
      if (!kind) throw invalidParam(f.field, `is not an image of a preset (${IMAGE_KINDS.join(', ')})`)
      out[kind] = { file: f.tempPath, info: await presets().checkImage(f.tempPath, f.field) }
    }
    return out
  }
  const styleOf = (input: Record<string, unknown>): Style => Object.fromEntries(STYLE_KEYS.filter((k) => input[k] !== undefined).map((k) => [k, input[k]])) as Style

  routes.get('/gallery_style_presets', { access: 'authenticated', input: Empty, summary: 'gallery style presets by name' }, async () => ({
    gallery_style_presets: (await presets().list()).map((p) => presets().serialize(p)),
  }))

  const multipart = { maxFileSize: MAX_IMAGE_BYTES + 1, maxFiles: 2 }

  routes.post(
    '/gallery_style_presets',
    { access: 'admin', input: PresetInput, wrap: 'gallery_style_preset', multipart, summary: 'create a preset: name, colours, font, watermark text/position/opacity; multipart `logo`, `background_image`' },
    async (ctx) => {
      const input = ctx.input.gallery_style_preset ?? {}
      if (input.name === undefined) throw invalidParam(param('name'), 'is required')
      const row = await presets().create({ name: input.name, style: styleOf(input), createdById: ctx.user.userId }, await images(ctx), param)
      ctx.status = 201
      return { gallerystylepreset: presets().serialize(row) }
    },
  )

  routes.put('/gallery_style_presets/:id', { access: 'admin', params: IdParams, input: PresetInput, wrap: 'gallery_style_preset', multipart, summary: 'change a preset; `remove_images` drops logo or background_image' }, async (ctx) => {
    await presets().get(ctx.params.id)
    const input = ctx.input.gallery_style_preset ?? {}
    const row = await presets().update(ctx.params.id, { name: input.name, style: styleOf(input), remove: input.remove_images }, await images(ctx), param)
    return { gallerystylepreset: presets().serialize(row) }
  })

  routes.delete('/gallery_style_presets/:id', { access: 'admin', params: IdParams, summary: 'delete a preset no gallery uses (409 otherwise)' }, async (ctx) => ({
    gallerystylepreset: presets().serialize(await presets().remove(ctx.params.id)),
  }))
}
