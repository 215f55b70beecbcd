import { createServiceRef } from '../../core/index.js'
import type { ScheduleService } from './service.js'
import type { Scheduler } from './scheduler.js'

/** The schedules plugin's services. */
export const scheduleServices = {
  /** schedules: validation, next run times, the projects a selection takes */
  service: createServiceRef<ScheduleService>('schedules.service'),
  /** this process's timer: claims due schedules and runs them */
  scheduler: createServiceRef<Scheduler>('schedules.scheduler'),
} as const
