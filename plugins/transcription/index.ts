import { availableParallelism } from 'node:os'
import { Type } from 'typebox'
import { transcriptionServices } from './refs.js'
import { searchServices } from '../search/refs.js'
import { TranscriptionSchema, TranscriptionSentenceSchema } from './entities.js'
import { migrations } from './migrations.js'
import { TranscriptionService } from './service.js'
import { Engines, PocketsphinxEngine, SherpaOnnxEngine, WhisperCppEngine } from './engine.js'
import { registerTranscriptionRoutes } from './routes.js'
import { defineTranscriptionJobs } from './jobs.js'

export { Transcription, TranscriptionSentence } from './entities.js'
export { transcriptionServices } from './refs.js'
export type { TranscriptionService } from './service.js'
export type { TranscriptionEngine, Word } from './engine.js'

import { coreServices, definePlugin, toolVersions } from '../../core/index.js'
const Settings = Type.Object(
  {
    /** the engine used when a request names none */
    engine: Type.String({ default: 'pocketsphinx', enum: ['pocketsphinx', 'whisper', 'sherpa-onnx'] }),
    /** the language used when a request names none */
    language: Type.String({ default: 'en-us', maxLength: 35 }),
    pocketsphinx: Type.Object(
      {
        binary: Type.String({ default: 'pocketsphinx_continuous' }),
        /** a model folder as Debian's pocketsphinx-en-us installs it: <dir>/<lang>/, <lang>.lm.bin, cmudict-<lang>.dict */
        modelDir: Type.String({ default: '/usr/share/pocketsphinx/model/en-us' }),
      },
      { default: {} },
    ),
    whisper: Type.Object({ binary: Type.String({ default: 'whisper-cli' }), model: Type.String({ default: '' }) }, { default: {} }),
    sherpaOnnx: Type.Object({ binary: Type.String({ default: '' }), model: Type.String({ default: '' }) }, { default: {} }),
    /** long audio is cut at silences into chunks of about this many seconds */
    chunkSeconds: Type.Number({ default: 60, minimum: 5, maximum: 3600 }),
    /** engine processes at once within one transcription job; 0: one per core */
    parallelChunks: Type.Integer({ default: 0, minimum: 0, maximum: 64 }),
    /** transcription jobs at once per process */
    concurrency: Type.Integer({ default: 1, minimum: 1, maximum: 16 }),
    /** a pause of at least this many milliseconds ends a sentence */
    pauseMs: Type.Integer({ default: 600, minimum: 100, maximum: 10_000 }),
  },
  { default: {} },
)

/** Offline speech-to-text of audio and video assets (§4.8): transcripts, sentences, speakers, SRT/WebVTT downloads. */
export const transcriptionPlugin = definePlugin({
  name: 'transcription',
  title: 'Transcription',
  version: '1.0.0',
  description: 'Offline speech-to-text of audio and video assets (pocketsphinx), editable sentences with word timings and speakers, SRT and WebVTT downloads',
  dependsOn: ['assets', 'projects'],
  // transcripts are indexed for GET /search when the search plugin is loaded; without it nothing changes
  optionalDependsOn: ['search'],
  entities: [TranscriptionSchema, TranscriptionSentenceSchema],
  migrations,
  settings: Settings,
  register(api) {
    const s = api.settings()
    const engines = new Engines([new PocketsphinxEngine(s.pocketsphinx), new WhisperCppEngine(s.whisper), new SherpaOnnxEngine(s.sherpaOnnx)], s.engine)
    // GET /version names the engines found (and why the others cannot run)
    for (const [name, version] of Object.entries(engines.describe())) toolVersions.set(`transcription:${name}`, version)
    api.provide(transcriptionServices.engines, () => engines)
    api.provide(transcriptionServices.service, (r) => {
      const searchLoaded = r(coreServices.features).list().some((f) => f.plugin.name === 'search')
      return new TranscriptionService(r(coreServices.knex), r(coreServices.jobs), searchLoaded ? r(searchServices.service) : null)
    })
    registerTranscriptionRoutes(api)
    defineTranscriptionJobs(api, () => {
      const now = api.settings()
      return {
        chunkSeconds: now.chunkSeconds,
        parallelChunks: now.parallelChunks || availableParallelism(),
        concurrency: now.concurrency,
        grouping: { pauseMs: now.pauseMs, maxMs: 10_000, maxWords: 25 },
      }
    })
  },
})
