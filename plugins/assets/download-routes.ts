import path from 'node:path'
import { Type } from 'typebox'
import type { RegisterApi } from '../../core/plugin/contract.js'
import type { MamContext } from '../../core/http/context.js'
import { IdParam, IdParams } from '../../core/http/schemas.js'
import { MamError } from '../../core/errors.js'
import type { MamConfig } from '../../core/config.js'
import type { JobService } from '../../core/jobs/service.js'
import { User } from '../../core/auth/entities.js'
import type { AssetService } from './service.js'
import { AssetState, serializeState, type PackageKind } from './downloads.js'
import { sendFile } from './serve-file.js'

const StateInput = Type.Object({ state_id: IdParam }, { additionalProperties: false })
const Empty = Type.Object({}, { additionalProperties: false })
const CONTENT_TYPES: Record<string, string> = { '.zip': 'application/zip', '.mov': 'video/quicktime', '.mp4': 'video/mp4', '.m4a': 'audio/mp4', '.webp': 'image/webp' }

/** §4.6 downloads: prepare_download_* create an AssetState job (202 `assetstate`); download_* need its finished state_id. */
export function registerDownloadRoutes({ routes }: RegisterApi) {
  const assets = (ctx: MamContext) => ctx.resolve<AssetService>('assets')

  const prepare = (kind: PackageKind) => async (ctx: MamContext) => {
    const { asset } = await assets(ctx).readable(ctx, ctx.params.id)
    if (kind === 'lowres' && !asset.proxyKeyEnc) throw new MamError('conflict', `Asset ${asset.id} has no low-res proxy yet (proxy_state: ${asset.proxyState})`)
    if (kind === 'editing_proxy' && asset.type !== 'video') throw new MamError('conflict', `Asset ${asset.id} is ${asset.type}; editing proxies exist for video only`)
    const state = ctx.em.create(AssetState, { asset, user: ctx.em.getReference(User, ctx.user!.userId), kind })
    await ctx.em.flush()
    const job = await ctx.resolve<JobService>('jobs').enqueue('assets.package', { stateId: state.id }, { userId: ctx.user!.userId, projectId: asset.project.id, assetId: asset.id })
    state.jobId = job.id
    await ctx.em.flush()
    ctx.status = 202
    return { assetstate: serializeState(state, job) }
  }

  /** the caller's finished, unexpired state for this asset and kind; every other case is a clear 4xx */
  const finishedState = async (ctx: MamContext, kind: PackageKind) => {
    const { asset } = await assets(ctx).readable(ctx, ctx.params.id)
    const state = await ctx.em.findOne(AssetState, { id: ctx.input.state_id, asset, kind }, { populate: ['user'] })
    // another user's state is reported like an unknown one: its existence is not theirs to learn
    if (!state || (state.user.id !== ctx.user!.userId && !ctx.user!.isAdmin)) throw new MamError('not_found', `No ${kind} download ${ctx.input.state_id} of asset ${asset.id} for you`, { errors: [{ param: 'state_id', message: 'is unknown' }] })
    const job = state.jobId ? await ctx.resolve<JobService>('jobs').get(state.jobId) : null
    if (state.purged || (state.expiresAt && state.expiresAt.getTime() <= Date.now())) throw new MamError('gone', `Download ${state.id} has expired; prepare it again`, { errors: [{ param: 'state_id', message: 'has expired' }] })
    if (job?.state === 'failed' || job?.state === 'cancelled') throw new MamError('conflict', `Download ${state.id} ${job.state}: ${job.error ?? 'no reason given'}`, { errors: [{ param: 'state_id', message: `is ${job.state}` }] })
    if (!state.file) throw new MamError('conflict', `Download ${state.id} is not ready yet (${job?.state ?? 'queued'}); poll GET /asset_status/${state.jobId}`, { errors: [{ param: 'state_id', message: 'is not finished' }] })
    return { asset, state }
  }

  const download = (kind: PackageKind) => async (ctx: MamContext) => {
    const { asset, state } = await finishedState(ctx, kind)
    const ext = path.extname(state.file!)
    const base = asset.name.replace(/\.[^.]*$/, '')
    const filename = kind === 'highres' ? `${base}.zip` : `${base}_${kind === 'editing_proxy' ? 'proxy' : 'lowres'}${ext}`
    await sendFile(ctx, { path: path.join(ctx.resolve<MamConfig>('config').dataDir, 'downloads', state.file!), type: CONTENT_TYPES[ext] ?? 'application/octet-stream', filename })
  }

  routes.put('/assets/:id/prepare_download_highres', { access: 'authenticated', params: IdParams, input: Empty, summary: 'package the original file (zip); answers the state id' }, prepare('highres'))
  routes.put('/assets/:id/prepare_download_editing_proxy', { access: 'authenticated', params: IdParams, input: Empty, summary: 'prepare the editing proxy (built on demand)' }, prepare('editing_proxy'))
  routes.put('/assets/:id/prepare_download_lowres', { access: 'authenticated', params: IdParams, input: Empty, summary: 'prepare the low-res proxy as a file' }, prepare('lowres'))
  routes.get('/assets/:id/download_highres', { access: 'authenticated', params: IdParams, input: StateInput, summary: 'the zip of the original file (state_id from prepare_download_highres)' }, download('highres'))
  routes.get('/assets/:id/download_editing_proxy', { access: 'authenticated', params: IdParams, input: StateInput, summary: 'the editing proxy (state_id from prepare_download_editing_proxy)' }, download('editing_proxy'))
}
