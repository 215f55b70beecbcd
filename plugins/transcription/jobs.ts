import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import path from 'node:path'
import { Type } from 'typebox'
import { Asset, assetServices, withOriginal } from '../assets/index.js'
import { transcriptionServices } from './refs.js'
import { extractPcm, frameLevels, inParallel, planChunks, writeWavSlice } from './audio.js'
import { groupSentences, toSrt, toVtt, type GroupingRules, type PlainSentence } from './sentences.js'
import type { Word } from './engine.js'
import { TRANSCRIBE_JOB } from './service.js'

import { IdParam, coreServices, defineJob, permanentError, type JobContext, type RegisterApi } from '../../core/index.js'
export const Transcribe = defineJob(TRANSCRIBE_JOB, Type.Object({ transcriptionId: IdParam }))
export const TranscribeProject = defineJob('transcription.project', Type.Object({ projectId: IdParam, userId: Type.Union([IdParam, Type.Null()]), engine: Type.String(), language: Type.String() }))
export const PackageTranscripts = defineJob('transcription.package', Type.Object({ stateId: IdParam }))
export const ExpirePackages = defineJob('transcription.expire-packages', Type.Object({ stateId: IdParam }))

export interface JobSettings {
  chunkSeconds: number
  /** engine processes at once per transcription job */
  parallelChunks: number
  /** transcription jobs at once per process */
  concurrency: number
  grouping: GroupingRules
}

