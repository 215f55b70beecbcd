import { Type } from 'typebox'
import { assetServices, type Asset } from '../assets/index.js'
import { projectServices } from '../projects/refs.js'
import { transcriptionServices } from './refs.js'
import { normalizeLanguage, pickLanguage, type Engines } from './engine.js'
import { PackageTranscripts, TranscribeProject, packageDir, packageFiles } from './jobs.js'

import { IdParam, IdParams, MamError, accepted, acceptedJob, conflict, coreServices, invalidParam, type RegisterApi, integerPairCursor } from '../../core/index.js'
const TranscribeInput = Type.Object(
  {
    language: Type.Optional(Type.String({ minLength: 1, maxLength: 35 })),
    engine: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
  },
  { additionalProperties: false },
)
const AssetParams = Type.Object({ asset_id: IdParam })
const TranscriptionParams = Type.Object({ asset_id: IdParam, id: IdParam })
const SentencesParams = Type.Object({ asset_id: IdParam, transcription_id: IdParam })
const SentenceParams = Type.Object({ asset_id: IdParam, transcription_id: IdParam, id: IdParam })

const speakerFields = {
  speaker: Type.Optional(Type.String({ maxLength: 1000 })),
  new_speaker: Type.Optional(Type.String({ maxLength: 1000 })),
}
const RenameInput = Type.Object({ transcription: Type.Optional(Type.Object(speakerFields, { additionalProperties: false })) }, { additionalProperties: false })

