import { rm } from 'node:fs/promises'
import path from 'node:path'
import { coreServices, faultOf, makeDirs, type JobRegistrar, type JobContext } from '../../core/index.js'
import { assetProxyReady } from './events.js'
import { Asset } from './entities.js'
import { assetJob } from './service.js'
import { withOriginal } from './originals.js'
import { assetServices } from './refs.js'
import { buildProxies, burnTimecode, type ProxySettings } from './proxies.js'

/** a private scratch folder per run, removed whatever happens */
async function withWorkDir<T>(ctx: JobContext, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = path.join(ctx.resolve(coreServices.config).dataDir, 'tmp', `job-${ctx.id}-${ctx.attempt}`)
  await rm(dir, { recursive: true, force: true })
  await makeDirs(dir)
  try {
    return await work(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** why an asset of type `other` has no proxy */
export const NOT_MEDIA = 'not audio, video or a still image: no proxy is made'

/** the fields of an asset for which no proxy job is due: a final state with its reason */
export const noProxy = (reason: string) => ({ proxyState: 'none' as const, proxyError: reason })

async function loadAsset(ctx: JobContext<{ assetId: number }>) {
  const asset = await ctx.em.findOne(Asset, ctx.payload.assetId, { populate: ['project'] })
  return asset && asset.online && !asset.project.deleted ? asset : null
}

/**
 * Records an asset's proxies as ready and tells its readers (`asset.proxy-ready`) in one transaction:
 * the event is written only when this commit makes the state ready, so a run that fails after the
 * proxies were stored is retried without an event left behind, and a run that finds them ready
 * already (another run of the asset committed first) tells nobody again. Returns whether it did.
 */
async function recordReady(ctx: JobContext, asset: Asset): Promise<boolean> {
  const outbox = ctx.resolve(coreServices.outbox)
  const made = await ctx.resolve(coreServices.knex).transaction(async (trx) => {
    const changed = await trx('assets').where({ id: asset.id }).whereNot('proxy_state', 'ready').update({ proxy_state: 'ready', proxy_error: null, updated_at: new Date() })
    if (changed) await outbox.publish(trx, assetProxyReady, { asset_id: asset.id, name: asset.name, project_id: asset.project.id, proxies: Object.keys(asset.proxies) }, { subjectId: asset.id })
    return changed > 0
  })
  return made
}

/** `proxySettings` is read on each run, so a change of the settings applies to the next encode */
export function defineProxyJobs(jobs: JobRegistrar, encodeConcurrency: number, proxySettings: () => ProxySettings) {
  jobs.define<{ assetId: number }>('assets.proxy', {
    kind: 'asset',
    concurrency: encodeConcurrency,
    maxAttempts: 3,
    async handler(ctx) {
      const asset = await loadAsset(ctx)
      if (!asset || asset.analysisState !== 'ready') return { skipped: true }
      if (asset.type === 'other') {
        // a project-wide reencode queues every asset: files that are not media get their final state
        Object.assign(asset, noProxy(NOT_MEDIA))
        await ctx.em.flush()
        return { skipped: true }
      }
      const store = ctx.resolve(assetServices.proxyStore)
      asset.proxyState = 'processing'
      await ctx.em.flush()
      try {
        // stills need sharp only; a missing ffmpeg fails a media proxy with its reason instead of leaving it pending
        const ffmpeg = asset.type === 'image' ? '' : await ctx.resolve(coreServices.mediaTools).require('ffmpeg')
        const stored = await withWorkDir(ctx, async (dir) => {
          const plain = await withOriginal(ctx, asset, async (original) => buildProxies(ffmpeg, asset, await original.toolPath(), dir, proxySettings(), ctx.signal))
          return store.store(asset, plain)
        })
        // an existing editing proxy stays valid; the low-res kinds are replaced. The files, their key
        // and layout are written first (the state still says processing), then the state with its event
        asset.proxies = { ...(asset.proxies.editing ? { editing: asset.proxies.editing } : {}), ...stored }
        await ctx.em.flush()
        await recordReady(ctx, asset)
      } catch (err) {
        // a full disk or the database away is handed back to run again later (core/jobs/runner.ts):
        // the asset waits for its proxy, it did not fail
        const retried = faultOf(err) !== undefined
        asset.proxyState = retried ? 'pending' : 'failed'
        asset.proxyError = retried ? null : (err as Error).message
        await ctx.em.flush()
        if (!retried) ctx.count(0, 1)
        throw err
      }
      // a crash from here until the job settles repeats the job, and with it the event (at least once)
      ctx.count(1, 0)
      return { proxies: Object.keys(asset.proxies) }
    },
  })

  // a low-res copy with burnt-in timecode, beside the other proxies (reburn_timecode)
  jobs.define<{ assetId: number }>('assets.burn-timecode', {
    kind: 'asset',
    concurrency: encodeConcurrency,
    maxAttempts: 3,
    async handler(ctx) {
      const asset = await loadAsset(ctx)
      if (!asset || asset.type !== 'video') return { skipped: true }
      try {
        const ffmpeg = await ctx.resolve(coreServices.mediaTools).require('ffmpeg')
        const stored = await withWorkDir(ctx, async (dir) => {
          const target = path.join(dir, 'burnin.mp4')
          await withOriginal(ctx, asset, async (original) => burnTimecode(ffmpeg, asset, await original.toolPath(), target, proxySettings(), ctx.signal))
          return ctx.resolve(assetServices.proxyStore).store(asset, { burnin: target })
        })
        asset.proxies = { ...asset.proxies, ...stored }
        await ctx.em.flush()
        ctx.count(1, 0)
        return { burnin: stored.burnin }
      } catch (err) {
        ctx.count(0, 1)
        throw err
      }
    },
  })

  /** one job per project action: it queues the per-asset jobs page by page */
  jobs.define<{ projectId: number; action: 'proxy' | 'burn-timecode' | 'convert-layout'; userId?: number }>('assets.project-batch', {
    kind: 'project',
    concurrency: 1,
    async handler(ctx) {
      const store = ctx.resolve(assetServices.proxyStore)
      const where = { project: ctx.payload.projectId, online: true, ...(ctx.payload.action === 'burn-timecode' ? { type: 'video' as const } : {}) }
      let done = 0
      for (let lastId = 0; ; ) {
        const page = await ctx.em.find(Asset, { ...where, id: { $gt: lastId } }, { populate: ['project'], orderBy: { id: 'asc' }, limit: 500 })
        if (!page.length) break
        if (ctx.payload.action === 'convert-layout') {
          for (const asset of page) if (await store.migrate(asset)) done++
        } else {
          await ctx.resolve(coreServices.jobs).enqueueMany(page.map((asset) => assetJob(`assets.${ctx.payload.action}`, asset, ctx.payload.userId)))
          done += page.length
        }
        await ctx.em.flush()
        lastId = page[page.length - 1].id
        ctx.em.clear()
      }
      return { assets: done }
    },
  })
}
