/**
 * The view farm in one process, on SQLite and PostgreSQL: this process registers as a node, and
 * every command of the API reaches its runner (claiming off and on, limits, a drained restart,
 * revocation). The multi-process behaviour is in farm.test.ts.
 */
import t from 'tap'
import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import path from 'node:path'
import { assertProblem, onEachDatabase, waitFor, waitForJob, type TestServer } from '../../../core/testing/index.js'
import jobsPlugin, { JOB_TYPE } from '../../fixtures/jobs-plugin.js'

const options = { extraPlugins: [jobsPlugin], config: { jobs: { leaseMs: 1500, pollMs: 200 } } }
const lines = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean)

async function scratch(t: Tap) {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-farm-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}
type Tap = Parameters<Parameters<typeof onEachDatabase>[2]>[0]

/** this process's node, once it registered */
async function ownNode(s: TestServer) {
  return waitFor('the node registered', async () => {
    const reply = await s.request('GET', '/view_farms', { token: s.admin.token })
    // once it reported what it does after reading what the farm asks
    return reply.body.view_farm_nodes?.find((n: any) => n.worker_id === s.runtime.runner.workerId && n.activity !== 'idle')
  })
}
const row = (s: TestServer, id: number) => s.runtime.db.knex('view_farm_nodes').where({ id }).first()
const jobRow = (s: TestServer, id: number) => s.runtime.db.knex('jobs').where({ id }).first()
const enqueue = async (s: TestServer, name: string, payload: Record<string, unknown> = {}) => {
  const reply = await s.request('POST', `/jobs_test/${name}`, { token: s.admin.token, json: payload })
  if (reply.status !== 200) throw new Error(`enqueue ${name}: ${reply.status} ${reply.text}`)
  return reply.body.job.id as number
}
/** two heartbeats of the node after now: whatever it was going to claim, it has */
async function twoBeats(s: TestServer, id: number) {
  const seen = new Date((await row(s, id)).heartbeat_at).getTime()
  await waitFor('two more heartbeats', async () => new Date((await row(s, id)).heartbeat_at).getTime() > seen)
  const next = new Date((await row(s, id)).heartbeat_at).getTime()
  await waitFor('one more heartbeat', async () => new Date((await row(s, id)).heartbeat_at).getTime() > next)
}