/** a private scratch folder per run, removed whatever happens */
async function withWorkDir<T>(ctx: JobContext, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = path.join(ctx.resolve(coreServices.config).dataDir, 'tmp', `transcription-${ctx.id}-${ctx.attempt}`)
  await rm(dir, { recursive: true, force: true })
  await mkdir(dir, { recursive: true })
  try {
    return await work(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** where the prepared SRT/WebVTT files of a download live until it expires */
export const packageDir = (dataDir: string, stateId: number) => path.join(dataDir, 'transcripts', String(stateId))

/**
 * Runs an engine over an asset's audio: ffmpeg extracts 16 kHz mono PCM from the original, long
 * audio is cut at silences into chunks that run `parallelChunks` at a time, the chunks' words are
 * shifted to asset time and grouped into sentences, and the sentences replace those of any earlier
 * attempt in one transaction (a repeated run writes the same transcript once).
 */
export async function transcribeAudio(
  source: string,
  ffmpeg: string,
  engine: { transcribe(file: string, o: { language: string; signal?: AbortSignal }): Promise<Word[]> },
  language: string,
  dir: string,
  settings: Pick<JobSettings, 'chunkSeconds' | 'parallelChunks'>,
  signal?: AbortSignal,
  progress?: (fraction: number) => void,
): Promise<{ words: Word[]; duration: number; chunks: number }> {
  const pcm = path.join(dir, 'audio.pcm')
  const duration = await extractPcm(ffmpeg, source, pcm, signal)
  const chunks = planChunks(await frameLevels(pcm), duration, settings.chunkSeconds)
  let done = 0
  const results = await inParallel(
    chunks,
    settings.parallelChunks,
    async (chunk, i) => {
      const wav = path.join(dir, `chunk-${i}.wav`)
      await writeWavSlice(pcm, wav, chunk)
      const words = await engine.transcribe(wav, { language, signal })
      await rm(wav, { force: true })
      progress?.(++done / chunks.length)
      return words.map((w) => ({ ...w, start: Math.min(chunk.end, w.start + chunk.start), end: Math.min(chunk.end, w.end + chunk.start) }))
    },
    signal,
  )
  return { words: results.flat(), duration, chunks: chunks.length }
}

export function defineTranscriptionJobs(api: RegisterApi, settings: () => JobSettings) {
  api.jobs.define(Transcribe, {
    kind: 'asset',
    maxAttempts: 2,
    concurrency: settings().concurrency,
    async handler(ctx) {
      const service = ctx.resolve(transcriptionServices.service)
      const row = await service.find(ctx.payload.transcriptionId)
      if (!row || row.state === 'ready' || row.state === 'failed') return { skipped: true }
      const fail = async (message: string) => {
        await service.setState(row.id, { state: 'failed', error: message })
        ctx.count(0, 1)
      }
      const asset = await ctx.em.findOne(Asset, row.asset_id, { populate: ['project'] })
      if (!asset || asset.project.deleted || !asset.online) {
        await fail(`asset ${row.asset_id} is gone or offline`)
        return { skipped: true }
      }
      const engine = ctx.resolve(transcriptionServices.engines).get(row.engine)
      try {
        if (!engine || engine.unavailable) throw permanentError(`the ${row.engine} engine is not available: ${engine?.unavailable ?? 'unknown engine'}`)
        await service.setState(row.id, { state: 'processing' })
        const ffmpeg = await ctx.resolve(coreServices.mediaTools).require('ffmpeg')
        const s = settings()
        const result = await withWorkDir(ctx, (dir) =>
          withOriginal(ctx, asset, async (original) => {
            try {
              return await transcribeAudio(await original.toolPath(), ffmpeg, engine, row.language, dir, s, ctx.signal, (f) => ctx.progress(f))
            } catch (err) {
              // no audio stream is not worth a second attempt
              if (/matches no streams|does not contain any stream|Output file.*does not contain/i.test((err as Error).message)) throw permanentError(`asset ${asset.id} (${asset.path}) has no audio`)
              throw err
            }
          }),
        )
        const sentences: PlainSentence[] = groupSentences(result.words, s.grouping)
        const stored = await service.complete(row.id, sentences, { durationMs: Math.round(result.duration * 1000), chunks: result.chunks })
        ctx.count(1, 0)
        return { transcription_id: row.id, stored, words: result.words.length, sentences: sentences.length, duration: result.duration, chunks: result.chunks }
      } catch (err) {
        const last = (err as { permanent?: boolean }).permanent || ctx.attempt >= 2 || ctx.signal.aborted
        if (last) await fail(ctx.signal.aborted ? 'cancelled' : (err as Error).message)
        else await service.setState(row.id, { state: 'queued', error: (err as Error).message })
        throw err
      }
    },
  })

  // every audio and video asset of a project without a live transcript gets one run, page by page
  api.jobs.define(TranscribeProject, {
    kind: 'project',
    concurrency: 1,
    async handler(ctx) {
      const service = ctx.resolve(transcriptionServices.service)
      const { projectId, userId, engine, language } = ctx.payload
      let queued = 0
      let running = 0
      for (let lastId = 0; ; ) {
        const ids = await service.untranscribed(projectId, lastId, 200)
        if (!ids.length) break
        const assets = await ctx.em.find(Asset, { id: { $in: ids } }, { populate: ['project'], orderBy: { id: 'asc' } })
        for (const asset of assets) {
          ctx.signal.throwIfAborted()
          try {
            await service.queue(userId, asset, engine, language)
            queued++
          } catch (err) {
            // a run another request queued meanwhile
            if ((err as { code?: string }).code !== 'conflict') throw err
            running++
          }
        }
        lastId = ids[ids.length - 1]
        ctx.em.clear()
      }
      ctx.count(queued, 0)
      return { queued, already_running: running }
    },
  })

  // SRT and WebVTT files of every finished transcript of an asset, for download_transcripts
  api.jobs.define(PackageTranscripts, {
    kind: 'asset',
    maxAttempts: 3,
    async handler(ctx) {
      const downloads = ctx.resolve(assetServices.downloads)
      const service = ctx.resolve(transcriptionServices.service)
      const state = await downloads.load(ctx.em, ctx.payload.stateId)
      if (!state) return { skipped: true }
      const asset = state.asset
      const ready = (await service.list(asset.id)).filter((t) => t.state === 'ready')
      if (!ready.length) throw permanentError(`asset ${asset.id} has no finished transcript`)
      const dataDir = ctx.resolve(coreServices.config).dataDir
      const target = packageDir(dataDir, state.id)
      const scratch = `${target}.tmp-${ctx.attempt}`
      await rm(scratch, { recursive: true, force: true })
      await mkdir(scratch, { recursive: true })
      const base = asset.name.replace(/\.[^.]*$/, '').replace(/[^\p{L}\p{N}._-]+/gu, '_').slice(0, 100) || `asset_${asset.id}`
      try {
        for (const t of ready) {
          const sentences = (await service.allSentences(t.id)).map((s) => ({ start: s.start_ms, end: s.end_ms, text: s.text, speaker: s.speaker, words: s.words }))
          const name = `${base}.${t.id}.${t.language}`
          await writeFile(path.join(scratch, `${name}.srt`), toSrt(sentences))
          await writeFile(path.join(scratch, `${name}.vtt`), toVtt(sentences, asset.name))
        }
        await rm(target, { recursive: true, force: true })
        await rename(scratch, target)
      } catch (err) {
        await rm(scratch, { recursive: true, force: true })
        throw err
      }
      const files = await packageFiles(target)
      await downloads.finish(ctx.em, state, downloads.zipSize(files))
      // no periodic sweep: each package schedules its own removal for when it expires
      await ctx.resolve(coreServices.jobs).enqueue(ExpirePackages.type, { stateId: state.id }, { runAt: new Date(state.expiresAt!.getTime() + 1000) })
      ctx.count(1, 0)
      return { files: files.map((f) => f.name) }
    },
  })

  // the files of a prepared download go when it expires (or its state went away meanwhile)
  api.jobs.define(ExpirePackages, {
    kind: 'generic',
    async handler(ctx) {
      const state = await ctx.resolve(assetServices.downloads).load(ctx.em, ctx.payload.stateId)
      if (state?.expiresAt && state.expiresAt.getTime() > Date.now()) {
        await ctx.resolve(coreServices.jobs).enqueue(ExpirePackages.type, { stateId: state.id }, { runAt: new Date(state.expiresAt.getTime() + 1000) })
        return { kept: true }
      }
      await rm(packageDir(ctx.resolve(coreServices.config).dataDir, ctx.payload.stateId), { recursive: true, force: true })
      return { removed: true }
    },
  })
}

/** the prepared files of a download as zip entries (sizes and CRC-32s read from disk), by name */
export async function packageFiles(dir: string) {
  const names = (await readdir(dir)).sort()
  const out = []
  for (const name of names) {
    const file = path.join(dir, name)
    const [data, info] = await Promise.all([readFile(file), stat(file)])
    out.push({ name, file, size: data.length, crc32: crc32(data) >>> 0, mtime: new Date(Math.floor(info.mtimeMs)) })
  }
  return out
}
