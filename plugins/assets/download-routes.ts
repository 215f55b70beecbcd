import { Type } from 'typebox'
import { IdParam, IdParams, NoInput, MamError, accepted, User, coreServices, type RegisterApi, type RouteContext, type EntityManager, type Principal } from '../../core/index.js'
import type { Asset } from './entities.js'
import { assetServices } from './refs.js'
import { AssetState, serializeState, type PackageKind } from './downloads.js'
import { lowresKind, sendProxy } from './proxy-routes.js'
import { sendBody } from './serve-file.js'
import { zipLayout, zipRange } from './zip-stream.js'
import { openOriginal, withOriginal } from './originals.js'

const StateInput = Type.Object({ state_id: IdParam }, { additionalProperties: false })
const LowresInput = Type.Object({ state_id: Type.Optional(IdParam), inline: Type.Optional(Type.Boolean()) }, { additionalProperties: false })
const LOWRES_EXTENSIONS: Record<string, string> = { lowres: 'mp4', audio: 'm4a', image: 'webp' }

const stateProblem = (code: 'not_found' | 'gone' | 'conflict', detail: string, message: string) => new MamError(code, detail, { errors: [{ param: 'state_id', message }] })
const baseName = (asset: Asset) => asset.name.replace(/\.[^.]*$/, '')

/** §4.6 downloads: prepare_download_* create an AssetState job (202 `assetstate`); download_* need its finished state_id. */
export function registerDownloadRoutes(api: RegisterApi) {
  const { routes } = api
  const assets = api.use(assetServices.service)
  const jobs = api.use(coreServices.jobs)

  const prepare = (kind: PackageKind) => async (ctx: RouteContext<typeof IdParams, typeof NoInput>) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
    // an original that leads outside its project is refused now (403); the job checks again, it may change meanwhile
    if (kind === 'highres') await withOriginal(ctx, asset, async () => {}).catch((err) => {
      if (!err.offline) throw err // an offline original fails the job with its reason
    })
    if (kind === 'lowres' && !asset.proxies[lowresKind(asset)]) throw new MamError('conflict', `Asset ${asset.id} has no low-res proxy yet (proxy_state: ${asset.proxyState})`)
    if (kind === 'editing_proxy' && asset.type !== 'video') throw new MamError('conflict', `Asset ${asset.id} is ${asset.type}; editing proxies exist for video only`)
    const state = ctx.em.create(AssetState, { asset, user: ctx.em.getReference(User, ctx.user.userId), kind })
    await ctx.em.flush()
    const job = await jobs().enqueue('assets.package', { stateId: state.id }, { userId: ctx.user.userId, projectId: asset.project.id, assetId: asset.id })
    state.jobId = job.id
    await ctx.em.flush()
    // the body is the state (`assetstate`, wire.md), the job inside it
    return accepted(ctx, { assetstate: serializeState(state, job) })
  }

  /** the caller's finished, unexpired state for this asset and kind; every other case is a clear 4xx */
  const finishedState = async (em: EntityManager, principal: Principal, stateId: number, asset: Asset, kind: PackageKind) => {
    const state = await em.findOne(AssetState, { id: stateId, asset, kind }, { populate: ['user'] })
    // another user's state is reported like an unknown one: its existence is not theirs to learn
    if (!state || (state.user.id !== principal.userId && !principal.isAdmin)) throw stateProblem('not_found', `No ${kind} download ${stateId} of asset ${asset.id} for you`, 'is unknown')
    const job = state.jobId ? await jobs().get(state.jobId) : null
    if (state.expiresAt && state.expiresAt.getTime() <= Date.now()) throw stateProblem('gone', `Download ${state.id} has expired; prepare it again`, 'has expired')
    if (job?.state === 'failed' || job?.state === 'cancelled') throw stateProblem('conflict', `Download ${state.id} ${job.state}: ${job.error ?? 'no reason given'}`, `is ${job.state}`)
    if (state.size === null) throw stateProblem('conflict', `Download ${state.id} is not ready yet (${job?.state ?? 'queued'}); poll GET /asset_status/${state.jobId}`, 'is not finished')
    return state
  }

  routes.put('/assets/:id/prepare_download_highres', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'package the original file (zip); answers the state id' }, prepare('highres'))
  routes.put('/assets/:id/prepare_download_editing_proxy', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'prepare the editing proxy (built on demand)' }, prepare('editing_proxy'))
  routes.put('/assets/:id/prepare_download_lowres', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'prepare the low-res proxy as a download' }, prepare('lowres'))

  routes.get('/assets/:id/download_highres', { access: 'authenticated', params: IdParams, input: StateInput, summary: 'the zip of the original file (state_id from prepare_download_highres), with HTTP Range' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    const state = await finishedState(ctx.em, ctx.user, ctx.input.state_id, asset, 'highres')
    const outdated = () => stateProblem('conflict', `The original of asset ${asset.id} changed or went offline since download ${state.id} was prepared; prepare it again`, 'is outdated')
    // opened once and checked (a symlink planted since the prepare is a 403); the zip streams from this descriptor
    const original = await openOriginal(ctx, asset).catch((err) => {
      throw err.offline ? outdated() : err
    })
    ctx.res.once('close', () => void original.close().catch(() => {}))
    const { stats, handle } = original
    // the zip's CRC-32 and sizes were fixed when it was prepared: a changed original would make a corrupt zip
    if (!state.crc32 || stats.size !== state.sourceSize || Math.floor(stats.mtimeMs) !== state.sourceMtime?.getTime()) throw outdated()
    const layout = zipLayout([{ name: asset.name, file: handle, size: stats.size, crc32: parseInt(state.crc32, 16), mtime: state.sourceMtime }])
    await sendBody(ctx, { size: layout.size, type: 'application/zip', filename: `${baseName(asset)}.zip`, open: (start, end) => zipRange(layout, start, end) })
  })

  routes.get('/assets/:id/download_editing_proxy', { access: 'authenticated', params: IdParams, input: StateInput, summary: 'the editing proxy (state_id from prepare_download_editing_proxy), with HTTP Range' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    await finishedState(ctx.em, ctx.user, ctx.input.state_id, asset, 'editing_proxy')
    await sendProxy(ctx, asset, 'editing', `${baseName(asset)}_proxy.mov`)
  })

  routes.get('/assets/:id/download_lowres', { access: 'authenticated', params: IdParams, input: LowresInput, summary: 'the low-res proxy (MP4 for video), with HTTP Range; state_id from prepare_download_lowres is optional' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    if (ctx.input.state_id !== undefined) await finishedState(ctx.em, ctx.user, ctx.input.state_id, asset, 'lowres')
    const kind = lowresKind(asset)
    await sendProxy(ctx, asset, kind, ctx.input.inline ? undefined : `${baseName(asset)}_lowres.${LOWRES_EXTENSIONS[kind]}`)
  })
}
