import { EntitySchema, type Opt } from '@mikro-orm/core'
import { Strategy } from '../strategies/index.js'

import { BaseEntity, baseProperties, User } from '../../core/index.js'

/*
 * The schedules tables are read and written with knex by the services; these entities describe
 * them exactly as migration 0001-schedules creates them (test/core/schema-drift.test.ts).
 */

/** A cron expression in a time zone that runs a strategy on the projects a selection takes. */
export class Schedule extends BaseEntity {
  name!: string
  cron!: string
  timeZone!: string
  strategyType!: string
  strategyId: number | null = null
  storage: string | null = null
  selection!: unknown
  enabled: Opt<boolean> = true
  userId: number | null = null
  nextRunAt: Date | null = null
  lastRunAt: Date | null = null
  lastStatus: string | null = null
  lastJobId: number | null = null
  lastError: string | null = null
}

export const ScheduleSchema = new EntitySchema<Schedule, BaseEntity>({
  class: Schedule,
  tableName: 'schedules',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 255, unique: true },
    cron: { type: 'string', length: 200 },
    timeZone: { type: 'string', length: 64 },
    strategyType: { type: 'string', length: 40 },
    strategyId: { kind: 'm:1', entity: () => Strategy, mapToPk: true, fieldName: 'strategy_id', nullable: true, deleteRule: 'set null', index: true },
    storage: { type: 'string', length: 64, nullable: true },
    selection: { type: 'json' },
    enabled: { type: 'boolean', default: true },
    userId: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'user_id', nullable: true, deleteRule: 'set null', index: true },
    nextRunAt: { type: 'Date', nullable: true, index: true },
    lastRunAt: { type: 'Date', nullable: true },
    lastStatus: { type: 'string', length: 20, nullable: true },
    lastJobId: { type: 'integer', nullable: true },
    lastError: { type: 'text', nullable: true },
  },
})

/** One run of a schedule: when it was due, what it queued and what it skipped. */
export class ScheduleRun extends BaseEntity {
  scheduleId!: number
  dueAt!: Date
  startedAt!: Date
  finishedAt: Date | null = null
  status!: string
  projects: Opt<number> = 0
  queued: Opt<number> = 0
  skipped: Opt<number> = 0
  outcomes!: unknown
  error: string | null = null
}

export const ScheduleRunSchema = new EntitySchema<ScheduleRun, BaseEntity>({
  class: ScheduleRun,
  tableName: 'schedule_runs',
  properties: {
    ...baseProperties,
    scheduleId: { kind: 'm:1', entity: () => Schedule, mapToPk: true, fieldName: 'schedule_id', deleteRule: 'cascade', index: true },
    dueAt: { type: 'Date' },
    startedAt: { type: 'Date' },
    finishedAt: { type: 'Date', nullable: true },
    status: { type: 'string', length: 20 },
    projects: { type: 'integer', default: 0 },
    queued: { type: 'integer', default: 0 },
    skipped: { type: 'integer', default: 0 },
    outcomes: { type: 'json' },
    error: { type: 'text', nullable: true },
  },
})

export const scheduleEntities = [ScheduleSchema, ScheduleRunSchema]
