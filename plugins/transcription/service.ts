import type { Asset } from '../assets/index.js'
import type { SearchService } from '../search/index.js'
import { retext, retime, type PlainSentence, type StoredWord } from './sentences.js'

import { column, conflict, invalid, invalidParam, iso, notFound, type JobRow, type JobService, type Knex, type ParamError } from '../../core/index.js'
export const TRANSCRIBE_JOB = 'transcription.transcribe'
/** transcriptions of one asset that count as "has a transcript" for POST /projects/:id/transcribe */
export const LIVE_STATES = ['queued', 'processing', 'ready']
const MAX_SENTENCE_TEXT = 5000
const MAX_SPEAKER = 100
/** an open transcription whose job never got its id after this long was cut short before its job was queued */
const ORPHAN_MS = 60_000

export interface TranscriptionRow {
  id: number
  asset_id: number
  engine: string
  language: string
  state: string
  error: string | null
  job_id: number | null
  open_asset_id: number | null
  duration_ms: number | null
  chunks: number | null
  revision: number
  created_by_id: number | null
  created_at: unknown
  updated_at: unknown
}

export interface SentenceRow {
  id: number
  transcription_id: number
  start_ms: number
  end_ms: number
  text: string
  speaker: string
  words: StoredWord[]
  created_at: unknown
  updated_at: unknown
}

export interface SentenceInput {
  text?: string
  start?: number
  end?: number
  speaker?: string
}

const normalizeTranscription = (r: any): TranscriptionRow => ({
  ...r,
  id: Number(r.id),
  asset_id: Number(r.asset_id),
  job_id: column.intOrNull(r.job_id),
  open_asset_id: column.intOrNull(r.open_asset_id),
  duration_ms: column.intOrNull(r.duration_ms),
  chunks: column.intOrNull(r.chunks),
  revision: Number(r.revision),
  created_by_id: column.intOrNull(r.created_by_id),
})

const normalizeSentence = (r: any): SentenceRow => ({
  ...r,
  id: Number(r.id),
  transcription_id: Number(r.transcription_id),
  start_ms: Number(r.start_ms),
  end_ms: Number(r.end_ms),
  words: typeof r.words === 'string' ? JSON.parse(r.words) : r.words,
})

const seconds = (ms: number | null) => (ms === null ? null : ms / 1000)
const isUnique = (err: unknown) => /unique|duplicate/i.test(String((err as { code?: string; message?: string }).message ?? '')) || (err as { code?: string }).code === '23505'

/**
 * Transcripts of assets: queueing engine runs (one open run per asset), reading, and editing
 * sentences with their word timings kept consistent. Every sentence change is one transaction that
 * advances the transcript's `revision` only if nobody else did meanwhile, so concurrent edits are
 * applied one after the other (retried), never lost and never left overlapping.
 */
export class TranscriptionService {
  constructor(
    private readonly knex: Knex,
    private readonly jobs: JobService,
    /** the search plugin's service when it is loaded: finished transcripts are indexed with the change */
    private readonly search: SearchService | null = null,
  ) {}

  /**
   * Puts a transcript's sentences (with their times) into the search index in `trx`, or takes them out
   * when it is not ready or gone. Every write of sentences calls it in its own transaction, so the
   * index never tells of words a transcript no longer has.
   */
  private async indexed(trx: Knex, transcriptionId: number, assetId: number): Promise<void> {
    if (!this.search) return
    const t = await trx('transcriptions').where({ id: transcriptionId }).first('state')
    const sentences = t?.state === 'ready' ? await trx('transcription_sentences').where({ transcription_id: transcriptionId }).orderBy([{ column: 'start_ms' }, { column: 'id' }]).select('id', 'start_ms', 'text') : []
    await this.search.setAssetTexts(trx, assetId, 'transcript', transcriptionId, sentences.map((r: any) => ({ ref_id: Number(r.id), start_ms: Number(r.start_ms), text: r.text })))
  }

  // ----- transcriptions -----

