import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { Project } from '../projects/index.js'

import { BaseEntity, baseProperties, User } from '../../core/index.js'

/*
 * The strategies tables are read and written with knex by the services; these entities describe
 * them exactly as migrations 0001-strategies and 0002-tier-claims create them, so the ORM's schema generator sees no
 * drift (test/core/schema-drift.test.ts). Foreign key columns carry an index only where the
 * migration made one.
 */

const bytes = { type: new BigIntType('number') }

/** An archive, backup, asset copy-to or project copy-to strategy: one table for the four kinds. */
export class Strategy extends BaseEntity {
  kind!: string
  name!: string
  destination!: string
  targetKind!: string
  target!: Record<string, unknown>
  format: Opt<string> = 'plain'
  adminOnly: Opt<boolean> = false
  includes!: unknown
  transmissionCheck: Opt<string> = 'fingerprint'
  enabled: Opt<boolean> = true
  strategyType: Opt<string> = 'manual'
  contents: Opt<string> = 'both'
  deleteProject: Opt<boolean> = false
  keep: Opt<number> = 0
  incremental: Opt<boolean> = false
}

export const StrategySchema = new EntitySchema<Strategy, BaseEntity>({
  class: Strategy,
  tableName: 'strategies',
  properties: {
    ...baseProperties,
    kind: { type: 'string', length: 20 },
    name: { type: 'string', length: 255 },
    destination: { type: 'text' },
    targetKind: { type: 'string', length: 10 },
    target: { type: 'json' },
    format: { type: 'string', length: 20, default: 'plain' },
    adminOnly: { type: 'boolean', default: false },
    includes: { type: 'json' },
    transmissionCheck: { type: 'string', length: 12, default: 'fingerprint' },
    enabled: { type: 'boolean', default: true },
    strategyType: { type: 'string', length: 40, default: 'manual' },
    contents: { type: 'string', length: 20, default: 'both' },
    deleteProject: { type: 'boolean', default: false },
    keep: { type: 'integer', default: 0 },
    incremental: { type: 'boolean', default: false },
  },
  uniques: [{ properties: ['kind', 'name'] }],
})

/** Where a project's archive is and how far it got; one per project (the unique key makes two archive requests meet). */
export class ArchiveState extends BaseEntity {
  projectId!: number
  archiveStrategyId: number | null = null
  nextStrategyId: number | null = null
  userId: number | null = null
  direction!: string
  stage!: string
  state!: string
  progress: Opt<number> = 0
  error: string | null = null
  cancelled: Opt<boolean> = false
  excludeLinkedFiles: Opt<boolean> = false
  archiveKey!: string
  jobId: number | null = null
  filesTotal: Opt<number> = 0
  filesDone: Opt<number> = 0
  filesFailed: Opt<number> = 0
  bytesTotal: Opt<number> = 0
  bytesReleased: Opt<number> = 0
  startedAt: Date | null = null
  finishedAt: Date | null = null
}

export const ArchiveStateSchema = new EntitySchema<ArchiveState, BaseEntity>({
  class: ArchiveState,
  tableName: 'archive_states',
  properties: {
    ...baseProperties,
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', deleteRule: 'cascade', unique: true, index: false },
    archiveStrategyId: { kind: 'm:1', entity: () => Strategy, mapToPk: true, fieldName: 'archive_strategy_id', nullable: true, deleteRule: 'set null', index: true },
    nextStrategyId: { kind: 'm:1', entity: () => Strategy, mapToPk: true, fieldName: 'next_strategy_id', nullable: true, deleteRule: 'set null', index: false },
    userId: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'user_id', nullable: true, deleteRule: 'set null', index: false },
    direction: { type: 'string', length: 10 },
    stage: { type: 'string', length: 20 },
    state: { type: 'string', length: 20 },
    // knex writes a float's default quoted (PostgreSQL keeps '0'::real, which MikroORM reads back as
    // the string '0'); a numeric default here would be seen as drift on PostgreSQL
    progress: { type: 'float', default: '0' },
    error: { type: 'text', nullable: true },
    cancelled: { type: 'boolean', default: false },
    excludeLinkedFiles: { type: 'boolean', default: false },
    archiveKey: { type: 'string', length: 255 },
    jobId: { type: 'integer', nullable: true },
    filesTotal: { type: 'integer', default: 0 },
    filesDone: { type: 'integer', default: 0 },
    filesFailed: { type: 'integer', default: 0 },
    bytesTotal: { ...bytes, default: 0 },
    bytesReleased: { ...bytes, default: 0 },
    startedAt: { type: 'Date', nullable: true },
    finishedAt: { type: 'Date', nullable: true },
  },
})

