import { randomUUID } from 'node:crypto'
import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'

/** A project: a folder tree on a named storage, created from a template, used by edit workstations. */
export class Project extends BaseEntity {
  uuid: Opt<string> = randomUUID()
  name!: string
  alternativeName: string | null = null
  description: string | null = null
  storage!: string
  /** folder below the storage root (relative, server-chosen) */
  folder!: string
  templateId: number | null = null
  isLibraryProject: Opt<boolean> = false
  encodingPriority: Opt<number> = 0
  customMetadata: Opt<Record<string, unknown>> = {}
  /** bytes; null: no limit */
  quota: number | null = null
  /** bytes measured by the last calculate_size */
  size: Opt<number> = 0
  sizeCalculatedAt: Date | null = null
  parent: Project | null = null
  frozenBy: User | null = null
  frozenAt: Date | null = null
  createdBy: User | null = null
  createdByEdit: string | null = null
  lastOpenedBy: User | null = null
  lastOpenedByEdit: string | null = null
  lastUsedAt: Date | null = null
  /** moved into the trash; purged by DELETE /trash */
  deleted: Opt<boolean> = false
  deletedAt: Date | null = null
  trashFolder: string | null = null
}

const bytes = { type: new BigIntType('number') }

export const ProjectSchema = new EntitySchema<Project, BaseEntity>({
  class: Project,
  tableName: 'projects',
  properties: {
    ...baseProperties,
    uuid: { type: 'string', length: 36, unique: true },
    name: { type: 'string', length: 255 },
    alternativeName: { type: 'string', length: 255, nullable: true },
    description: { type: 'text', nullable: true },
    storage: { type: 'string', length: 64 },
    folder: { type: 'string', length: 255 },
    templateId: { type: 'integer', nullable: true },
    isLibraryProject: { type: 'boolean', default: false },
    encodingPriority: { type: 'integer', default: 0 },
    customMetadata: { type: 'json' },
    quota: { ...bytes, nullable: true },
    size: { ...bytes, default: 0 },
    sizeCalculatedAt: { type: 'Date', nullable: true },
    parent: { kind: 'm:1', entity: () => Project, nullable: true, deleteRule: 'set null', index: true },
    frozenBy: { kind: 'm:1', entity: () => User, nullable: true, deleteRule: 'set null', index: true },
    frozenAt: { type: 'Date', nullable: true },
    createdBy: { kind: 'm:1', entity: () => User, nullable: true, deleteRule: 'set null', index: true },
    createdByEdit: { type: 'string', length: 200, nullable: true },
    lastOpenedBy: { kind: 'm:1', entity: () => User, nullable: true, deleteRule: 'set null', index: true },
    lastOpenedByEdit: { type: 'string', length: 200, nullable: true },
    lastUsedAt: { type: 'Date', nullable: true },
    deleted: { type: 'boolean', default: false },
    deletedAt: { type: 'Date', nullable: true },
    trashFolder: { type: 'string', length: 255, nullable: true },
  },
  indexes: [{ properties: ['deleted', 'name'] }],
  uniques: [{ properties: ['storage', 'folder'] }],
})
