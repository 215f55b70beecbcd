import { EntitySchema, type Opt } from '@mikro-orm/core'
import { Project } from '../projects/index.js'
import { Asset } from '../assets/index.js'

import { BaseEntity, User, baseProperties } from '../../core/index.js'
/*
 * The tables are read and written with knex (service.ts: plain rows, conditional updates and one
 * transaction per change); these entities describe them for the schema check and the ORM.
 */

export class CustomMetadataSet extends BaseEntity {
  name!: string
  appliesTo!: string
  root: Opt<boolean> = true
  parentId: number | null = null
  position: Opt<number> = 0
  scopeProjectId: number | null = null
  scopeAssetId: number | null = null
}

export class CustomMetadataField extends BaseEntity {
  setId!: number
  name!: string
  type!: string
  mandatory: Opt<boolean> = false
  maxlen: number | null = null
  pattern: string | null = null
  min: number | null = null
  max: number | null = null
  integer: Opt<boolean> = false
  position: Opt<number> = 0
  useInProjectName: Opt<boolean> = false
  counter: Opt<number> = 0
}

export class SelectFieldOption extends BaseEntity {
  fieldId!: number
  name!: string
  position: Opt<number> = 0
  subSetId: number | null = null
  safeSearch: Opt<boolean> = false
}

export class CustomMetadataValue extends BaseEntity {
  fieldId!: number
  ownerType!: string
  ownerId!: number
  projectId: number | null = null
  assetId: number | null = null
  value!: string
  textValue!: string
  uniqueKey: string | null = null
  updatedById: number | null = null
}

export class CustomMetadataHistory {
  id!: number
  ownerType!: string
  ownerId!: number
  projectId: number | null = null
  assetId: number | null = null
  fieldId: number | null = null
  fieldName!: string
  oldValue: string | null = null
  newValue: string | null = null
  userId: number | null = null
  createdAt: Opt<Date> = new Date()
}

export const CustomMetadataSetSchema = new EntitySchema<CustomMetadataSet, BaseEntity>({
  class: CustomMetadataSet,
  tableName: 'custom_metadata_sets',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 255 },
    appliesTo: { type: 'string', length: 10, fieldName: 'applies_to' },
    root: { type: 'boolean', default: true },
    parentId: { kind: 'm:1', entity: () => CustomMetadataSet, mapToPk: true, fieldName: 'parent_id', nullable: true, deleteRule: 'cascade', index: true },
    position: { type: 'integer', default: 0 },
    scopeProjectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'scope_project_id', nullable: true, deleteRule: 'cascade', index: true },
    scopeAssetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'scope_asset_id', nullable: true, deleteRule: 'cascade', index: true },
  },
})

export const CustomMetadataFieldSchema = new EntitySchema<CustomMetadataField, BaseEntity>({
  class: CustomMetadataField,
  tableName: 'custom_metadata_fields',
  properties: {
    ...baseProperties,
    // lookups by set use the unique index (set, name)
    setId: { kind: 'm:1', entity: () => CustomMetadataSet, mapToPk: true, fieldName: 'custom_metadata_set_id', deleteRule: 'cascade', index: false },
    name: { type: 'string', length: 255 },
    type: { type: 'string', length: 20 },
    mandatory: { type: 'boolean', default: false },
    maxlen: { type: 'integer', nullable: true },
    pattern: { type: 'text', nullable: true },
    min: { type: 'double', nullable: true },
    max: { type: 'double', nullable: true },
    integer: { type: 'boolean', default: false },
    position: { type: 'integer', default: 0 },
    useInProjectName: { type: 'boolean', default: false, fieldName: 'use_in_project_name' },
    counter: { type: 'integer', default: 0 },
  },
  uniques: [{ properties: ['setId', 'name'] }],
})

export const SelectFieldOptionSchema = new EntitySchema<SelectFieldOption, BaseEntity>({
  class: SelectFieldOption,
  tableName: 'select_field_options',
  properties: {
    ...baseProperties,
    fieldId: { kind: 'm:1', entity: () => CustomMetadataField, mapToPk: true, fieldName: 'custom_metadata_field_id', deleteRule: 'cascade', index: false },
    name: { type: 'string', length: 255 },
    position: { type: 'integer', default: 0 },
    subSetId: { kind: 'm:1', entity: () => CustomMetadataSet, mapToPk: true, fieldName: 'custom_metadata_sub_set_id', nullable: true, deleteRule: 'set null', index: true },
    safeSearch: { type: 'boolean', default: false, fieldName: 'safe_search' },
  },
  uniques: [{ properties: ['fieldId', 'name'] }],
})

export const CustomMetadataValueSchema = new EntitySchema<CustomMetadataValue, BaseEntity>({
  class: CustomMetadataValue,
  tableName: 'custom_metadata_values',
  properties: {
    ...baseProperties,
    fieldId: { kind: 'm:1', entity: () => CustomMetadataField, mapToPk: true, fieldName: 'custom_metadata_field_id', deleteRule: 'cascade', index: false },
    ownerType: { type: 'string', length: 20, fieldName: 'owner_type' },
    ownerId: { type: 'integer', fieldName: 'owner_id' },
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', nullable: true, deleteRule: 'cascade', index: true },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', nullable: true, deleteRule: 'cascade', index: true },
    value: { type: 'text' },
    textValue: { type: 'text', fieldName: 'text_value' },
    uniqueKey: { type: 'string', length: 255, nullable: true, fieldName: 'unique_key' },
    updatedById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'updated_by_id', nullable: true, deleteRule: 'set null', index: true },
  },
  indexes: [{ properties: ['ownerType', 'ownerId'] }],
  uniques: [
    { name: 'custom_metadata_values_field_owner_unique', properties: ['fieldId', 'ownerType', 'ownerId'] },
    { name: 'custom_metadata_values_field_key_unique', properties: ['fieldId', 'uniqueKey'] },
  ],
})

export const CustomMetadataHistorySchema = new EntitySchema<CustomMetadataHistory>({
  class: CustomMetadataHistory,
  tableName: 'custom_metadata_history',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    ownerType: { type: 'string', length: 20, fieldName: 'owner_type' },
    ownerId: { type: 'integer', fieldName: 'owner_id' },
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', nullable: true, deleteRule: 'cascade', index: true },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', nullable: true, deleteRule: 'cascade', index: true },
    fieldId: { kind: 'm:1', entity: () => CustomMetadataField, mapToPk: true, fieldName: 'custom_metadata_field_id', nullable: true, deleteRule: 'set null', index: true },
    fieldName: { type: 'string', length: 255, fieldName: 'field_name' },
    oldValue: { type: 'text', nullable: true, fieldName: 'old_value' },
    newValue: { type: 'text', nullable: true, fieldName: 'new_value' },
    userId: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'user_id', nullable: true, deleteRule: 'set null', index: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
  indexes: [{ properties: ['ownerType', 'ownerId', 'id'] }],
})

export const entities = [CustomMetadataSetSchema, CustomMetadataFieldSchema, SelectFieldOptionSchema, CustomMetadataValueSchema, CustomMetadataHistorySchema]
