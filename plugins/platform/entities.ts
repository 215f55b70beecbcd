import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/index.js'
import { Project } from '../projects/index.js'

/**
 * The settings an administrator changed over HTTP, per plugin: only the members set (overrides),
 * merged over the configuration file's values, so a setting never changed keeps following the file.
 */
export class PlatformSetting extends BaseEntity {
  plugin!: string
  /** JSON object of the overrides */
  value!: string
  updatedById: number | null = null
}

/** one changed setting: who, when, old → new (secrets redacted). Kept when the user is deleted. */
export class SettingChange {
  id!: number
  plugin!: string
  /** dotted path inside the plugin's settings: `metrics.token` */
  setting!: string
  oldValue: string | null = null
  newValue: string | null = null
  userId: number | null = null
  username: string | null = null
  createdAt: Opt<Date> = new Date()
}

/** an installed license file; the newest row is the one in force */
export class InstalledLicense extends BaseEntity {
  /** the license file as received (JSON with `license` and `signature`) */
  document!: string
  installedById: number | null = null
}

/** bytes served by download, proxy and share routes, per instance and calendar month (UTC) */
export class TrafficMonth {
  id!: number
  instance!: string
  /** `2026-11` */
  month!: string
  kind!: string
  bytes: Opt<number> = 0
  updatedAt: Opt<Date> = new Date()
}

export const PlatformSettingSchema = new EntitySchema<PlatformSetting, BaseEntity>({
  class: PlatformSetting,
  tableName: 'platform_settings',
  properties: {
    ...baseProperties,
    plugin: { type: 'string', length: 100, unique: true },
    value: { type: 'text' },
    updatedById: { type: 'integer', fieldName: 'updated_by_id', nullable: true },
  },
})

export const SettingChangeSchema = new EntitySchema<SettingChange>({
  class: SettingChange,
  tableName: 'platform_setting_changes',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    plugin: { type: 'string', length: 100 },
    setting: { type: 'string', length: 300 },
    oldValue: { type: 'text', nullable: true },
    newValue: { type: 'text', nullable: true },
    userId: { type: 'integer', nullable: true },
    username: { type: 'string', length: 200, nullable: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
  indexes: [{ properties: ['createdAt'] }],
})

export const InstalledLicenseSchema = new EntitySchema<InstalledLicense, BaseEntity>({
  class: InstalledLicense,
  tableName: 'platform_licenses',
  properties: {
    ...baseProperties,
    document: { type: 'text' },
    installedById: { type: 'integer', fieldName: 'installed_by_id', nullable: true },
  },
})

export const TrafficMonthSchema = new EntitySchema<TrafficMonth>({
  class: TrafficMonth,
  tableName: 'platform_traffic',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    instance: { type: 'string', length: 100 },
    month: { type: 'string', length: 7 },
    kind: { type: 'string', length: 20 },
    bytes: { type: new BigIntType('number'), default: 0 },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
  uniques: [{ properties: ['instance', 'month', 'kind'] }],
})

/** a watched folder on a storage feeding a library project (GET/POST /library_ingests) */
export class LibraryIngest extends BaseEntity {
  name!: string
  storage!: string
  path!: string
  projectId!: number
  mode!: string
  stableSeconds!: number
  intervalSeconds!: number
  mxfOpAtom!: boolean
  enabled!: boolean
  /** when the poller next queues a scan */
  nextScanAt!: Date
  /** bumped by every claim of a scan: the compare-and-set that lets one process queue it */
  scanClaims: Opt<number> = 0
  /** the scan last queued; no other is queued while it is queued or running */
  scanJobId: number | null = null
  lastScanAt: Date | null = null
  lastError: string | null = null
  createdById: number | null = null
}

/** a file seen in a watched folder: what it looked like, since when, and what became of it */
export class LibraryIngestFile {
  id!: number
  ingestId!: number
  /** relative to the watched folder, with `/` */
  path!: string
  size!: number
  /** modification time in ms */
  mtime!: number
  /** files registered together (an OP-Atom clip); null: alone */
  groupKey: string | null = null
  /** waiting, registering, registered, failed */
  state!: string
  firstSeenAt!: Date
  /** since when size and mtime are what they are */
  stableSince!: Date
  /** a `registering` claim lapses then (its scan died) */
  claimedUntil: Date | null = null
  assetId: number | null = null
  error: string | null = null
  updatedAt: Opt<Date> = new Date()
}

export const LibraryIngestSchema = new EntitySchema<LibraryIngest, BaseEntity>({
  class: LibraryIngest,
  tableName: 'platform_library_ingests',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 200, unique: true },
    storage: { type: 'string', length: 64 },
    path: { type: 'string', length: 4096 },
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', deleteRule: 'cascade', index: true },
    mode: { type: 'string', length: 10 },
    stableSeconds: { type: 'integer' },
    intervalSeconds: { type: 'integer' },
    mxfOpAtom: { type: 'boolean' },
    enabled: { type: 'boolean' },
    nextScanAt: { type: 'Date' },
    scanClaims: { type: 'integer', default: 0 },
    scanJobId: { type: 'integer', nullable: true },
    lastScanAt: { type: 'Date', nullable: true },
    lastError: { type: 'text', nullable: true },
    createdById: { type: 'integer', nullable: true },
  },
})

export const LibraryIngestFileSchema = new EntitySchema<LibraryIngestFile>({
  class: LibraryIngestFile,
  tableName: 'platform_library_ingest_files',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    // the unique index (ingest_id, path) serves lookups by ingest
    ingestId: { kind: 'm:1', entity: () => LibraryIngest, mapToPk: true, fieldName: 'ingest_id', deleteRule: 'cascade', index: false },
    path: { type: 'string', length: 1024 },
    size: { type: new BigIntType('number') },
    mtime: { type: new BigIntType('number') },
    groupKey: { type: 'string', length: 300, nullable: true },
    state: { type: 'string', length: 12 },
    firstSeenAt: { type: 'Date' },
    stableSince: { type: 'Date' },
    claimedUntil: { type: 'Date', nullable: true },
    assetId: { type: 'integer', nullable: true },
    error: { type: 'text', nullable: true },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
  uniques: [{ properties: ['ingestId', 'path'] }],
})

export const platformEntities = [PlatformSettingSchema, SettingChangeSchema, InstalledLicenseSchema, TrafficMonthSchema, LibraryIngestSchema, LibraryIngestFileSchema]