const sentenceFields = {
  text: Type.Optional(Type.String({ maxLength: 100_000 })),
  start: Type.Optional(Type.Number()),
  end: Type.Optional(Type.Number()),
  speaker: Type.Optional(Type.String({ maxLength: 1000 })),
}
const SentenceInput = Type.Object({ sentence: Type.Optional(Type.Object(sentenceFields, { additionalProperties: false })) }, { additionalProperties: false })
const SentenceList = Type.Object(
  {
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
)
const StateInput = Type.Object({ state_id: IdParam }, { additionalProperties: false })
const Empty = Type.Object({}, { additionalProperties: false })


const MEDIA = ['audio', 'video']

/**
 * The engine and language a transcription request names (or the defaults): 422 naming `engine` or
 * `language` for what this server does not know, 503 naming what to install when the engine cannot run.
 */
export function chooseEngine(engines: Engines, defaults: { language: string }, input: { engine?: string; language?: string }): { engine: string; language: string } {
  const name = input.engine?.trim() || engines.defaultName
  const engine = engines.get(name)
  if (!engine) throw invalidParam('engine', `is not an engine of this server (${[...engines.all.keys()].join(', ')})`)
  if (engine.unavailable) throw new MamError('service_unavailable', `The ${engine.name} transcription engine is not available on this server: ${engine.unavailable}`, { engine: engine.name })
  const wanted = normalizeLanguage(input.language ?? defaults.language)
  if (!wanted) throw invalidParam('language', 'is not a language tag (en, en-us …)')
  const language = pickLanguage(engine, wanted)
  if (!language) throw invalidParam('language', `has no ${engine.name} model on this server (${engine.languages.join(', ') || 'none'})`)
  return { engine: engine.name, language }
}

function mustBeMedia(asset: Asset) {
  if (!MEDIA.includes(asset.type))
    throw conflict(`Asset ${asset.id} is ${asset.type === 'other' ? 'not a media file' : `an ${asset.type}`}${asset.analysisState === 'pending' ? ' (its analysis is still pending)' : ''}; only audio and video are transcribed`)
}

/** §4.8 transcriptions and sentences, §4.6 transcribe and the transcripts download, §4.20 project transcribe */
export function registerTranscriptionRoutes(api: RegisterApi<{ language: string }>) {
  const { routes } = api
  const service = api.use(transcriptionServices.service)
  const engines = api.use(transcriptionServices.engines)
  const assets = api.use(assetServices.service)
  const downloads = api.use(assetServices.downloads)
  const projects = api.use(projectServices.service)
  const jobs = api.use(coreServices.jobs)
  const config = api.use(coreServices.config)

  routes.put(
    '/assets/:id/transcribe',
    { access: 'authenticated', params: IdParams, input: TranscribeInput, summary: 'transcribe the asset (optional language, engine): 202 with the job; the transcript appears under /assets/:id/transcriptions' },
    async (ctx) => {
      const asset = await assets().writable(ctx.em, ctx.user, ctx.params.id)
      mustBeMedia(asset)
      const { engine, language } = chooseEngine(engines(), api.settings(), ctx.input)
      const { job } = await service().queue(ctx.user.userId, asset, engine, language)
      return acceptedJob(ctx, job)
    },
  )

  routes.post(
    '/projects/:id/transcribe',
    { access: 'authenticated', params: IdParams, input: TranscribeInput, summary: 'transcribe every audio and video asset of the project that has no transcript (optional language, engine): 202 with the job' },
    async (ctx) => {
      const project = await projects().writable(ctx.em, ctx.user, ctx.params.id)
      const { engine, language } = chooseEngine(engines(), api.settings(), ctx.input)
      const job = await jobs().enqueue(TranscribeProject.type, { projectId: project.id, userId: ctx.user.userId, engine, language }, { userId: ctx.user.userId, projectId: project.id, priority: project.encodingPriority })
      return acceptedJob(ctx, job)
    },
  )

  routes.get('/assets/:asset_id/transcriptions', { access: 'authenticated', params: AssetParams, summary: 'the transcripts of an asset' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
    const s = service()
    const rows = await s.list(asset.id)
    const summaries = await s.summaries(rows.map((r) => r.id))
    return { transcriptions: rows.map((r) => s.serialize(r, summaries.get(r.id))) }
  })

  const oneTranscription = async (id: number) => {
    const s = service()
    const row = await s.byId(id)
    return { transcription: s.serialize(row, (await s.summaries([row.id])).get(row.id)) }
  }

  routes.get('/assets/:asset_id/transcriptions/:id', { access: 'authenticated', params: TranscriptionParams, summary: 'one transcript: state, engine, language, speakers, sentence count' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
    const row = await service().get(asset.id, ctx.params.id)
    return oneTranscription(row.id)
  })

  routes.put(
    '/assets/:asset_id/transcriptions/:id',
    { access: 'authenticated', params: TranscriptionParams, input: RenameInput, wrap: 'transcription', summary: 'rename a speaker: every sentence of `speaker` gets `new_speaker`' },
    async (ctx) => {
      const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
      const s = service()
      const row = await s.get(asset.id, ctx.params.id)
      const fields = ctx.input.transcription ?? {}
      const param = (f: string) => `transcription[${f}]`
      if (fields.speaker === undefined) throw invalidParam(param('speaker'), 'is required')
      if (fields.new_speaker === undefined) throw invalidParam(param('new_speaker'), 'is required')
      await s.renameSpeaker(row, fields.speaker, fields.new_speaker, param)
      return oneTranscription(row.id)
    },
  )

  routes.delete('/assets/:asset_id/transcriptions/:id', { access: 'authenticated', params: TranscriptionParams, summary: 'delete a transcript and its sentences (a run still going is cancelled)' }, async (ctx) => {
    const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
    const s = service()
    const row = await s.get(asset.id, ctx.params.id)
    const body = await oneTranscription(row.id)
    await s.remove(row)
    return body
  })

  /** the transcript of a sentence route, checked to belong to the asset */
  const transcriptOf = (assetId: number, id: number) => service().get(assetId, id)

  routes.get(
    '/assets/:asset_id/transcriptions/:transcription_id/sentences',
    { access: 'authenticated', params: SentencesParams, input: SentenceList, summary: 'sentences of a transcript in time order, with their words (keyset paging: X-Next-After)' },
    async (ctx) => {
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
      const t = await transcriptOf(asset.id, ctx.params.transcription_id)
      let after: [number, number] | undefined
      if (ctx.input.after !== undefined && !(after = integerPairCursor.decode(ctx.input.after))) throw invalidParam('after', 'is not a cursor this list gave out (X-Next-After)')
      const limit = ctx.input.per_page ?? 1000
      const s = service()
      const rows = await s.sentences(t.id, { afterStart: after?.[0], afterId: after?.[1], limit })
      if (rows.length === limit) ctx.set('X-Next-After', integerPairCursor.encode(rows[rows.length - 1].start_ms, rows[rows.length - 1].id))
      return { sentences: rows.map((r) => s.serializeSentence(r)) }
    },
  )

  routes.get('/assets/:asset_id/transcriptions/:transcription_id/sentences/:id', { access: 'authenticated', params: SentenceParams, summary: 'one sentence with its words' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.asset_id)
    const t = await transcriptOf(asset.id, ctx.params.transcription_id)
    const s = service()
    return { sentence: s.serializeSentence(await s.sentence(t.id, ctx.params.id)) }
  })

  routes.put(
    '/assets/:asset_id/transcriptions/:transcription_id/sentences/:id',
    {
      access: 'authenticated',
      params: SentenceParams,
      input: SentenceInput,
      wrap: 'sentence',
      summary: 'change a sentence: text (word timings kept where words stayed), start/end in seconds (words moved along), speaker',
    },
    async (ctx) => {
      const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
      const t = await transcriptOf(asset.id, ctx.params.transcription_id)
      const s = service()
      const row = await s.updateSentence(t, ctx.params.id, ctx.input.sentence ?? {}, (f) => `sentence[${f}]`)
      return { sentence: s.serializeSentence(row) }
    },
  )

  routes.delete('/assets/:asset_id/transcriptions/:transcription_id/sentences/:id', { access: 'authenticated', params: SentenceParams, summary: 'delete a sentence' }, async (ctx) => {
    const asset = await assets().writable(ctx.em, ctx.user, ctx.params.asset_id)
    const t = await transcriptOf(asset.id, ctx.params.transcription_id)
    const s = service()
    const row = await s.sentence(t.id, ctx.params.id)
    await s.removeSentence(t, row.id)
    return { sentence: s.serializeSentence(row) }
  })

  routes.put(
    '/assets/:id/prepare_download_transcripts',
    { access: 'authenticated', params: IdParams, input: Empty, summary: 'package the SRT and WebVTT files of every finished transcript; answers the state (download with its id once finished)' },
    async (ctx) => {
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
      if (!(await service().list(asset.id)).some((t) => t.state === 'ready')) throw conflict(`Asset ${asset.id} has no finished transcript to download; transcribe it first (PUT /assets/${asset.id}/transcribe)`)
      return accepted(ctx, await downloads().prepare(ctx.em, ctx.user, asset, 'transcripts', PackageTranscripts.type))
    },
  )

  routes.get(
    '/assets/:id/download_transcripts',
    { access: 'authenticated', params: IdParams, input: StateInput, summary: 'the zip of SRT and WebVTT transcripts (state_id from prepare_download_transcripts), with HTTP Range' },
    async (ctx) => {
      const { asset } = await assets().readable(ctx.em, ctx.user, ctx.params.id)
      const d = downloads()
      const state = await d.finished(ctx.em, ctx.user, asset, 'transcripts', ctx.input.state_id)
      const files = await packageFiles(packageDir(config().dataDir, state.id)).catch(() => {
        throw new MamError('gone', `The files of download ${state.id} were removed; prepare it again`, { errors: [{ param: 'state_id', message: 'has expired' }] })
      })
      const base = asset.name.replace(/\.[^.]*$/, '').replace(/[^\p{L}\p{N}._-]+/gu, '_').slice(0, 100) || `asset_${asset.id}`
      await d.sendZip(ctx, files, `${base}_transcripts.zip`)
    },
  )
}