/** One file of an archive: what was copied, its checksums and how far it got. */
export class ArchiveFile extends BaseEntity {
  projectId!: number
  assetId: number | null = null
  path!: string
  size: Opt<number> = 0
  mtimeMs: number | null = null
  sha256: string | null = null
  crc32: string | null = null
  state!: string
  error: string | null = null
}

export const ArchiveFileSchema = new EntitySchema<ArchiveFile, BaseEntity>({
  class: ArchiveFile,
  tableName: 'archive_files',
  properties: {
    ...baseProperties,
    // lookups by project use the (project_id, path) unique and (project_id, state) indexes
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', deleteRule: 'cascade', index: false },
    assetId: { type: 'integer', nullable: true },
    path: { type: 'text' },
    size: { ...bytes, default: 0 },
    mtimeMs: { ...bytes, nullable: true },
    sha256: { type: 'string', length: 64, nullable: true },
    crc32: { type: 'string', length: 8, nullable: true },
    state: { type: 'string', length: 12 },
    error: { type: 'text', nullable: true },
  },
  uniques: [{ properties: ['projectId', 'path'] }],
  indexes: [{ properties: ['projectId', 'state'] }],
})

/** A copy made by copy-to or a backup: what went where (incremental backups compare against these). */
export class StrategyCopy extends BaseEntity {
  strategyId: number | null = null
  projectId: number | null = null
  jobId: number | null = null
  key!: string
  files: Opt<number> = 0
  bytes: Opt<number> = 0
  manifest!: unknown
  state!: string
}

export const StrategyCopySchema = new EntitySchema<StrategyCopy, BaseEntity>({
  class: StrategyCopy,
  tableName: 'strategy_copies',
  properties: {
    ...baseProperties,
    // lookups by strategy use the (strategy_id, project_id) index
    strategyId: { kind: 'm:1', entity: () => Strategy, mapToPk: true, fieldName: 'strategy_id', nullable: true, deleteRule: 'set null', index: false },
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', nullable: true, deleteRule: 'set null', index: false },
    jobId: { type: 'integer', nullable: true },
    key: { type: 'string', length: 255 },
    files: { type: 'integer', default: 0 },
    bytes: { ...bytes, default: 0 },
    manifest: { type: 'json' },
    state: { type: 'string', length: 12 },
  },
  indexes: [{ properties: ['strategyId', 'projectId'] }],
})

/** A project's move to another storage (POST /projects/tier) while its job is queued or running; one per project. */
export class TierClaim extends BaseEntity {
  projectId!: number
  storage!: string
  jobId: number | null = null
}

export const TierClaimSchema = new EntitySchema<TierClaim, BaseEntity>({
  class: TierClaim,
  tableName: 'tier_claims',
  properties: {
    ...baseProperties,
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', deleteRule: 'cascade', unique: true, index: false },
    storage: { type: 'string', length: 64 },
    jobId: { type: 'integer', nullable: true },
  },
})

export const strategyEntities = [StrategySchema, ArchiveStateSchema, ArchiveFileSchema, StrategyCopySchema, TierClaimSchema]
