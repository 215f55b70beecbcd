import { rm } from 'node:fs/promises'
import path from 'node:path'
import type { JobRegistrar } from '../../core/plugin/contract.js'
import type { MamConfig } from '../../core/config.js'
import type { MediaTools } from '../../core/media/tools.js'
import { AssetState, PACKAGE_TTL_MS, decryptToFile, writeZip } from './downloads.js'
import type { AssetService } from './service.js'
import type { ProxyStore } from './proxy-store.js'
import { buildEditingProxy } from './proxies.js'
import { settingsOf } from './proxy-jobs.js'

const downloadsDir = (config: MamConfig) => path.join(config.dataDir, 'downloads')
const CLEANUP_EVERY_MS = 3600_000

export function defineDownloadJobs(jobs: JobRegistrar) {
  jobs.define<{ stateId: number }>('assets.package', {
    kind: 'asset',
    maxAttempts: 3,
    async handler(ctx) {
      const state = await ctx.em.findOne(AssetState, ctx.payload.stateId, { populate: ['asset', 'asset.project'] })
      if (!state) return { skipped: true }
      const config = ctx.resolve<MamConfig>('config')
      const store = ctx.resolve<ProxyStore>('proxyStore')
      const asset = state.asset
      let file: string
      let size: number
      if (state.kind === 'highres') {
        file = `${state.id}.zip`
        size = await writeZip(path.join(downloadsDir(config), file), [{ file: ctx.resolve<AssetService>('assets').fileOf(asset), name: asset.name }])
      } else {
        if (state.kind === 'editing_proxy' && !asset.proxies.editing) {
          // built on demand: ProRes is large, so it is only made for assets someone asks for
          const ffmpeg = await ctx.resolve<MediaTools>('mediaTools').require('ffmpeg')
          const scratch = path.join(config.dataDir, 'tmp', `job-${ctx.id}-${ctx.attempt}.mov`)
          try {
            await buildEditingProxy(ffmpeg, asset, ctx.resolve<AssetService>('assets').fileOf(asset), scratch, settingsOf(config), ctx.signal)
            asset.proxies = { ...asset.proxies, ...(await store.store(asset, { editing: scratch })) }
            await ctx.em.flush()
          } finally {
            await rm(scratch, { force: true })
          }
        }
        const kind = state.kind === 'editing_proxy' ? 'editing' : asset.type === 'audio' ? 'audio' : asset.type === 'image' ? 'image' : 'lowres'
        const source = store.fileOf(asset, kind)
        if (!source) throw Object.assign(new Error(`asset ${asset.id} has no ${kind} proxy yet`), { permanent: true })
        file = `${state.id}${path.extname(source.replace(/\.enc$/, ''))}`
        size = await decryptToFile(store.keyOf(asset), source, path.join(downloadsDir(config), file))
      }
      state.file = file
      state.size = size
      state.expiresAt = new Date(Date.now() + PACKAGE_TTL_MS)
      await ctx.em.flush()
      return { size }
    },
  })

  // removes expired packages, then schedules its next run
  jobs.define('assets.expire-downloads', {
    kind: 'generic',
    concurrency: 1,
    async handler(ctx) {
      const config = ctx.resolve<MamConfig>('config')
      const expired = await ctx.em.find(AssetState, { expiresAt: { $lte: new Date() }, purged: false }, { limit: 10_000 })
      for (const s of expired) {
        if (s.file) await rm(path.join(downloadsDir(config), s.file), { force: true })
        s.purged = true
      }
      await ctx.em.flush()
      await ctx.resolve('jobs').enqueue('assets.expire-downloads', {}, { runAt: new Date(Date.now() + CLEANUP_EVERY_MS) })
      return { purged: expired.length }
    },
  })
}
