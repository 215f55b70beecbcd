import type { JobRegistrar } from '../../core/plugin/contract.js'
import { Asset } from './entities.js'
import type { AssetService } from './service.js'
import type { HashResult, HashTask } from './workers/hash.js'

export const HASH_WORKER = new URL('./workers/hash.js', import.meta.url)

export function defineHashJobs(jobs: JobRegistrar) {
  /** hashes a project's files, a few at a time in the piscina pool (one file per task) */
  jobs.define<{ projectId: number; sha256: boolean }>('assets.rehash', {
    kind: 'project',
    concurrency: 1,
    async handler(ctx) {
      const assets = ctx.resolve<AssetService>('assets')
      const total = await ctx.em.count(Asset, { project: ctx.payload.projectId, online: true })
      let done = 0
      let failed = 0
      let bytes = 0
      for (let lastId = 0; ; ) {
        const page = await ctx.em.find(Asset, { project: ctx.payload.projectId, online: true, id: { $gt: lastId } }, { populate: ['project'], orderBy: { id: 'asc' }, limit: 64 })
        if (!page.length) break
        // as many files in flight as the pool has threads; the pool queues the rest
        await Promise.all(
          page.map(async (asset) => {
            try {
              const r = await ctx.runWorker<HashResult>(HASH_WORKER, { file: assets.fileOf(asset), sha256: ctx.payload.sha256 } satisfies HashTask)
              asset.crc32 = r.crc32
              if (r.sha256) asset.sha256 = r.sha256
              asset.hashedAt = new Date()
              bytes += r.bytes
              done++
            } catch {
              failed++ // a file that vanished since the last reindex
            }
          }),
        )
        await ctx.em.flush()
        ctx.count(done, failed)
        ctx.progress((done + failed) / Math.max(total, 1))
        lastId = page[page.length - 1].id
        ctx.em.clear()
      }
      return { hashed: done, failed, bytes }
    },
  })
}
