import type { Asset } from './entities.js'
import { AssetState, PACKAGE_TTL_MS, serializeState, type PackageKind } from './downloads.js'
import { sendBody } from './serve-file.js'
import { zipLayout, zipRange, type ZipSource } from './zip-stream.js'

import { MamError, User, type EntityManager, type JobService, type MamContext, type Principal } from '../../core/index.js'
const stateProblem = (code: 'not_found' | 'gone' | 'conflict', detail: string, message: string) => new MamError(code, detail, { errors: [{ param: 'state_id', message }] })

/**
 * Prepared downloads (spec §3: prepare → AssetState → download with its id once finished) for other
 * plugins' kinds of package (`transcripts`): the same state rows, expiry, state_id checks and zip
 * streaming as the asset downloads, offered through `assetServices.downloads`.
 */
export class PreparedDownloads {
  constructor(private readonly jobs: JobService) {}

  /** a new state of `kind` for the user and its job (at the project's encoding priority); answer it with 202 `assetstate` */
  async prepare(em: EntityManager, principal: Principal, asset: Asset, kind: string, jobType: string): Promise<{ assetstate: ReturnType<typeof serializeState> }> {
    const state = em.create(AssetState, { asset, user: em.getReference(User, principal.userId), kind: kind as PackageKind })
    await em.flush()
    const job = await this.jobs.enqueue(jobType, { stateId: state.id }, { userId: principal.userId, projectId: asset.project.id, assetId: asset.id, priority: asset.project.encodingPriority })
    state.jobId = job.id
    await em.flush()
    return { assetstate: serializeState(state, job) }
  }

  /** the state a package job works on, with its asset and project; null when it is gone */
  load(em: EntityManager, stateId: number): Promise<AssetState | null> {
    return em.findOne(AssetState, stateId, { populate: ['asset', 'asset.project'] })
  }

  /** marks a state finished: its package has `size` bytes and can be downloaded for a day */
  async finish(em: EntityManager, state: AssetState, size: number): Promise<void> {
    Object.assign(state, { size, expiresAt: new Date(Date.now() + PACKAGE_TTL_MS) })
    await em.flush()
  }

  /** the caller's finished, unexpired state of this asset and kind; every other case is a clear 4xx naming `state_id` */
  async finished(em: EntityManager, principal: Principal, asset: Asset, kind: string, stateId: number): Promise<AssetState> {
    const state = await em.findOne(AssetState, { id: stateId, asset, kind: kind as PackageKind }, { populate: ['user'] })
    // another user's state is reported like an unknown one: its existence is not theirs to learn
    if (!state || (state.user.id !== principal.userId && !principal.isAdmin)) throw stateProblem('not_found', `No ${kind} download ${stateId} of asset ${asset.id} for you`, 'is unknown')
    const job = state.jobId ? await this.jobs.get(state.jobId) : null
    if (state.expiresAt && state.expiresAt.getTime() <= Date.now()) throw stateProblem('gone', `Download ${state.id} has expired; prepare it again`, 'has expired')
    if (job?.state === 'failed' || job?.state === 'cancelled') throw stateProblem('conflict', `Download ${state.id} ${job.state}: ${job.error ?? 'no reason given'}`, `is ${job.state}`)
    if (state.size === null) throw stateProblem('conflict', `Download ${state.id} is not ready yet (${job?.state ?? 'queued'}); poll GET /asset_status/${state.jobId}`, 'is not finished')
    return state
  }

  /** bytes of a STORE zip of these files, its exact size known up front */
  zipSize(files: ZipSource[]): number {
    return zipLayout(files).size
  }

  /** answers a STORE zip of these files (sizes and CRC-32s known), with HTTP Range */
  sendZip(ctx: MamContext, files: ZipSource[], filename: string): Promise<void> {
    const layout = zipLayout(files)
    return sendBody(ctx, { size: layout.size, type: 'application/zip', filename, open: (start, end) => zipRange(layout, start, end) })
  }
}