  /**
   * Queues a transcription of `asset` at its project's encoding priority. 409 while one is queued or
   * running for the asset (the unique `open_asset_id` decides between racing requests).
   */
  async queue(userId: number | null, asset: Asset, engine: string, language: string): Promise<{ transcription: TranscriptionRow; job: JobRow }> {
    const insert = () =>
      this.knex('transcriptions')
        .insert({ asset_id: asset.id, engine, language, state: 'queued', open_asset_id: asset.id, revision: 0, created_by_id: userId, created_at: new Date(), updated_at: new Date() })
        .returning('id')
    let id: number
    try {
      id = Number(((await insert()) as Array<{ id: number } | number>).map((r) => (typeof r === 'object' ? r.id : r))[0])
    } catch (err) {
      if (!isUnique(err)) throw err
      if (!(await this.releaseOrphan(asset.id))) {
        const open = await this.knex('transcriptions').where({ open_asset_id: asset.id }).first('id', 'state', 'job_id')
        throw conflict(`Asset ${asset.id} is being transcribed already (transcription ${open?.id ?? '?'}, ${open?.state ?? 'queued'})`, { transcription_id: open ? Number(open.id) : null, job_id: column.intOrNull(open?.job_id) })
      }
      id = Number(((await insert()) as Array<{ id: number } | number>).map((r) => (typeof r === 'object' ? r.id : r))[0])
    }
    const job = await this.jobs.enqueue(TRANSCRIBE_JOB, { transcriptionId: id }, { userId, projectId: asset.project.id, assetId: asset.id, priority: asset.project.encodingPriority, maxAttempts: 2 })
    await this.knex('transcriptions').where({ id }).update({ job_id: job.id, updated_at: new Date() })
    return { transcription: await this.byId(id), job }
  }

  /** an open transcription whose job ended (cancelled while queued) or never got queued gives its slot up */
  private async releaseOrphan(assetId: number): Promise<boolean> {
    const open = await this.knex('transcriptions').where({ open_asset_id: assetId }).first('id', 'job_id', 'created_at')
    if (!open) return true // finished between the insert and this look
    const job = open.job_id === null ? null : await this.jobs.get(Number(open.job_id))
    const ended = job ? ['finished', 'failed', 'cancelled'].includes(job.state) : open.job_id !== null || (column.date(open.created_at)?.getTime() ?? 0) < Date.now() - ORPHAN_MS
    if (!ended) return false
    const reason = job?.state === 'cancelled' ? 'cancelled' : job ? (job.error ?? `job ${job.state}`) : 'its job was never queued'
    await this.knex('transcriptions').where({ id: open.id, open_asset_id: assetId }).update({ open_asset_id: null, state: 'failed', error: reason, updated_at: new Date() })
    return true
  }

  async byId(id: number): Promise<TranscriptionRow> {
    const row = await this.knex('transcriptions').where({ id }).first()
    if (!row) throw notFound('transcription', id)
    return normalizeTranscription(row)
  }

  async find(id: number): Promise<TranscriptionRow | null> {
    const row = await this.knex('transcriptions').where({ id }).first()
    return row ? normalizeTranscription(row) : null
  }

  async get(assetId: number, id: number): Promise<TranscriptionRow> {
    const row = await this.knex('transcriptions').where({ id, asset_id: assetId }).first()
    if (!row) throw notFound('transcription', id)
    return normalizeTranscription(row)
  }

  async list(assetId: number): Promise<TranscriptionRow[]> {
    return (await this.knex('transcriptions').where({ asset_id: assetId }).orderBy('id')).map(normalizeTranscription)
  }

