import { accepted, can, iso, IdParams, NoInput, paginate, type Principal, type RegisterApi } from '../../core/index.js'
import { viewFarmServices } from './refs.js'
import { ListInput, NodeInput, RevokeInput } from './schemas.js'
import { concurrencyOf, jsonColumn, type NodeRow, type ViewFarmService } from './service.js'

export const MANAGE = 'view_farms.manage'

/**
 * A node as the API shows it (root key `viewfarmnode`). `state` is what the farm asks of the node
 * (running, paused, stopped), or `offline` when its process stopped beating; `requested_state` keeps
 * the request either way. Host internals (host, pid, worker id, version, the jobs it runs) are shown
 * to those who may manage the farm only.
 */
export function nodeJson(row: NodeRow, farm: ViewFarmService, principal: Principal): Record<string, unknown> {
  const online = farm.isOnline(row)
  const running = online ? jsonColumn<Array<Record<string, unknown>>>(row.running_jobs) : []
  const json: Record<string, unknown> = {
    id: Number(row.id),
    name: row.name,
    state: online ? row.state : 'offline',
    requested_state: row.state,
    activity: online ? row.activity : 'offline',
    concurrency: concurrencyOf(row),
    job_types: jsonColumn<string[] | null>(row.job_types),
    running: running.length,
    heartbeat_at: iso(row.heartbeat_at),
    restarted_at: iso(row.restarted_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  }
  if (!can(principal, MANAGE)) return json
  return {
    ...json,
    host_name: row.host_name,
    pid: Number(row.pid),
    worker_id: row.worker_id,
    version: row.version,
    process_started_at: iso(row.process_started_at),
    available_job_types: jsonColumn<string[]>(row.available_job_types),
    restart_generation: Number(row.restart_generation),
    configured_concurrency: Number(row.configured_concurrency),
    running_jobs: running,
  }
}

export function registerRoutes(api: RegisterApi) {
  const farm = api.use(viewFarmServices.farm)
  const { routes } = api
  const show = (row: NodeRow, principal: Principal) => ({ viewfarmnode: nodeJson(row, farm(), principal) })
  const list = (rows: NodeRow[], principal: Principal) => ({ view_farm_nodes: rows.map((r) => nodeJson(r, farm(), principal)) })

  routes.get('/view_farms', { access: 'authenticated', input: ListInput, summary: 'the nodes of the view farm (the processes that run jobs)' }, async (ctx) => {
    const rows = await paginate<Record<string, unknown>>(ctx, farm().listQuery(), ctx.input, { orderBy: ['id'], total: true, defaultPerPage: 100 })
    return list(rows as unknown as NodeRow[], ctx.user)
  })
  routes.get('/view_farms/:id', { access: 'authenticated', params: IdParams, summary: 'one node' }, async (ctx) => show(await farm().get(ctx.params.id), ctx.user))
  routes.put('/view_farms/:id', { access: MANAGE, params: IdParams, input: NodeInput, wrap: 'viewfarmnode', summary: 'rename a node, set its concurrency and the job types it claims (applied live)' }, async (ctx) =>
    show(await farm().update(ctx.params.id, ctx.input.viewfarmnode), ctx.user),
  )
  routes.post('/view_farms/:id/start', { access: MANAGE, params: IdParams, input: NoInput, summary: 'the node claims jobs again' }, async (ctx) => show(await farm().setState(ctx.params.id, 'running'), ctx.user))
  routes.post('/view_farms/:id/stop', { access: MANAGE, params: IdParams, input: NoInput, summary: 'the node claims no more jobs; running ones finish (drain)' }, async (ctx) =>
    show(await farm().setState(ctx.params.id, 'stopped'), ctx.user),
  )
  routes.post('/view_farms/:id/restart', { access: MANAGE, params: IdParams, input: NoInput, summary: 'drain the node, reload its runner, claim again' }, async (ctx) => {
    return accepted(ctx, show(await farm().restart(ctx.params.id), ctx.user))
  })
  routes.post('/view_farms/pause_all', { access: MANAGE, input: NoInput, summary: 'every running node stops claiming (queued jobs stay queued)' }, async (ctx) => list(await farm().moveAll('running', 'paused'), ctx.user))
  routes.post('/view_farms/unpause_all', { access: MANAGE, input: NoInput, summary: 'every paused node claims again (stopped ones stay stopped)' }, async (ctx) => list(await farm().moveAll('paused', 'running'), ctx.user))
  routes.delete('/view_farms/revoke', { access: MANAGE, input: RevokeInput, summary: "detach a node (`id`): its running jobs go back to the queue, its process claims no more" }, async (ctx) => {
    const { node, released } = await farm().revoke(ctx.input.id)
    return { viewfarmnode: { ...nodeJson(node, farm(), ctx.user), state: 'revoked', released_job_ids: released } }
  })
}
