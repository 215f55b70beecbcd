import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'
import { Project } from '../projects/index.js'

/** An edit workstation that mounts projects over SMB; its password is sealed (core/crypto.ts), never returned. */
export class Edit extends BaseEntity {
  /** the X-APP-EDIT value of the workstation; also its folder below the mount root, so it never changes */
  name!: string
  comment: string | null = null
  passwordSealed!: string
}

/**
 * `mount`: the project is exposed on the edit's workspace (a symlink below the mount root);
 * `subproject`: exposed inside its parent's tree (a symlink below the parent's mount).
 */
export type SessionKind = 'mount' | 'subproject'
/**
 * The database row is what is wanted; the file system follows in a job (jobs.ts):
 * `pending` until the link exists, `ready`, `failed` when it could not be made,
 * `releasing` until the link is gone (then the row is deleted).
 */
export type SessionState = 'pending' | 'ready' | 'failed' | 'releasing'

/** One project exposed on one edit. `openedAt` set: opened for write, which excludes every other edit. */
export class EditSession extends BaseEntity {
  edit!: Edit
  project!: Project
  kind!: SessionKind
  /** for `subproject`: the project inside whose tree the link lives */
  parent: Project | null = null
  /** absolute path of the symlink, chosen by the server */
  link!: string
  state: Opt<SessionState> = 'pending'
  error: string | null = null
  mountedBy: User | null = null
  mountedAt: Opt<Date> = new Date()
  openedBy: User | null = null
  openedAt: Date | null = null
}

export const EditSchema = new EntitySchema<Edit, BaseEntity>({
  class: Edit,
  tableName: 'edits',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 100, unique: true },
    comment: { type: 'text', nullable: true },
    passwordSealed: { type: 'text', fieldName: 'password_sealed' },
  },
})

export const EditSessionSchema = new EntitySchema<EditSession, BaseEntity>({
  class: EditSession,
  tableName: 'edit_sessions',
  properties: {
    ...baseProperties,
    // lookups by edit use the unique index (edit_id, project_id, kind)
    edit: { kind: 'm:1', entity: () => Edit, deleteRule: 'cascade', index: false },
    project: { kind: 'm:1', entity: () => Project, deleteRule: 'cascade', index: true },
    kind: { type: 'string', length: 20 },
    parent: { kind: 'm:1', entity: () => Project, nullable: true, deleteRule: 'cascade', index: true },
    link: { type: 'text' },
    state: { type: 'string', length: 20 },
    error: { type: 'text', nullable: true },
    mountedBy: { kind: 'm:1', entity: () => User, nullable: true, deleteRule: 'set null', index: true },
    mountedAt: { type: 'Date' },
    openedBy: { kind: 'm:1', entity: () => User, nullable: true, deleteRule: 'set null', index: true },
    openedAt: { type: 'Date', nullable: true },
  },
  uniques: [
    { properties: ['edit', 'project', 'kind'] },
    // at most one edit has a project open for write: a partial index, compared by name only
    { name: 'edit_sessions_one_writer', expression: 'create unique index edit_sessions_one_writer on edit_sessions (project_id) where opened_at is not null' },
  ],
})
