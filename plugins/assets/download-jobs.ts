import { rm } from 'node:fs/promises'
import path from 'node:path'
import { coreServices, defineJob, Type, type JobRegistrar, type JobContext } from '../../core/index.js'
import { AssetState, PACKAGE_TTL_MS } from './downloads.js'
import type { Asset } from './entities.js'
import { withOriginal } from './originals.js'
import { assetServices } from './refs.js'
import { plainSize } from './proxy-crypto.js'
import { lowresKind } from './proxy-routes.js'
import { buildEditingProxy, type ProxySettings } from './proxies.js'
import { hashDescriptor } from './hash-jobs.js'
import { zipLayout } from './zip-stream.js'

const CLEANUP_EVERY_MS = 3600_000
const expireDownloads = defineJob('assets.expire-downloads', Type.Object({}, { additionalProperties: false }))
/** expired states answer 410 for a week, then their rows go */
const KEEP_EXPIRED_MS = 7 * 86_400_000

const permanent = (message: string) => Object.assign(new Error(message), { permanent: true })

/**
 * The original's CRC-32 for the zip: the stored one while the file is unchanged, else one read pass
 * in a worker, of the descriptor that was opened and checked (a symlink planted in the original's
 * place fails the job with the reason).
 */
function packageOriginal(ctx: JobContext, asset: Asset, state: AssetState): Promise<number> {
  return withOriginal(ctx, asset, async ({ handle, stats }) => {
    const mtime = new Date(Math.floor(stats.mtimeMs))
    const unchanged = asset.size === stats.size && asset.mtime?.getTime() === mtime.getTime()
    let crc32 = unchanged ? asset.crc32 : null
    if (!crc32) {
      crc32 = (await hashDescriptor(ctx, handle.fd, false)).crc32
      // the row describes this content: keep the CRC for the next download (rehash would write the same)
      if (unchanged) Object.assign(asset, { crc32, hashedAt: new Date() })
    }
    Object.assign(state, { crc32, sourceSize: stats.size, sourceMtime: mtime })
    return zipLayout([{ name: asset.name, file: handle, size: stats.size, crc32: parseInt(crc32, 16), mtime }]).size
  })
}

/** the editing proxy, built on demand (ProRes is large, so only for assets someone asks for) */
async function ensureEditingProxy(ctx: JobContext, asset: Asset, settings: ProxySettings): Promise<void> {
  if (asset.proxies.editing) return
  const config = ctx.resolve(coreServices.config)
  const ffmpeg = await ctx.resolve(coreServices.mediaTools).require('ffmpeg')
  const scratch = path.join(config.dataDir, 'tmp', `job-${ctx.id}-${ctx.attempt}.mov`)
  try {
    await withOriginal(ctx, asset, async (original) => buildEditingProxy(ffmpeg, asset, await original.toolPath(), scratch, settings, ctx.signal))
    asset.proxies = { ...asset.proxies, ...(await ctx.resolve(assetServices.proxyStore).store(asset, { editing: scratch })) }
    await ctx.em.flush()
  } finally {
    await rm(scratch, { force: true })
  }
}

export function defineDownloadJobs(jobs: JobRegistrar, proxySettings: () => ProxySettings) {
  jobs.define<{ stateId: number }>('assets.package', {
    kind: 'asset',
    maxAttempts: 3,
    async handler(ctx) {
      const state = await ctx.em.findOne(AssetState, ctx.payload.stateId, { populate: ['asset', 'asset.project'] })
      if (!state) return { skipped: true }
      const asset = state.asset
      try {
        if (state.kind === 'highres') state.size = await packageOriginal(ctx, asset, state)
        else {
          if (state.kind === 'editing_proxy') await ensureEditingProxy(ctx, asset, proxySettings())
          const kind = state.kind === 'editing_proxy' ? 'editing' : lowresKind(asset)
          const source = ctx.resolve(assetServices.proxyStore).fileOf(asset, kind)
          if (!source) throw permanent(`asset ${asset.id} has no ${kind} proxy yet`)
          state.size = await plainSize(source)
        }
      } catch (err) {
        ctx.count(0, 1)
        throw err
      }
      state.expiresAt = new Date(Date.now() + PACKAGE_TTL_MS)
      await ctx.em.flush()
      ctx.count(1, 0)
      return { size: state.size }
    },
  })

  // removes states a week after they expired, every hour (the first run a minute after the chain starts)
  jobs.define(expireDownloads, {
    kind: 'generic',
    concurrency: 1,
    async handler(ctx) {
      const removed = await ctx.em.nativeDelete(AssetState, { expiresAt: { $lte: new Date(Date.now() - KEEP_EXPIRED_MS) } })
      return { removed }
    },
  })
  jobs.schedule(expireDownloads, CLEANUP_EVERY_MS, { firstAfterMs: 60_000 })
}
