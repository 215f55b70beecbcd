import { IdParams, invalid, type RegisterApi, type MamContext, type ParamError } from '../../core/index.js'
import { projectServices } from '../projects/index.js'
import { statusFlagServices } from './refs.js'
import { ProjectFlagParams, StatusFlagInput, ToggleInput } from './schemas.js'
import type { FlagChanges } from './service.js'

/** §4.20 (flags on a project) and §4.22 (flag management, administrators only). */
export function registerStatusFlagRoutes({ routes }: RegisterApi) {
  const flags = (ctx: MamContext) => ctx.resolve(statusFlagServices.service)
  const projects = (ctx: MamContext) => ctx.resolve(projectServices.service)

  routes.get('/status_flags', { access: 'authenticated', summary: 'the unscoped status flags of this site' }, async (ctx) => {
    return { array: await flags(ctx).unscopedViews() } // wire.md: root key `array`
  })

  routes.get('/status_flags/:id', { access: 'authenticated', params: IdParams, summary: 'show a status flag' }, async (ctx) => {
    const s = flags(ctx)
    const flag = await s.get(ctx.em, ctx.params.id)
    // a scoped flag is as visible as the project it came with
    if (flag.scopeProjectId !== null && !ctx.user.isAdmin) await projects(ctx).readable(ctx.em, ctx.requireUser(), flag.scopeProjectId)
    return { status_flag: s.serialize(flag) }
  })

  routes.post('/status_flags', { access: 'admin', input: StatusFlagInput, summary: 'create an unscoped status flag' }, async (ctx) => {
    const changes = readChanges(ctx, true)
    const s = flags(ctx)
    ctx.status = 201
    return { status_flag: s.serialize(await s.create(ctx.em, changes as Required<FlagChanges>)) }
  })

  routes.put('/status_flags/:id', { access: 'admin', params: IdParams, input: StatusFlagInput, summary: 'change a status flag (scoped or unscoped)' }, async (ctx) => {
    const s = flags(ctx)
    const flag = await s.get(ctx.em, ctx.params.id)
    return { status_flag: s.serialize(await s.update(ctx.em, flag, readChanges(ctx, false))) }
  })

  routes.delete('/status_flags/:id', { access: 'admin', params: IdParams, summary: 'delete a status flag and remove it from every project' }, async (ctx) => {
    const s = flags(ctx)
    const flag = await s.get(ctx.em, ctx.params.id)
    const body = { status_flag: s.serialize(flag) }
    await s.remove(ctx.em, flag)
    return body
  })

  routes.get('/projects/:id/status_flags', { access: 'authenticated', params: IdParams, summary: 'status flags available to a project, each with `set`' }, async (ctx) => {
    const project = await projects(ctx).readableSummary(ctx.requireUser(), ctx.params.id)
    return { array: await flags(ctx).viewsForProject(project.id) }
  })

  routes.put(
    '/projects/:id/status_flags/:status_flag_id',
    { access: 'authenticated', params: ProjectFlagParams, input: ToggleInput, summary: 'toggle a status flag on a project (or set it with set=true|false)' },
    async (ctx) => {
      const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
      const s = flags(ctx)
      const flag = await s.availableFlag(ctx.em, project.id, ctx.params.status_flag_id)
      const set = await s.setOn(ctx.em, project.id, flag, ctx.input.set, ctx.user.userId)
      return { status_flag: { ...s.serialize(flag, set), project_id: project.id } }
    },
  )
}

/** fields under `status_flag[...]` or at the top level; errors name them the way they were sent */
function readChanges(ctx: MamContext, creating: boolean): FlagChanges {
  const nested = ctx.input.status_flag !== undefined && ctx.input.status_flag !== null
  const f = { ...ctx.input, ...(ctx.input.status_flag ?? {}) }
  const name = (key: string) => (nested || f[key] === undefined ? `status_flag[${key}]` : key)
  const errors: ParamError[] = []
  if (f.name !== undefined && f.name.trim() === '') errors.push({ param: name('name'), message: 'must not be blank' })
  if (creating) for (const key of ['name', 'color'] as const) if (f[key] === undefined) errors.push({ param: name(key), message: 'is required' })
  if (errors.length) throw invalid(errors)
  return { name: f.name?.trim(), color: f.color, position: f.position }
}