  /** per transcription: sentence count and speakers in order of first appearance */
  async summaries(ids: number[]): Promise<Map<number, { sentences: number; speakers: string[] }>> {
    const out = new Map<number, { sentences: number; speakers: string[] }>(ids.map((id) => [id, { sentences: 0, speakers: [] }]))
    if (!ids.length) return out
    const rows = await this.knex('transcription_sentences').whereIn('transcription_id', ids).groupBy('transcription_id', 'speaker').select('transcription_id', 'speaker').count({ n: '*' }).min({ first: 'start_ms' })
    const sorted = rows.map((r: any) => ({ id: Number(r.transcription_id), speaker: String(r.speaker), n: Number(r.n), first: Number(r.first) })).sort((a, b) => a.first - b.first)
    for (const r of sorted) {
      const s = out.get(r.id)!
      s.sentences += r.n
      s.speakers.push(r.speaker)
    }
    return out
  }

  serialize(row: TranscriptionRow, summary?: { sentences: number; speakers: string[] }) {
    return {
      id: row.id,
      asset_id: row.asset_id,
      engine: row.engine,
      language: row.language,
      state: row.state,
      error: row.error,
      job_id: row.job_id,
      duration: seconds(row.duration_ms),
      chunks: row.chunks,
      revision: row.revision,
      sentence_count: summary?.sentences ?? 0,
      speakers: summary?.speakers ?? [],
      created_by: row.created_by_id,
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }

  /** deletes a transcript and its sentences; a run still queued or going is cancelled */
  async remove(row: TranscriptionRow): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await trx('transcriptions').where({ id: row.id }).delete()
      await this.indexed(trx, row.id, row.asset_id)
    })
    if (row.job_id !== null && row.open_asset_id !== null) await this.jobs.cancel(row.job_id).catch(() => null)
  }

  /** stores an engine run's sentences, replacing those of an earlier attempt; false when the transcript was deleted meanwhile */
  async complete(id: number, sentences: PlainSentence[], info: { durationMs: number; chunks: number }): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const updated = await trx('transcriptions')
        .where({ id })
        .update({ state: 'ready', error: null, open_asset_id: null, duration_ms: info.durationMs, chunks: info.chunks, revision: trx.raw('revision + 1'), updated_at: new Date() })
      if (!updated) return false
      await trx('transcription_sentences').where({ transcription_id: id }).delete()
      const now = new Date()
      const rows = sentences.map((s) => ({ transcription_id: id, start_ms: s.start, end_ms: s.end, text: s.text, speaker: s.speaker, words: JSON.stringify(s.words), created_at: now, updated_at: now }))
      for (let i = 0; i < rows.length; i += 200) await trx('transcription_sentences').insert(rows.slice(i, i + 200))
      const { asset_id } = await trx('transcriptions').where({ id }).first('asset_id')
      await this.indexed(trx, id, Number(asset_id))
      return true
    })
  }

  async setState(id: number, fields: { state: 'processing' | 'failed' | 'queued'; error?: string | null }): Promise<void> {
    const patch: Record<string, unknown> = { state: fields.state, error: fields.error ?? null, updated_at: new Date() }
    if (fields.state === 'failed') patch.open_asset_id = null
    await this.knex('transcriptions').where({ id }).update(patch)
  }

  /** renames one speaker in every sentence of a transcript; 422 naming `speaker` when no sentence has it */
  async renameSpeaker(row: TranscriptionRow, speaker: string, newSpeaker: string, param: (f: string) => string): Promise<number> {
    const errors: ParamError[] = []
    const name = newSpeaker.trim().replace(/\s+/g, ' ')
    if (!name) errors.push({ param: param('new_speaker'), message: 'must not be blank' })
    else if (name.length > MAX_SPEAKER) errors.push({ param: param('new_speaker'), message: `is longer than ${MAX_SPEAKER} characters` })
    if (errors.length) throw invalid(errors)
    return this.knex.transaction(async (trx) => {
      const changed = await trx('transcription_sentences').where({ transcription_id: row.id, speaker }).update({ speaker: name, updated_at: new Date() })
      if (!changed) throw invalidParam(param('speaker'), `is not a speaker of transcription ${row.id}`)
      await trx('transcriptions').where({ id: row.id }).update({ revision: trx.raw('revision + 1'), updated_at: new Date() })
      return changed
    })
  }

  // ----- sentences -----

  async sentences(transcriptionId: number, options: { afterStart?: number; afterId?: number; limit: number }): Promise<SentenceRow[]> {
    const q = this.knex('transcription_sentences').where({ transcription_id: transcriptionId })
    if (options.afterStart !== undefined && options.afterId !== undefined)
      q.andWhere((w) => w.where('start_ms', '>', options.afterStart!).orWhere((x) => x.where('start_ms', options.afterStart!).andWhere('id', '>', options.afterId!)))
    return (await q.orderBy([{ column: 'start_ms' }, { column: 'id' }]).limit(options.limit)).map(normalizeSentence)
  }

  /** every sentence of a transcript in time order (subtitles, search text) */
  async allSentences(transcriptionId: number): Promise<SentenceRow[]> {
    const out: SentenceRow[] = []
    for (;;) {
      const last = out[out.length - 1]
      const page = await this.sentences(transcriptionId, { afterStart: last?.start_ms, afterId: last?.id, limit: 2000 })
      out.push(...page)
      if (page.length < 2000) return out
    }
  }

  async sentence(transcriptionId: number, id: number): Promise<SentenceRow> {
    const row = await this.knex('transcription_sentences').where({ id, transcription_id: transcriptionId }).first()
    if (!row) throw notFound('sentence', id)
    return normalizeSentence(row)
  }

  serializeSentence(row: SentenceRow) {
    return {
      id: row.id,
      transcription_id: row.transcription_id,
      text: row.text,
      start: row.start_ms / 1000,
      end: row.end_ms / 1000,
      speaker: row.speaker,
      words: row.words.map((w) => ({ word: w.word, start: w.start / 1000, end: w.end / 1000, confidence: w.confidence })),
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }

  /**
   * Changes a sentence's text, times or speaker. New text keeps the timings of the words that stayed
   * (retext); new times move and stretch its words (retime). Times must stay inside the audio and
   * not overlap the neighbouring sentences. Applied under the transcript's revision: a concurrent
   * edit makes this one re-read and re-apply (a few times), so neither is lost.
   */
  async updateSentence(transcription: TranscriptionRow, id: number, input: SentenceInput, param: (f: string) => string): Promise<SentenceRow> {
    for (let attempt = 0; ; attempt++) {
      const t = await this.byId(transcription.id)
      const row = await this.sentence(t.id, id)
      const errors: ParamError[] = []
      const ms = (field: 'start' | 'end') => {
        const v = input[field]
        if (v === undefined) return undefined
        if (!Number.isFinite(v) || v < 0) {
          errors.push({ param: param(field), message: 'must be a number of seconds, 0 or more' })
          return undefined
        }
        const n = Math.round(v * 1000)
        if (t.duration_ms !== null && n > t.duration_ms) errors.push({ param: param(field), message: `is beyond the end of the audio (${t.duration_ms / 1000} s)` })
        return n
      }
      const start = ms('start') ?? row.start_ms
      const end = ms('end') ?? row.end_ms
      if ((input.start !== undefined || input.end !== undefined) && !errors.length) {
        if (end < start) errors.push({ param: param(input.end !== undefined ? 'end' : 'start'), message: `makes the sentence end (${end / 1000} s) before it starts (${start / 1000} s)` })
        else {
          const [before] = await this.knex('transcription_sentences').where({ transcription_id: t.id }).whereNot({ id }).where('start_ms', '<=', row.start_ms).orderBy([{ column: 'start_ms', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(1)
          const [after] = await this.knex('transcription_sentences').where({ transcription_id: t.id }).whereNot({ id }).where('start_ms', '>=', row.start_ms).orderBy([{ column: 'start_ms' }, { column: 'id' }]).limit(1)
          if (before && start < Number(before.end_ms)) errors.push({ param: param('start'), message: `overlaps the previous sentence ${before.id}, which ends at ${Number(before.end_ms) / 1000} s` })
          if (after && end > Number(after.start_ms)) errors.push({ param: param('end'), message: `overlaps the next sentence ${after.id}, which starts at ${Number(after.start_ms) / 1000} s` })
        }
      }
      let text: string | undefined
      if (input.text !== undefined) {
        text = input.text.trim().replace(/\s+/g, ' ')
        if (!text) errors.push({ param: param('text'), message: 'must not be blank; delete the sentence instead' })
        else if (text.length > MAX_SENTENCE_TEXT) errors.push({ param: param('text'), message: `is longer than ${MAX_SENTENCE_TEXT} characters` })
        else if (text.includes('\u0000')) errors.push({ param: param('text'), message: 'must not contain NUL characters' })
      }
      let speaker: string | undefined
      if (input.speaker !== undefined) {
        speaker = input.speaker.trim().replace(/\s+/g, ' ')
        if (!speaker) errors.push({ param: param('speaker'), message: 'must not be blank' })
        else if (speaker.length > MAX_SPEAKER) errors.push({ param: param('speaker'), message: `is longer than ${MAX_SPEAKER} characters` })
      }
      if (errors.length) throw invalid(errors)

      let words = row.words
      let span = { start: row.start_ms, end: row.end_ms }
      if (text !== undefined) words = retext({ ...span, words }, text)
      if (start !== row.start_ms || end !== row.end_ms) {
        words = retime({ ...span, words }, start, end)
        span = { start, end }
      }
      const patch = { text: words.map((w) => w.word).join(' '), start_ms: span.start, end_ms: span.end, words: JSON.stringify(words), speaker: speaker ?? row.speaker, updated_at: new Date() }
      const applied = await this.knex.transaction(async (trx) => {
        const bumped = await trx('transcriptions').where({ id: t.id, revision: t.revision }).update({ revision: t.revision + 1, updated_at: new Date() })
        if (!bumped) return false
        if ((await trx('transcription_sentences').where({ id, transcription_id: t.id }).update(patch)) !== 1) return false
        await this.indexed(trx, t.id, t.asset_id)
        return true
      })
      if (applied) return this.sentence(t.id, id)
      if (attempt >= 20) throw conflict(`Transcription ${t.id} is being edited by others; try again`)
      await this.byId(t.id) // 404 when the transcript went away meanwhile
    }
  }

  async removeSentence(transcription: TranscriptionRow, id: number): Promise<void> {
    await this.sentence(transcription.id, id)
    await this.knex.transaction(async (trx) => {
      await trx('transcription_sentences').where({ id, transcription_id: transcription.id }).delete()
      await trx('transcriptions').where({ id: transcription.id }).update({ revision: trx.raw('revision + 1'), updated_at: new Date() })
      await this.indexed(trx, transcription.id, transcription.asset_id)
    })
  }

  // ----- for other plugins (search) -----

  /** the text of a transcript, sentence by sentence in time order */
  async textOf(transcriptionId: number): Promise<string> {
    return (await this.allSentences(transcriptionId)).map((s) => s.text).join('\n')
  }

  /** what a search index should hold for an asset: the text of its finished transcripts */
  async searchText(assetId: number): Promise<Array<{ transcription_id: number; language: string; text: string }>> {
    const ready = (await this.list(assetId)).filter((t) => t.state === 'ready')
    const out = []
    for (const t of ready) out.push({ transcription_id: t.id, language: t.language, text: await this.textOf(t.id) })
    return out
  }

  /** ids of audio/video assets of a project with no live transcript, after `afterId`, in id order */
  async untranscribed(projectId: number, afterId: number, limit: number): Promise<number[]> {
    const rows = await this.knex('assets as a')
      .where({ 'a.project_id': projectId, 'a.online': true })
      .whereIn('a.type', ['audio', 'video'])
      .where('a.id', '>', afterId)
      .whereNotExists((q) => q.select(this.knex.raw('1')).from('transcriptions as t').whereRaw('t.asset_id = a.id').whereIn('t.state', LIVE_STATES))
      .orderBy('a.id')
      .limit(limit)
      .select('a.id')
    return rows.map((r: any) => Number(r.id))
  }
}
