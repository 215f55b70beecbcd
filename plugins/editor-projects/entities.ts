import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/index.js'
import { Asset } from '../assets/index.js'

export type ReadingState = 'pending' | 'ready' | 'failed'

/**
 * What was read from one project file, for the content it had (`fileSize`, `fileMtimeMs`): a
 * changed file is read again. `pending` while a job reads a large file (`jobId` owns the reading:
 * a second request joins that job instead of starting one); `failed` keeps the reason the file
 * could not be read, so the same file is not parsed again just to fail again.
 */
export class EditorProjectReading extends BaseEntity {
  assetId!: number
  fileSize!: number
  fileMtimeMs!: number
  state!: ReadingState
  jobId: number | null = null
  format: string | null = null
  sequenceNames: Opt<string[]> | null = null
  media: Opt<unknown[]> | null = null
  error: string | null = null
  errorStatus: number | null = null
}

const bigNumber = { type: new BigIntType('number') }

export const EditorProjectReadingSchema = new EntitySchema<EditorProjectReading, BaseEntity>({
  class: EditorProjectReading,
  tableName: 'editor_projects_readings',
  properties: {
    ...baseProperties,
    // one reading per asset: the unique index also serves lookups by asset
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: false, unique: true },
    fileSize: { ...bigNumber },
    fileMtimeMs: { ...bigNumber },
    state: { type: 'string', length: 10 },
    jobId: { type: 'integer', nullable: true },
    format: { type: 'string', length: 16, nullable: true },
    sequenceNames: { type: 'json', nullable: true },
    media: { type: 'json', nullable: true },
    error: { type: 'text', nullable: true },
    errorStatus: { type: 'integer', nullable: true },
  },
})
