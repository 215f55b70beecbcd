import { Type } from 'typebox'
import { IdParam, IdParams, MamError, NoInput, acceptedJob, coreServices, notFound, type RegisterApi, type RouteContext, type MamContext } from '../../core/index.js'
import { projectServices } from '../projects/index.js'
import { assetJob } from './service.js'
import { assetServices } from './refs.js'
import type { Asset } from './entities.js'
import { sendFile } from './serve-file.js'

const KINDS: Record<string, string> = {
  lowres: 'video/mp4',
  audio: 'audio/mp4',
  image: 'image/webp',
  poster: 'image/jpeg',
  thumbnails: 'image/jpeg',
  waveform: 'image/png',
  burnin: 'video/mp4',
  editing: 'video/quicktime',
}
const KindParams = Type.Object({ id: IdParam, kind: Type.Unsafe<string>({ type: 'string', enum: Object.keys(KINDS) }) })

/** the playable low-res proxy of an asset: the MP4 for video, AAC for audio, WebP for stills */
export const lowresKind = (asset: Asset) => (asset.type === 'audio' ? 'audio' : asset.type === 'image' ? 'image' : 'lowres')

/** serves a stored proxy, decrypted on the fly, with Range */
export async function sendProxy(ctx: MamContext, asset: Asset, kind: string, filename?: string) {
  const store = ctx.resolve(assetServices.proxyStore)
  const file = store.fileOf(asset, kind)
  if (!file) throw notFound(`${kind} proxy of asset`, asset.id)
  try {
    await sendFile(ctx, { path: file, key: store.keyOf(asset), type: KINDS[kind], filename })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    // the row names a proxy whose file went (removed by hand, a data dir restored without its proxies):
    // a 404 that says so, not a 500. The size is read before any header is set, so the problem body
    // goes out clean; a file that vanished between that and the open leaves headers to drop here.
    for (const header of ['Content-Disposition', 'Content-Range', 'Accept-Ranges']) ctx.remove(header)
    throw new MamError('not_found', `The ${kind} proxy file of this asset is missing on disk (proxy_state: ${asset.proxyState}); POST /assets/:id/reencode makes it again`, { proxy_state: asset.proxyState })
  }
}

/** proxies: the key, the files, re-encoding and the project-wide proxy jobs (§4.6, §4.20) */
export function registerProxyRoutes(api: RegisterApi) {
  const { routes } = api
  const assets = api.use(assetServices.service)
  const projects = api.use(projectServices.service)
  const proxyStore = api.use(assetServices.proxyStore)
  const mediaTools = api.use(coreServices.mediaTools)
  const jobs = api.use(coreServices.jobs)

  routes.get('/assets/:id/proxy_key', { access: 'authenticated', params: IdParams, summary: 'the binary proxy encryption key of an asset' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    if (!asset.proxyKeyEnc) throw notFound('proxy key of asset', asset.id)
    ctx.type = 'application/octet-stream'
    ctx.set('Cache-Control', 'no-store')
    ctx.body = proxyStore().keyOf(asset)
  })

  routes.get('/assets/:id/proxies/:kind', { access: 'authenticated', params: KindParams, summary: 'a proxy file: lowres, audio, image, poster, thumbnails, waveform, burnin, editing' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    await sendProxy(ctx, asset, ctx.params.kind)
  })

  routes.post('/assets/:id/reencode', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'create new proxies' }, async (ctx) => {
    const asset = await assets().writable(ctx.em, ctx.requireUser(), ctx.params.id)
    await mediaTools().require('ffmpeg')
    const { type, payload, options } = assetJob('assets.proxy', asset, ctx.user.userId)
    return acceptedJob(ctx, await jobs().enqueue(type, payload, options))
  })

  const projectBatch = (action: 'proxy' | 'burn-timecode' | 'convert-layout', needsFfmpeg: boolean) => async (ctx: RouteContext<typeof IdParams, typeof NoInput>) => {
    const project = await projects().writable(ctx.em, ctx.user, ctx.params.id)
    if (needsFfmpeg) await mediaTools().require('ffmpeg')
    return acceptedJob(ctx, await jobs().enqueue('assets.project-batch', { projectId: project.id, action, userId: ctx.user.userId }, { userId: ctx.user.userId, projectId: project.id }))
  }
  routes.put('/projects/:id/reencode', { access: 'authenticated', params: IdParams, input: NoInput, summary: 're-encode the proxies of all assets' }, projectBatch('proxy', true))
  routes.put('/projects/:id/reburn_timecode', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'low-res copies with burnt-in timecode for all video assets' }, projectBatch('burn-timecode', true))
  routes.put('/projects/:id/convert_proxy_structure', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'move proxies to the latest folder layout' }, projectBatch('convert-layout', false))
}
