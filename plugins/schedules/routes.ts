import { scheduleServices } from './refs.js'
import { ScheduleInput } from './schemas.js'

import { IdParams, NoInput, type RegisterApi } from '../../core/index.js'

/** §4.22 schedules: administrators only (a schedule acts on projects without asking their writers) */
export function registerScheduleRoutes(api: RegisterApi) {
  const { routes } = api
  const schedules = api.use(scheduleServices.service)

  routes.get('/schedules', { access: 'admin', summary: 'every schedule with its next run times and its last run' }, async () => {
    const service = schedules()
    return { schedules: (await service.list()).map((s) => service.serialize(s)) }
  })

  routes.post('/schedules', { access: 'admin', input: ScheduleInput, wrap: 'schedule', summary: 'create a schedule: schedule[name], [cron], [time_zone], [strategy_type], [strategy_id], [selection]' }, async (ctx) => {
    const service = schedules()
    ctx.status = 201
    return { schedule: service.serialize(await service.create(ctx.input.schedule, ctx.user.userId)) }
  })

  routes.get('/schedules/:id', { access: 'admin', params: IdParams, summary: 'a schedule, its next run times and its recent runs' }, async (ctx) => {
    const service = schedules()
    const s = await service.get(ctx.params.id)
    return { schedule: { ...service.serialize(s), runs: await service.recentRuns(s.id) } }
  })

  routes.put('/schedules/:id', { access: 'admin', params: IdParams, input: ScheduleInput, wrap: 'schedule', summary: 'change a schedule; a new cron, time zone or enabled moves its next run' }, async (ctx) => {
    const service = schedules()
    return { schedule: service.serialize(await service.update(ctx.params.id, ctx.input.schedule)) }
  })

  routes.delete('/schedules/:id', { access: 'admin', params: IdParams, input: NoInput, summary: 'delete a schedule (its jobs already queued go on)' }, async (ctx) => {
    const service = schedules()
    return { schedule: service.serialize(await service.remove(ctx.params.id)) }
  })
}
