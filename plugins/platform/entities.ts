import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/index.js'

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

export const platformEntities = [PlatformSettingSchema, SettingChangeSchema, InstalledLicenseSchema, TrafficMonthSchema]