onEachDatabase(
  t,
  'view farms: the node, its reads, rights and settings',
  async (t, s) => {
    const node = await ownNode(s)
    t.equal(node.name, hostname().slice(0, 100), 'named after its host')
    t.equal(node.state, 'running')
    t.equal(node.activity, 'claiming')
    t.equal(node.host_name, hostname())
    t.equal(node.pid, process.pid)
    t.equal(node.concurrency, s.runtime.config.jobs.concurrency)
    t.equal(node.job_types, null, 'every type')
    t.ok(node.available_job_types.includes(JOB_TYPE('quick')), 'the types the process can run')
    t.type(node.version, 'string')
    t.same(node.running_jobs, [])
    t.equal((await s.request('GET', '/view_farms', { token: s.admin.token })).headers.get('x-total-count'), '1')

    // a plain user sees the node, not the host's internals
    const asUser = await s.request('GET', `/view_farms/${node.id}`, { token: s.user.token })
    t.equal(asUser.status, 200)
    t.equal(asUser.body.viewfarmnode.name, node.name)
    for (const key of ['host_name', 'pid', 'worker_id', 'version', 'running_jobs', 'available_job_types']) t.notOk(key in asUser.body.viewfarmnode, `no ${key} for a plain user`)
    t.notOk('host_name' in (await s.request('GET', '/view_farms', { token: s.user.token })).body.view_farm_nodes[0])
    t.equal((await s.request('GET', '/view_farms')).status, 401)
    t.equal((await s.request('GET', `/view_farms/${node.id}`)).status, 401)
    assertProblem(t, await s.request('GET', '/view_farms/999999', { token: s.admin.token }), 404)

    // PUT: name, concurrency, accepted types; applied to the runner of this process
    const put = await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { name: 'render-1', concurrency: 3, job_types: [JOB_TYPE('quick'), JOB_TYPE('stepper')] } } })
    t.equal(put.status, 200)
    t.match(put.body.viewfarmnode, { name: 'render-1', concurrency: 3, job_types: [JOB_TYPE('quick'), JOB_TYPE('stepper')] })
    t.match(await row(s, node.id), { name: 'render-1', concurrency: 3 })
    await waitFor('the runner took the limits', () => s.runtime.runner.limits().concurrency === 3)
    t.same(s.runtime.runner.limits().types?.sort(), [JOB_TYPE('quick'), JOB_TYPE('stepper')].sort())
    // unwrapped attributes are accepted too (wrap), and null accepts every type again
    const unwrapped = await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { job_types: null } })
    t.equal(unwrapped.status, 200)
    t.equal(unwrapped.body.viewfarmnode.job_types, null)
    await waitFor('every type again', () => s.runtime.runner.limits().types === null)

    // a node that accepts only `quick` leaves `append` queued
    await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { job_types: [JOB_TYPE('quick')] } } })
    await waitFor('only quick', () => s.runtime.runner.limits().types?.length === 1)
    const dir = await scratch(t)
    const appended = await enqueue(s, 'append', { file: path.join(dir, 'ran') })
    const quick = await enqueue(s, 'quick', { value: 'x' })
    t.equal((await waitForJob(s, s.admin.token, quick)).state, 'finished')
    await twoBeats(s, node.id)
    t.equal((await jobRow(s, appended)).state, 'queued', 'a type the node does not accept stays queued')
    await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { job_types: null } } })
    t.equal((await waitForJob(s, s.admin.token, appended)).state, 'finished', 'accepted again: claimed')

    // invalid input: named, nothing changed
    const before = await row(s, node.id)
    assertProblem(t, await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { concurrency: 0 } } }), 422, ['viewfarmnode[concurrency]'])
    assertProblem(t, await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { name: '' } } }), 422, ['viewfarmnode[name]'])
    assertProblem(t, await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { job_types: ['nope.nothing'] } } }), 422, ['viewfarmnode[job_types]'])
    assertProblem(t, await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { job_types: [] } } }), 422, ['viewfarmnode[job_types]'])
    assertProblem(t, await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { colour: 'red' } } }), 422)
    t.same(await row(s, node.id), before, 'nothing changed')
    assertProblem(t, await s.request('PUT', `/view_farms/${node.id}`, { token: s.user.token, json: { viewfarmnode: { name: 'mine' } } }), 403)
    assertProblem(t, await s.request('PUT', '/view_farms/999999', { token: s.admin.token, json: { viewfarmnode: { name: 'x' } } }), 404)
    t.equal((await s.request('PUT', `/view_farms/${node.id}`, { json: { viewfarmnode: { name: 'x' } } })).status, 401)
    t.same(await row(s, node.id), before, 'nothing changed')

    // two PUTs at once: both answer, the row holds one of them whole, and the runner follows the row
    const [a, b] = await Promise.all([
      s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { name: 'a', concurrency: 2 } } }),
      s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { name: 'b', concurrency: 5 } } }),
    ])
    t.same([a.status, b.status], [200, 200])
    const raced = await row(s, node.id)
    t.ok((raced.name === 'a' && raced.concurrency === 2) || (raced.name === 'b' && raced.concurrency === 5), `one write whole: ${raced.name} ${raced.concurrency}`)
    await waitFor('the runner follows the row', () => s.runtime.runner.limits().concurrency === raced.concurrency)
    // null: the process's own setting again
    const reset = await s.request('PUT', `/view_farms/${node.id}`, { token: s.admin.token, json: { viewfarmnode: { concurrency: null } } })
    t.equal(reset.body.viewfarmnode.concurrency, s.runtime.config.jobs.concurrency)
    t.equal((await row(s, node.id)).concurrency, null)
    await waitFor('the runner is back to its setting', () => s.runtime.runner.limits().concurrency === s.runtime.config.jobs.concurrency)

    // a user whose role grants view_farms.manage steers the farm and sees the host internals
    const role = await s.request('POST', '/roles', { token: s.admin.token, json: { role: { name: 'Farm operators', role_matrix: { 'view_farms.manage': true } } } })
    t.equal(role.status, 201)
    t.equal((await s.request('PUT', `/users/${s.user.id}`, { token: s.admin.token, json: { user: { role_id: role.body.role.id } } })).status, 200)
    const operated = await s.request('PUT', `/view_farms/${node.id}`, { token: s.user.token, json: { viewfarmnode: { name: 'operated' } } })
    t.equal(operated.status, 200, 'the capability opens the commands')
    t.equal(operated.body.viewfarmnode.host_name, hostname(), 'and shows the internals')
    t.equal((await row(s, node.id)).name, 'operated')

  },
  options,
)

