import { IdParams, acceptedJob, paginate, type RegisterApi } from '../../core/index.js'
import { platformServices } from './refs.js'
import { IngestCreateInput, IngestFilesInput, IngestListInput, IngestUpdateInput } from './ingest-schemas.js'
import { ingestFileJson, ingestJson, type LibraryIngestService } from './ingests.js'

/** §4.17 library ingests: watched folders feeding library projects (administrators). */
export function registerIngestRoutes(api: RegisterApi) {
  const { routes } = api
  const ingests = api.use(platformServices.ingests)

  const render = async (s: LibraryIngestService, rows: Array<Record<string, any>>) => {
    const counts = await s.counts(rows.map((r) => Number(r.id)))
    return Promise.all(rows.map(async (r) => ingestJson(r, await s.folderExists(r), counts.get(Number(r.id)))))
  }

  routes.get('/library_ingests', { access: 'admin', input: IngestListInput, summary: 'watched folders feeding library projects (root key `array`)' }, async (ctx) => {
    const rows = await paginate(ctx, ingests().list(), ctx.input, { orderBy: ['id'], total: true })
    return { array: await render(ingests(), rows) }
  })

  routes.post('/library_ingests', { access: 'admin', input: IngestCreateInput, wrap: 'library_ingest', summary: 'watch a folder; answers the job of the first scan' }, async (ctx) => {
    const { ingest, job } = await ingests().create(ctx.input.library_ingest, ctx.user.userId)
    ctx.set('Location', `/api/v1/library_ingests/${ingest.id}`)
    return acceptedJob(ctx, job)
  })

  routes.put('/library_ingests/:id', { access: 'admin', params: IdParams, input: IngestUpdateInput, wrap: 'library_ingest', summary: 'change a library ingest (enabled: false pauses it)' }, async (ctx) => {
    const row = await ingests().update(ctx.params.id, ctx.input.library_ingest)
    return { libraryingest: (await render(ingests(), [row]))[0] }
  })

  routes.delete('/library_ingests/:id', { access: 'admin', params: IdParams, summary: 'stop watching; registered assets stay' }, async (ctx) => {
    const row = await ingests().remove(ctx.params.id)
    return { libraryingest: ingestJson(row, await ingests().folderExists(row)) }
  })

  routes.get('/library_ingests/:id/files', { access: 'admin', params: IdParams, input: IngestFilesInput, summary: 'files seen in the watched folder: state, asset, error' }, async (ctx) => {
    await ingests().get(ctx.params.id)
    const rows = await paginate(ctx, ingests().filesQuery(ctx.params.id, ctx.input.state), ctx.input, { orderBy: ['id'], total: true })
    return { library_ingest_files: rows.map(ingestFileJson) }
  })
}
