import { mkdir, rm } from 'node:fs/promises'
import type { Outbox, JobRegistrar, MamConfig, MediaTools, JobContext, JobService } from '../../core/index.js'
import { assetProxyReady } from './events.js'
import path from 'node:path'
import { Asset } from './entities.js'
import { assetJob } from './service.js'
import { withOriginal } from './originals.js'
import type { ProxyStore } from './proxy-store.js'
import { buildProxies, burnTimecode, DEFAULT_PROXY_SETTINGS, type ProxySettings } from './proxies.js'
import { faultOf, makeDirs } from '../../core/index.js'

export const settingsOf = (config: MamConfig): ProxySettings => ({ ...DEFAULT_PROXY_SETTINGS, ...(config.plugins.assets?.proxy as Partial<ProxySettings> | undefined) })

/** a private scratch folder per run, removed whatever happens */
async function withWorkDir<T>(ctx: JobContext, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = path.join(ctx.resolve<MamConfig>('config').dataDir, 'tmp', `job-${ctx.id}-${ctx.attempt}`)
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

export function defineProxyJobs(jobs: JobRegistrar, encodeConcurrency: number) {
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
      const store = ctx.resolve<ProxyStore>('proxyStore')
      asset.proxyState = 'processing'
      await ctx.em.flush()
      try {
        // stills need sharp only; a missing ffmpeg fails a media proxy with its reason instead of leaving it pending
        const ffmpeg = asset.type === 'image' ? '' : await ctx.resolve<MediaTools>('mediaTools').require('ffmpeg')
        const stored = await withWorkDir(ctx, async (dir) => {
          const plain = await withOriginal(ctx, asset, async (original) => buildProxies(ffmpeg, asset, await original.toolPath(), dir, settingsOf(ctx.resolve('config')), ctx.signal))
          return store.store(asset, plain)
        })
        // an existing editing proxy stays valid; the low-res kinds are replaced
        asset.proxies = { ...(asset.proxies.editing ? { editing: asset.proxies.editing } : {}), ...stored }
        asset.proxyState = 'ready'
        asset.proxyError = null
        ctx.count(1, 0)
      } catch (err) {
        // a full disk or the database away is handed back to run again later (core/jobs/runner.ts):
        // the asset waits for its proxy, it did not fail
        const retried = faultOf(err) !== undefined
        asset.proxyState = retried ? 'pending' : 'failed'
        asset.proxyError = retried ? null : (err as Error).message
        if (!retried) ctx.count(0, 1)
        throw err
      } finally {
        await ctx.em.flush()
      }
      // before the job settles: a crash repeats the job, and with it the event (at least once)
      await ctx.resolve<Outbox>('outbox').publish(ctx.resolve('knex'), assetProxyReady, { asset_id: asset.id, name: asset.name, project_id: asset.project.id, proxies: Object.keys(asset.proxies) }, { subjectId: asset.id })
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
        const ffmpeg = await ctx.resolve<MediaTools>('mediaTools').require('ffmpeg')
        const stored = await withWorkDir(ctx, async (dir) => {
          const target = path.join(dir, 'burnin.mp4')
          await withOriginal(ctx, asset, async (original) => burnTimecode(ffmpeg, asset, await original.toolPath(), target, settingsOf(ctx.resolve('config')), ctx.signal))
          return ctx.resolve<ProxyStore>('proxyStore').store(asset, { burnin: target })
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
      const store = ctx.resolve<ProxyStore>('proxyStore')
      const where = { project: ctx.payload.projectId, online: true, ...(ctx.payload.action === 'burn-timecode' ? { type: 'video' as const } : {}) }
      let done = 0
      for (let lastId = 0; ; ) {
        const page = await ctx.em.find(Asset, { ...where, id: { $gt: lastId } }, { populate: ['project'], orderBy: { id: 'asc' }, limit: 500 })
        if (!page.length) break
        if (ctx.payload.action === 'convert-layout') {
          for (const asset of page) if (await store.migrate(asset)) done++
        } else {
          await ctx.resolve<JobService>('jobs').enqueueMany(page.map((asset) => assetJob(`assets.${ctx.payload.action}`, asset, ctx.payload.userId)))
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
