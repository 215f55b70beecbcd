import { lstat } from 'node:fs/promises'
import path from 'node:path'
import { coreServices, faultOf, type JobRegistrar } from '../../core/index.js'
import { Project, projectScope, projectServices } from '../projects/index.js'
import { Asset } from './entities.js'
import { analyse } from './probe.js'
import { assetJob } from './service.js'
import { assetServices } from './refs.js'
import { walkFiles } from './files.js'
import { withOriginal } from './originals.js'
import { NOT_MEDIA, noProxy } from './proxy-jobs.js'

/** Jobs are at least once: each handler re-reads the asset and writes the same result on a rerun. */
export function defineAssetJobs(jobs: JobRegistrar) {
  jobs.define<{ assetId: number }>('assets.analyse', {
    kind: 'asset',
    maxAttempts: 3,
    async handler(ctx) {
      const asset = await ctx.em.findOne(Asset, ctx.payload.assetId, { populate: ['project'] })
      if (!asset || !asset.online) return { skipped: true }
      const tools = ctx.resolve(coreServices.mediaTools)
      // single-row updates rather than unit-of-work flushes: an ingest runs this once per file
      const write = (fields: Partial<Asset>) => ctx.em.nativeUpdate(Asset, { id: asset.id }, { ...fields, updatedAt: new Date() })
      await write({ analysisState: 'processing' })
      let result: Awaited<ReturnType<typeof analyse>>
      try {
        const ffprobe = (await tools.ready()).get('ffprobe') ? (args: string[]) => tools.run('ffprobe', args) : null
        result = await withOriginal(ctx, asset, async (original) => analyse(ffprobe, await original.toolPath(), asset.name))
      } catch (err) {
        if (faultOf(err)) {
          // a full disk or the database away (core/errors.ts) is handed back to run again later
          // (core/jobs/runner.ts), as a proxy job's is: the asset waits for its analysis, nothing
          // about the file failed. The write is best effort: with the database away it cannot be
          // made, and the rerun sets the state anyway
          await write({ analysisState: 'pending', analysisError: null }).catch(() => {})
          throw err
        }
        ctx.count(0, 1)
        // no proxy job is due without an analysis: clients polling proxy_state get a final answer
        await write({ analysisState: 'failed', analysisError: (err as Error).message, ...noProxy(`the analysis failed: ${(err as Error).message}`) })
        throw err
      }
      ctx.count(1, 0)
      const media = result.type !== 'other'
      await write({
        type: result.type,
        duration: result.duration,
        metadata: result.metadata,
        analysisState: 'ready',
        analysisError: null,
        metadataChangedAt: new Date(),
        ...(media ? { proxyState: 'pending', proxyError: null } : noProxy(NOT_MEDIA)),
      })
      if (media) await ctx.resolve(coreServices.jobs).enqueueMany([assetJob('assets.proxy', asset)])
      return { type: result.type }
    },
  })

  jobs.define<{ projectId: number; userId?: number }>('assets.reindex', {
    kind: 'project',
    concurrency: 1,
    async handler(ctx) {
      const project = await ctx.em.findOne(Project, { id: ctx.payload.projectId, deleted: false })
      if (!project) return { skipped: true }
      // not beside a folder move or a rename (the walk would see files in two places); uploads may run beside it
      return ctx.resolve(projectServices.storageJournal).hold(projectScope(project.id), {}, async () => {
        const assets = ctx.resolve(assetServices.service)
        const root = await ctx.resolve(projectServices.service).currentRoot(project.id)
        const seen = new Set<string>()
        let batch: string[] = []
        const flush = async () => {
          if (batch.length) await assets.register(ctx.em, project, batch, { userId: ctx.payload.userId })
          ctx.em.clear()
          batch = []
        }
        for await (const relative of walkFiles(root)) {
          if (ctx.signal.aborted) throw new Error('cancelled')
          seen.add(relative)
          batch.push(relative)
          if (batch.length >= 200) await flush()
        }
        await flush()
        // files that vanished stay as offline assets (their metadata and proxies are kept); a file
        // uploaded after the walk passed its folder is not one of them
        let offline = 0
        for (const asset of await ctx.em.find(Asset, { project: project.id, online: true }, { fields: ['id', 'path'] })) {
          if (seen.has(asset.path) || (await lstat(path.join(root, ...asset.path.split('/'))).then(() => true, () => false))) continue
          await ctx.em.nativeUpdate(Asset, { id: asset.id }, { online: false })
          offline++
        }
        return { files: seen.size, offline }
      })
    },
  })

  jobs.define<{ projectId: number; onlyOther: boolean; userId?: number }>('assets.reanalyse', {
    kind: 'project',
    concurrency: 1,
    async handler(ctx) {
      const assets = ctx.resolve(assetServices.service)
      const where = { project: ctx.payload.projectId, online: true, ...(ctx.payload.onlyOther ? { type: 'other' as const } : {}) }
      let queued = 0
      for (let offset = 0; ; offset += 500) {
        const page = await ctx.em.find(Asset, where, { populate: ['project'], orderBy: { id: 'asc' }, limit: 500, offset })
        await assets.analyseLater(page, ctx.payload.userId)
        queued += page.length
        if (page.length < 500) break
      }
      return { queued }
    },
  })
}
