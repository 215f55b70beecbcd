import { Type } from 'typebox'
import { strategyServices } from '../strategies/index.js'
import { scheduleServices } from './refs.js'
import { migrations } from './migrations.js'
import { scheduleEntities } from './entities.js'
import { ScheduleService } from './service.js'
import { Scheduler } from './scheduler.js'
import { registerScheduleRoutes } from './routes.js'
export { scheduleServices } from './refs.js'
export { ScheduleService, nextRuns } from './service.js'
export { Scheduler } from './scheduler.js'
export { Schedule, ScheduleRun } from './entities.js'

import { coreServices, definePlugin } from '../../core/index.js'

const Settings = Type.Object(
  {
    /** ms between this process's looks for due schedules; 0: this process fires none (another one does) */
    tickMs: Type.Integer({ minimum: 0, maximum: 3_600_000, default: 5000 }),
  },
  { default: {} },
)

/** Schedules (§4.22): cron expressions in a time zone that run archive, backup and copy-to strategies, or move projects to another storage, on a selection of projects. */
export const schedulesPlugin = definePlugin({
  name: 'schedules',
  title: 'Schedules',
  version: '1.0.0',
  description: 'Cron schedules (with time zones) that archive, back up or copy the projects a selection takes, once per due time across processes',
  dependsOn: ['strategies', 'projects', 'status-flags'],
  migrations,
  entities: scheduleEntities,
  settings: Settings,
  register(api) {
    api.provide(scheduleServices.service, (r) => new ScheduleService(r(coreServices.knex), r(strategyServices.strategies), r(coreServices.storages)))
    api.provide(
      scheduleServices.scheduler,
      (r) => new Scheduler(r(coreServices.knex), r(scheduleServices.service), () => r(strategyServices.runs), r(coreServices.features), api.log, () => api.settings().tickMs),
      { dispose: (scheduler) => scheduler.stop() },
    )
    registerScheduleRoutes(api)
  },
  started({ resolve }) {
    // after every plugin's repairs; a run missed while no process was up fires on the first tick
    resolve(scheduleServices.scheduler).start()
  },
})