onEachDatabase(
  t,
  'view farms: stop drains, start resumes, pause_all and unpause_all, restart without losing a job',
  async (t, s) => {
    const node = await ownNode(s)
    const dir = await scratch(t)
    const gate = path.join(dir, 'gate')
    const marker = path.join(dir, 'marker')

    // stop while a job runs: it finishes, nothing new is claimed
    const running = await enqueue(s, 'stepper', { steps: 2, gate, marker })
    await waitFor('the stepper runs', async () => (await lines(marker)).length === 1)
    const stop = await s.request('POST', `/view_farms/${node.id}/stop`, { token: s.admin.token })
    t.equal(stop.status, 200)
    t.equal(stop.body.viewfarmnode.state, 'stopped')
    t.equal((await row(s, node.id)).state, 'stopped')
    await waitFor('the runner paused', () => s.runtime.runner.state().paused)
    await waitFor('draining reported', async () => (await row(s, node.id)).activity === 'draining')
    const drained = (await s.request('GET', `/view_farms/${node.id}`, { token: s.admin.token })).body.viewfarmnode
    t.equal(drained.running, 1)
    t.equal(drained.running_jobs[0].id, running, 'the running job is listed')
    const waiting = await enqueue(s, 'quick', { value: 'later' })
    await appendFile(gate, '1\n2\n')
    t.equal((await waitForJob(s, s.admin.token, running)).state, 'finished', 'the running job finished on a stopped node')
    await waitFor('idle', async () => (await row(s, node.id)).activity === 'idle')
    t.equal((await jobRow(s, waiting)).state, 'queued', 'a stopped node claims nothing')

    // unpause_all does not start a stopped node
    const unpause = await s.request('POST', '/view_farms/unpause_all', { token: s.admin.token })
    t.equal(unpause.status, 200)
    t.same(unpause.body.view_farm_nodes, [], 'no paused node')
    await twoBeats(s, node.id)
    t.equal((await jobRow(s, waiting)).state, 'queued', 'still stopped')

    const start = await s.request('POST', `/view_farms/${node.id}/start`, { token: s.admin.token })
    t.equal(start.status, 200)
    t.equal(start.body.viewfarmnode.state, 'running')
    t.equal((await waitForJob(s, s.admin.token, waiting)).state, 'finished', 'started: claims again')

    // pause_all: queued jobs stay queued until unpause_all
    const pause = await s.request('POST', '/view_farms/pause_all', { token: s.admin.token })
    t.equal(pause.status, 200)
    t.same(pause.body.view_farm_nodes.map((n: any) => [n.id, n.state]), [[node.id, 'paused']])
    await waitFor('the runner paused', () => s.runtime.runner.state().paused)
    const held = [await enqueue(s, 'quick'), await enqueue(s, 'quick')]
    await twoBeats(s, node.id)
    for (const id of held) t.equal((await jobRow(s, id)).state, 'queued', `job ${id} stays queued while paused`)
    t.same((await s.request('POST', '/view_farms/pause_all', { token: s.admin.token })).body.view_farm_nodes, [], 'pausing again changes nothing')
    const resumed = await s.request('POST', '/view_farms/unpause_all', { token: s.admin.token })
    t.same(resumed.body.view_farm_nodes.map((n: any) => [n.id, n.state]), [[node.id, 'running']])
    for (const id of held) t.equal((await waitForJob(s, s.admin.token, id)).state, 'finished', `job ${id} ran after unpause_all`)

    // restart: drains (the running job finishes, not handed back), reloads, claims again
    await rm(gate, { force: true })
    await rm(marker, { force: true })
    const long = await enqueue(s, 'stepper', { steps: 1, gate, marker })
    await waitFor('the stepper runs', async () => (await lines(marker)).length === 1)
    const restart = await s.request('POST', `/view_farms/${node.id}/restart`, { token: s.admin.token })
    t.equal(restart.status, 202)
    t.equal(restart.body.viewfarmnode.restart_generation, 1)
    await waitFor('restarting reported', async () => (await row(s, node.id)).activity === 'restarting')
    const queuedDuring = await enqueue(s, 'quick')
    t.equal((await jobRow(s, queuedDuring)).state, 'queued', 'nothing claimed while draining')
    await appendFile(gate, '1\n')
    const done = await waitForJob(s, s.admin.token, long)
    t.equal(done.state, 'finished')
    t.same(await lines(marker), ['start 1'], 'the running job ran once, not handed back')
    t.equal((await waitForJob(s, s.admin.token, queuedDuring)).state, 'finished', 'claims again after the restart')
    const restarted = await waitFor('restarted_at', async () => (await s.request('GET', `/view_farms/${node.id}`, { token: s.admin.token })).body.viewfarmnode.restarted_at && (await s.request('GET', `/view_farms/${node.id}`, { token: s.admin.token })).body.viewfarmnode)
    t.equal(restarted.activity === 'claiming' || restarted.activity === 'restarting', true)

    // two restarts at once: both accepted, the generation counts both
    const twice = await Promise.all([1, 2].map(() => s.request('POST', `/view_farms/${node.id}/restart`, { token: s.admin.token })))
    t.same(twice.map((r) => r.status), [202, 202])
    t.equal(Number((await row(s, node.id)).restart_generation), 3)

    // refusals: 401, 403, 404, input on a command
    for (const command of ['start', 'stop', 'restart']) {
      t.equal((await s.request('POST', `/view_farms/${node.id}/${command}`)).status, 401)
      assertProblem(t, await s.request('POST', `/view_farms/${node.id}/${command}`, { token: s.user.token }), 403)
      assertProblem(t, await s.request('POST', `/view_farms/999999/${command}`, { token: s.admin.token }), 404)
      assertProblem(t, await s.request('POST', `/view_farms/${node.id}/${command}`, { token: s.admin.token, json: { force: true } }), 422, ['force'])
    }
    for (const all of ['pause_all', 'unpause_all']) {
      t.equal((await s.request('POST', `/view_farms/${all}`)).status, 401)
      assertProblem(t, await s.request('POST', `/view_farms/${all}`, { token: s.user.token }), 403)
    }
    t.equal((await row(s, node.id)).state, 'running', 'the refusals changed nothing')
  },
  options,
)

