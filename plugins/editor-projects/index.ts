import { setTimeout } from 'node:timers/promises'
import { IdParams, NoInput, Type, acceptedJob, coreServices, defineJob, definePlugin, permanentError, type RegisterApi } from '../../core/index.js'
import { Asset, assetServices, withOriginal } from '../assets/index.js'
import { EditorProjectReadingSchema } from './entities.js'
import { migrations } from './migrations.js'
import { editorProjectServices } from './refs.js'
import { EditorProjectService, READ_JOB, type EditorProjectSettings } from './service.js'
import type { ReadResult, ReadTask } from './worker.js'

export { editorProjectServices } from './refs.js'
export type { EditorProjectService } from './service.js'

const MB = 1024 * 1024
const Settings = Type.Object(
  {
    /** project files whose XML is at most this size (compressed ones estimated ×10–20) are read in the request */
    inlineMaxBytes: Type.Integer({ minimum: 0, default: 2 * MB }),
    /** the largest project file read at all (streamed formats: .prproj, .xml, .fcpxml) */
    maxFileBytes: Type.Integer({ minimum: 1, default: 512 * MB }),
    /** the largest .drp or .aaf (read whole into memory) */
    maxContainerBytes: Type.Integer({ minimum: 1, default: 128 * MB }),
    /** bytes after decompression (gzip .prproj, zip .drp entries) */
    maxExpandedBytes: Type.Integer({ minimum: 1, default: 4096 * MB }),
    /** sequences and media references kept per file */
    maxEntries: Type.Integer({ minimum: 1, default: 20000 }),
    /** library projects searched for media besides the project file's own project */
    maxLibraryProjects: Type.Integer({ minimum: 0, default: 20 }),
  },
  { default: {} },
)

const ReadProject = defineJob(READ_JOB, Type.Object({ assetId: Type.Integer({ minimum: 1 }) }))
const WORKER = new URL('./worker.js', import.meta.url)
const CLAIM_WAITS = 40
const CLAIM_WAIT_MS = 50

function registerRoutes(api: RegisterApi) {
  const projects = api.use(editorProjectServices.service)
  api.routes.put(
    '/assets/:id/editor_project_sequence_names',
    { access: 'authenticated', params: IdParams, input: NoInput, summary: 'sequence names present in an editing-suite project (202 with a job while a large file is read)' },
    async (ctx) => {
      const asset = await projects().projectAsset(ctx.em, ctx.user, ctx.params.id)
      const outcome = await projects().read(ctx, ctx.user, asset)
      if ('job' in outcome) return acceptedJob(ctx, outcome.job)
      return { hash: { asset_id: asset.id, format: outcome.reading.format, sequence_names: outcome.reading.sequences } }
    },
  )
  api.routes.put(
    '/assets/:id/editor_project_download_summary',
    { access: 'authenticated', params: IdParams, input: NoInput, summary: 'the media of an editing-suite project found as assets, their sizes and total, and the media missing' },
    async (ctx) => {
      const asset = await projects().projectAsset(ctx.em, ctx.user, ctx.params.id)
      const outcome = await projects().read(ctx, ctx.user, asset)
      if ('job' in outcome) return acceptedJob(ctx, outcome.job)
      return { hash: await projects().summarize(ctx.user, asset, outcome.reading) }
    },
  )
}

function defineReadJob(api: RegisterApi) {
  api.jobs.define(ReadProject, {
    maxAttempts: 2,
    concurrency: 1,
    async handler(ctx) {
      const service = ctx.resolve(editorProjectServices.service)
      const { assetId } = ctx.payload
      // only the job that claimed the reading does the work (a request that lost the race cancels its own).
      // The request claims the row just after queueing the job, so a job that starts at once may come
      // before its claim: it waits for it a little.
      let owned = false
      for (let i = 0; i < CLAIM_WAITS && !owned && !ctx.signal.aborted; i++) {
        owned = Boolean(await service.ownedBy(assetId, ctx.id))
        if (!owned) await setTimeout(CLAIM_WAIT_MS)
      }
      if (!owned) return { skipped: true }
      const asset = await ctx.em.findOne(Asset, assetId, { populate: ['project'] })
      if (!asset || asset.project.deleted) return { skipped: true }
      const settings = api.settings() as EditorProjectSettings
      const { identity, result } = await withOriginal(ctx, asset, async (original) => {
        const identity = { file_size: original.stats.size, file_mtime_ms: Math.floor(original.stats.mtimeMs) }
        const task: ReadTask = { file: original.descriptorPath, name: asset.name, size: identity.file_size, limits: settings }
        return { identity, result: await ctx.runWorker<ReadResult>(WORKER, task) }
      })
      if ('refused' in result) {
        await service.store(assetId, identity, { state: 'failed', error: result.refused.message, error_status: result.refused.status }, ctx.id)
        throw permanentError(`the project file ${asset.path} cannot be read: ${result.refused.message}`)
      }
      const { reading } = result
      await service.store(assetId, identity, { state: 'ready', format: reading.format, sequence_names: JSON.stringify(reading.sequences), media: JSON.stringify(reading.media) }, ctx.id)
      return { format: reading.format, sequences: reading.sequences.length, media: reading.media.length }
    },
  })
}

/** Sequence names and download summaries of editing-suite project files stored as assets (§4.6). */
export const editorProjectsPlugin = definePlugin({
  name: 'editor-projects',
  title: 'Editor projects',
  version: '1.0.0',
  description: 'Reads Premiere, Resolve, Final Cut Pro and AAF project files: their sequences, and their media joined with the assets',
  dependsOn: ['assets', 'projects', 'identity'],
  entities: [EditorProjectReadingSchema],
  migrations,
  settings: Settings,
  register(api) {
    api.provide(
      editorProjectServices.service,
      (r) => new EditorProjectService(r(coreServices.knex), r(assetServices.service), r(coreServices.jobs), () => api.settings() as EditorProjectSettings),
    )
    registerRoutes(api)
    defineReadJob(api)
  },
})
