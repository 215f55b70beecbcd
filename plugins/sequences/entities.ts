import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'
import { Asset } from '../assets/index.js'
import { Project } from '../projects/index.js'

/*
 * The sequences tables as migration 0001-sequences creates them. The service reads and writes them
 * with knex (a timeline is loaded and replaced as a whole); these entities describe the schema and
 * test/core/schema-drift.test.ts keeps them equal to the migration.
 */

const userRef = (fieldName: string, index: boolean) => ({ kind: 'm:1', entity: () => User, mapToPk: true, fieldName, nullable: true, deleteRule: 'set null', index }) as const

export class PreditorSequence extends BaseEntity {
  uuid!: string
  projectId!: number
  name!: string
  rateNum!: number
  rateDen!: number
  dropFrame: Opt<boolean> = false
  startFrame: Opt<number> = 0
  width: number | null = null
  height: number | null = null
  lockedById: number | null = null
  lockedAt: Date | null = null
  sourceFormat: string | null = null
  sourceAssetId: number | null = null
  createdById: number | null = null
}

export class PreditorSequenceClip extends BaseEntity {
  sequenceId!: number
  kind!: string
  track!: number
  recordFrame!: number
  sourceIn!: number
  sourceOut!: number
  sourceStart: Opt<number> = 0
  name!: string
  reel: string | null = null
  url: string | null = null
  assetId: number | null = null
}

export class PreditorSequenceMarker extends BaseEntity {
  sequenceId!: number
  frame!: number
  duration: Opt<number> = 0
  name!: string
  comment!: string
  color!: string
}

export const PreditorSequenceSchema = new EntitySchema<PreditorSequence, BaseEntity>({
  class: PreditorSequence,
  tableName: 'preditor_sequences',
  properties: {
    ...baseProperties,
    uuid: { type: 'string', length: 36, unique: true },
    // lookups by project use the (project_id, name) unique
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', deleteRule: 'cascade', index: false },
    name: { type: 'string', length: 255 },
    rateNum: { type: 'integer' },
    rateDen: { type: 'integer' },
    dropFrame: { type: 'boolean', default: false },
    startFrame: { type: 'integer', default: 0 },
    width: { type: 'integer', nullable: true },
    height: { type: 'integer', nullable: true },
    lockedById: userRef('locked_by_id', true),
    lockedAt: { type: 'Date', nullable: true },
    sourceFormat: { type: 'string', length: 10, nullable: true },
    sourceAssetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'source_asset_id', nullable: true, deleteRule: 'set null', index: true },
    createdById: userRef('created_by_id', true),
  },
  uniques: [{ properties: ['projectId', 'name'] }],
})

export const PreditorSequenceClipSchema = new EntitySchema<PreditorSequenceClip, BaseEntity>({
  class: PreditorSequenceClip,
  tableName: 'preditor_sequence_clips',
  properties: {
    ...baseProperties,
    // lookups by sequence use the (sequence_id, kind, track, record_frame) index
    sequenceId: { kind: 'm:1', entity: () => PreditorSequence, mapToPk: true, fieldName: 'sequence_id', deleteRule: 'cascade', index: false },
    kind: { type: 'string', length: 5 },
    track: { type: 'integer' },
    recordFrame: { type: 'integer' },
    sourceIn: { type: 'integer' },
    sourceOut: { type: 'integer' },
    sourceStart: { type: 'integer', default: 0 },
    name: { type: 'string', length: 255 },
    reel: { type: 'string', length: 64, nullable: true },
    url: { type: 'text', nullable: true },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', nullable: true, deleteRule: 'set null', index: true },
  },
  indexes: [{ name: 'preditor_sequence_clips_timeline_index', properties: ['sequenceId', 'kind', 'track', 'recordFrame'] }],
})

export const PreditorSequenceMarkerSchema = new EntitySchema<PreditorSequenceMarker, BaseEntity>({
  class: PreditorSequenceMarker,
  tableName: 'preditor_sequence_markers',
  properties: {
    ...baseProperties,
    sequenceId: { kind: 'm:1', entity: () => PreditorSequence, mapToPk: true, fieldName: 'sequence_id', deleteRule: 'cascade', index: false },
    frame: { type: 'integer' },
    duration: { type: 'integer', default: 0 },
    name: { type: 'string', length: 255 },
    comment: { type: 'text' },
    color: { type: 'string', length: 20 },
  },
  indexes: [{ properties: ['sequenceId', 'frame'] }],
})

export const sequenceEntities = [PreditorSequenceSchema, PreditorSequenceClipSchema, PreditorSequenceMarkerSchema]