onEachDatabase(
  t,
  'view farms: revoke detaches the node and hands its running job back',
  async (t, s) => {
    const node = await ownNode(s)
    const dir = await scratch(t)
    const gate = path.join(dir, 'gate')
    const marker = path.join(dir, 'marker')
    const job = await enqueue(s, 'stepper', { steps: 1, gate, marker })
    await waitFor('the stepper runs', async () => (await lines(marker)).length === 1)

    t.equal((await s.request('DELETE', `/view_farms/revoke?id=${node.id}`)).status, 401)
    assertProblem(t, await s.request('DELETE', `/view_farms/revoke?id=${node.id}`, { token: s.user.token }), 403)
    assertProblem(t, await s.request('DELETE', '/view_farms/revoke', { token: s.admin.token }), 422, ['id'])
    assertProblem(t, await s.request('DELETE', '/view_farms/revoke?id=abc', { token: s.admin.token }), 422, ['id'])
    assertProblem(t, await s.request('DELETE', '/view_farms/revoke?id=999999', { token: s.admin.token }), 404)
    t.ok(await row(s, node.id), 'the refusals changed nothing')

    // two revokes at once: one detaches, the other finds nothing
    const replies = await Promise.all([1, 2].map(() => s.request('DELETE', `/view_farms/revoke?id=${node.id}`, { token: s.admin.token })))
    const statuses = replies.map((r) => r.status).sort()
    t.same(statuses, [200, 404])
    const revoked = replies.find((r) => r.status === 200)!.body.viewfarmnode
    t.equal(revoked.id, node.id)
    t.equal(revoked.state, 'revoked')
    t.same(revoked.released_job_ids, [job], 'the running job was handed back')
    t.notOk(await row(s, node.id), 'the row is gone')
    await waitFor('the runner detached', () => s.runtime.runner.state().detached)
    await waitFor('the handler was stopped', async () => (await lines(marker)).includes('aborted shutdown') || (await lines(marker)).some((l) => l.startsWith('aborted')))
    const back = await jobRow(s, job)
    t.equal(back.state, 'queued', 'queued for another node')
    t.equal(Number(back.attempts), 0, 'the attempt is not counted')
    t.equal(back.locked_by, `released:${s.runtime.runner.workerId}`, 'marked as taken from this runner: its own claims pass it over')
    const later = await enqueue(s, 'quick')
    // two claim rounds of the poll timer later, the job is still waiting
    const round = s.runtime.runner.state().lastRoundAt
    await waitFor('a claim round', () => s.runtime.runner.state().lastRoundAt > round)
    const next = s.runtime.runner.state().lastRoundAt
    await waitFor('another claim round', () => s.runtime.runner.state().lastRoundAt > next)
    t.equal((await jobRow(s, later)).state, 'queued', 'a revoked process claims nothing')
    t.same((await s.request('GET', '/view_farms', { token: s.admin.token })).body.view_farm_nodes, [], 'the farm has no node left')
    t.equal((await s.request('GET', '/view_farms/' + node.id, { token: s.admin.token })).status, 404)
  },
  options,
)
