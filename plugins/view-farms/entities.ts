import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/index.js'

/*
 * The node table is read and written with knex (one statement per heartbeat); this entity describes
 * it as migration 0001-view-farms-nodes creates it, so the schema generator sees no drift.
 */

/** A job-running mamkit process of the view farm. */
export class ViewFarmNode extends BaseEntity {
  name!: string
  hostName!: string
  workerId!: string
  pid!: number
  processStartedAt!: Date
  version!: string
  availableJobTypes!: string[]
  jobTypes: string[] | null = null
  concurrency: number | null = null
  configuredConcurrency!: number
  state: Opt<string> = 'running'
  restartGeneration: Opt<number> = 0
  activity!: string
  runningJobs!: unknown[]
  heartbeatAt!: Date
  restartedAt: Date | null = null
}

export const ViewFarmNodeSchema = new EntitySchema<ViewFarmNode, BaseEntity>({
  class: ViewFarmNode,
  tableName: 'view_farm_nodes',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 100 },
    hostName: { type: 'string', length: 255 },
    workerId: { type: 'string', length: 100, unique: true },
    pid: { type: 'integer' },
    processStartedAt: { type: 'Date' },
    version: { type: 'string', length: 40 },
    availableJobTypes: { type: 'json' },
    jobTypes: { type: 'json', nullable: true },
    concurrency: { type: 'integer', nullable: true },
    configuredConcurrency: { type: 'integer' },
    state: { type: 'string', length: 10, default: 'running' },
    restartGeneration: { type: 'integer', default: 0 },
    activity: { type: 'string', length: 12 },
    runningJobs: { type: 'json' },
    heartbeatAt: { type: 'Date' },
    restartedAt: { type: 'Date', nullable: true },
  },
  indexes: [{ properties: ['hostName', 'heartbeatAt'] }],
})

export const viewFarmEntities = [ViewFarmNodeSchema]
