import { Type } from 'typebox'
import { invalidParam, OneOf, type RegisterApi, type MamContext } from '../../core/index.js'
import { platformServices } from './refs.js'
import { VARIANTS, type BrandingKind } from './branding.js'

/** the multipart limit of the routes; the setting `platform.branding.max_bytes` (at most this) is checked after */
const UPLOAD_CAP = 200 * 1024 * 1024

const ImageParams = Type.Object({ kind: OneOf(['logo', 'default_background', 'default_gallery_background', 'watermark']), variant: OneOf(VARIANTS) })

/** §4.11: POST/DELETE /default_background, /default_gallery_background, /logo; GET/POST /watermark; the images themselves. */
export function registerBrandingRoutes(api: RegisterApi) {
  const { routes } = api
  const branding = api.use(platformServices.branding)
  const url = (kind: BrandingKind, variant = 'large') => `/api/v1/branding/${kind}/${variant}`
  const describe = async (kind: BrandingKind) => ({
    kind,
    custom: await branding().isCustom(kind),
    url: url(kind),
    variants: Object.fromEntries(VARIANTS.map((v) => [v, url(kind, v)])),
  })

  const upload = (kind: BrandingKind, field: string, rootKey: string) => async (ctx: MamContext) => {
    const file = ctx.files.find((f) => f.field === field) ?? ctx.files.find((f) => f.field === 'file') ?? ctx.files[0]
    if (!file) throw invalidParam(field, 'is required (a multipart file)')
    const limits = api.settings().branding
    const size = await branding().store(kind, file.tempPath, file.size, { maxBytes: limits.max_bytes, maxPixels: limits.max_pixels })
    ctx.status = 201
    return { [rootKey]: { ...(await describe(kind)), width: size.width, height: size.height } }
  }
  const reset = (kind: BrandingKind, rootKey: string) => async () => {
    await branding().reset(kind)
    return { [rootKey]: await describe(kind) }
  }
  const multipart = { maxFileSize: UPLOAD_CAP, maxFiles: 1 }

  routes.post('/default_background', { access: 'admin', multipart, summary: 'upload the default background (field `background`)' }, upload('default_background', 'background', 'background'))
  routes.delete('/default_background', { access: 'admin', summary: 'reset the default background to the original' }, reset('default_background', 'background'))
  routes.post('/default_gallery_background', { access: 'admin', multipart, summary: 'upload the default gallery wallpaper (field `background`)' }, upload('default_gallery_background', 'background', 'background'))
  routes.delete('/default_gallery_background', { access: 'admin', summary: 'reset the default gallery wallpaper to the original' }, reset('default_gallery_background', 'background'))
  routes.post('/logo', { access: 'admin', multipart, summary: 'upload the logo (field `logo`)' }, upload('logo', 'logo', 'logo'))
  routes.delete('/logo', { access: 'admin', summary: 'reset the logo to the original' }, reset('logo', 'logo'))
  routes.post('/watermark', { access: 'admin', multipart, summary: 'set the watermark image (field `watermark`)' }, upload('watermark', 'watermark', 'watermark'))
  routes.get('/watermark', { access: 'authenticated', summary: 'the watermark image URL' }, async () => ({ watermark: await describe('watermark') }))

  // the login page shows the logo and background before anyone signs in
  routes.get('/branding/:kind/:variant', { access: 'public', params: ImageParams, summary: 'a branding image (logo, backgrounds, watermark) in one of its sizes' }, async (ctx) => {
    const { body, type } = await branding().read(ctx.params.kind as BrandingKind, ctx.params.variant)
    ctx.type = type
    ctx.set('Cache-Control', 'no-cache')
    ctx.body = body
  })
}
