import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'
import { Project } from '../projects/index.js'

/**
 * A coloured label that users put on projects ("Approved", "Waiting for VFX" …). Unscoped flags
 * (`scopeProjectId` null) belong to the local site and are available to every project; scoped ones
 * came with a project transferred from a remote site and are available to that project only.
 */
export class StatusFlag extends BaseEntity {
  name!: string
  /** `#rrggbb`, lower case */
  color!: string
  scopeProjectId: number | null = null
  position: Opt<number> = 0
}

/** one flag set on one project */
export class ProjectStatusFlag {
  id!: number
  projectId!: number
  statusFlag!: StatusFlag
  setById: number | null = null
  createdAt: Opt<Date> = new Date()
}

export const StatusFlagSchema = new EntitySchema<StatusFlag, BaseEntity>({
  class: StatusFlag,
  tableName: 'status_flags',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 100 },
    color: { type: 'string', length: 7 },
    // the project's id (mapToPk), for the foreign key: purging a project removes the flags that came with it
    scopeProjectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'scope_project_id', nullable: true, deleteRule: 'cascade', index: false },
    position: { type: 'integer', default: 0 },
  },
  // also serves lookups by scope project
  indexes: [{ properties: ['scopeProjectId', 'position'] }],
})

export const ProjectStatusFlagSchema = new EntitySchema<ProjectStatusFlag>({
  class: ProjectStatusFlag,
  tableName: 'project_status_flags',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    // ids (mapToPk) with their foreign keys; lookups by project use the unique index (project_id, status_flag_id)
    projectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'project_id', deleteRule: 'cascade', index: false },
    statusFlag: { kind: 'm:1', entity: () => StatusFlag, deleteRule: 'cascade', index: true },
    setById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'set_by_id', nullable: true, deleteRule: 'set null', index: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
  uniques: [{ properties: ['projectId', 'statusFlag'] }],
})
