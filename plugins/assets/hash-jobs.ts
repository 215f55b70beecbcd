import { SUMS_WORKER, stopFlagOf, sumsOrThrow, type DescriptorSumsResult, type DescriptorSumsTask, type JobContext, type JobRegistrar } from '../../core/index.js'
import { Asset } from './entities.js'
import { withOriginal } from './originals.js'

export interface HashResult {
  crc32: string
  sha256: string | null
  bytes: number
}
const MAX_ERRORS = 100

/**
 * Hashes a descriptor the job opened (and closes once this settles) in the worker pool. The task
 * watches the job's cancellation through a shared flag instead of having its thread terminated:
 * it settles only once no read of it is in flight, so closing the descriptor right after is safe.
 */
export async function hashDescriptor(ctx: JobContext, fd: number, sha256: boolean): Promise<HashResult> {
  // the core's sums worker (one read pass, the next chunk read while this one is hashed), the one the archive copies with
  const task: DescriptorSumsTask = { from: fd, to: null, sha256, crc32: true, stop: stopFlagOf(ctx.signal) }
  const r = sumsOrThrow(await ctx.runWorker<DescriptorSumsResult>(SUMS_WORKER, task, { cooperative: true }))
  return { crc32: r.crc32!, sha256: r.sha256, bytes: r.size }
}

export function defineHashJobs(jobs: JobRegistrar) {
  /** hashes a project's files, a few at a time in the piscina pool (one file per task) */
  jobs.define<{ projectId: number; sha256: boolean }>('assets.rehash', {
    kind: 'project',
    concurrency: 1,
    async handler(ctx) {
      const total = await ctx.em.count(Asset, { project: ctx.payload.projectId, online: true })
      let done = 0
      let failed = 0
      let bytes = 0
      // why files were not hashed (a file gone since the last reindex, one that leads outside the project), the first few
      const errors: Array<{ asset_id: number; error: string }> = []
      for (let lastId = 0; ; ) {
        // a cancelled or stopped job ends here, what the pages before hashed kept; its tasks stopped reading already
        if (ctx.signal.aborted) throw new Error('cancelled')
        const page = await ctx.em.find(Asset, { project: ctx.payload.projectId, online: true, id: { $gt: lastId } }, { populate: ['project'], orderBy: { id: 'asc' }, limit: 64 })
        if (!page.length) break
        // as many files in flight as the pool has threads; the pool queues the rest
        await Promise.all(
          page.map(async (asset) => {
            try {
              const r = await withOriginal(ctx, asset, (original) => hashDescriptor(ctx, original.handle.fd, ctx.payload.sha256))
              asset.crc32 = r.crc32
              if (r.sha256) asset.sha256 = r.sha256
              asset.hashedAt = new Date()
              bytes += r.bytes
              done++
            } catch (err) {
              failed++
              if (errors.length < MAX_ERRORS) errors.push({ asset_id: asset.id, error: (err as Error).message })
            }
          }),
        )
        await ctx.em.flush()
        ctx.count(done, failed)
        ctx.progress((done + failed) / Math.max(total, 1))
        lastId = page[page.length - 1].id
        ctx.em.clear()
      }
      return { hashed: done, failed, bytes, errors }
    },
  })
}
