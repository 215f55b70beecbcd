import { EntitySchema, type Opt } from '@mikro-orm/core'
import { Asset } from '../assets/index.js'

import { BaseEntity, User, baseProperties } from '../../core/index.js'
export type TranscriptionState = 'queued' | 'processing' | 'ready' | 'failed'

/**
 * A transcript of an asset's audio by one engine run. `openAssetId` holds the asset's id while the
 * transcript is queued or being made and is null otherwise: its unique index lets one transcription
 * run per asset at a time, whatever requests race. `revision` grows with every edit of its
 * sentences; edits are conditional on it, so two edits never interleave.
 */
export class Transcription extends BaseEntity {
  assetId!: number
  engine!: string
  language!: string
  state: Opt<TranscriptionState> = 'queued'
  error: string | null = null
  jobId: number | null = null
  openAssetId: number | null = null
  /** milliseconds of audio transcribed */
  durationMs: number | null = null
  chunks: number | null = null
  revision: Opt<number> = 0
  createdById: number | null = null
}

export const TranscriptionSchema = new EntitySchema<Transcription, BaseEntity>({
  class: Transcription,
  tableName: 'transcriptions',
  properties: {
    ...baseProperties,
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: true },
    engine: { type: 'string', length: 40 },
    language: { type: 'string', length: 20 },
    state: { type: 'string', length: 20, default: 'queued' },
    error: { type: 'text', nullable: true },
    jobId: { type: 'integer', nullable: true },
    openAssetId: { type: 'integer', nullable: true, unique: true },
    durationMs: { type: 'integer', nullable: true },
    chunks: { type: 'integer', nullable: true },
    revision: { type: 'integer', default: 0 },
    createdById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'created_by_id', nullable: true, deleteRule: 'set null', index: true },
  },
})

/** A sentence of a transcript: times in milliseconds, its words (JSON) with their own times */
export class TranscriptionSentence extends BaseEntity {
  transcriptionId!: number
  startMs!: number
  endMs!: number
  text!: string
  speaker!: string
  words!: string
}

export const TranscriptionSentenceSchema = new EntitySchema<TranscriptionSentence, BaseEntity>({
  class: TranscriptionSentence,
  tableName: 'transcription_sentences',
  properties: {
    ...baseProperties,
    // lookups by transcript use the (transcription_id, start_ms, id) index
    transcriptionId: { kind: 'm:1', entity: () => Transcription, mapToPk: true, fieldName: 'transcription_id', deleteRule: 'cascade', index: false },
    startMs: { type: 'integer' },
    endMs: { type: 'integer' },
    text: { type: 'text' },
    speaker: { type: 'string', length: 100 },
    words: { type: 'text' },
  },
  indexes: [{ properties: ['transcriptionId', 'startMs', 'id'] }],
})
