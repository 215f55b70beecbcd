import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/db/entity.js'

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
    name: { type: 'string' },
    color: { type: 'string' },
    scopeProjectId: { type: 'integer', nullable: true },
    position: { type: 'integer' },
  },
})

export const ProjectStatusFlagSchema = new EntitySchema<ProjectStatusFlag>({
  class: ProjectStatusFlag,
  tableName: 'project_status_flags',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    projectId: { type: 'integer' },
    statusFlag: { kind: 'm:1', entity: () => StatusFlag, deleteRule: 'cascade' },
    setById: { type: 'integer', nullable: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
})
