import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, createProject, databaseKinds, onEachDatabase, scratchDatabase, startTestServer, waitFor, type TestServer } from '../../../core/testing/index.js'
import type { Scheduler } from '../../../plugins/schedules/index.js'
import { nextRuns } from '../../../plugins/schedules/index.js'
import { column } from '../../../core/index.js'
import { diskStrategy, targetRoot } from '../strategies/fixtures.js'

const dir = await targetRoot(t)
/** no timer: the tests tick by hand, so nothing fires behind their back */
const manual = { config: { plugins: { strategies: { roots: [dir] }, schedules: { tickMs: 0 } } } }

const scheduler = (s: TestServer) => s.runtime.container.resolve<Scheduler>('schedules.scheduler')
const knex = (s: TestServer) => s.runtime.db.knex
const count = async (s: TestServer, table: string, where: Record<string, unknown> = {}) => Number((await knex(s)(table).where(where).count({ n: '*' }))[0].n)
const DAY = 86_400_000

async function makeSchedule(s: TestServer, fields: Record<string, unknown>) {
  const r = await s.request('POST', '/schedules', { token: s.admin.token, json: { schedule: { cron: '0 3 * * *', time_zone: 'Europe/Berlin', ...fields } } })
  if (r.status !== 201) throw new Error(`schedule: ${r.status} ${r.text}`)
  return r.body.schedule
}

/** as if the process had been down since `ago` ms: the schedule's slot lies in the past */
const overdue = (s: TestServer, id: number, ago: number) => knex(s)('schedules').where({ id }).update({ next_run_at: new Date(Date.now() - ago) })

onEachDatabase(
  t,
  'schedules CRUD: admins only, croner validation with time zones, next run times, 404, name race',
  async (t, s) => {
    const backup = await diskStrategy(s, 'backup_strategies', path.join(dir, `${s.db}-crud`))
    const archive = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-crud-archive`))
    const body = { schedule: { name: 'Nightly', cron: '30 2 * * *', time_zone: 'America/New_York', strategy_type: 'backup', strategy_id: backup.id, selection: { library: false } } }

    assertProblem(t, await s.request('POST', '/schedules', { json: body }), 401)
    assertProblem(t, await s.request('POST', '/schedules', { token: s.user.token, json: body }), 403)
    assertProblem(t, await s.request('GET', '/schedules', { token: s.user.token }), 403)
    t.equal(await count(s, 'schedules'), 0, 'refusals wrote nothing')

    const made = await s.request('POST', '/schedules', { token: s.admin.token, json: body })
    t.equal(made.status, 201, made.text)
    const sc = made.body.schedule
    t.match(sc, { name: 'Nightly', cron: '30 2 * * *', time_zone: 'America/New_York', strategy_type: 'backup', strategy_id: backup.id, selection: { library: false }, enabled: true, user_id: s.admin.id, last_run_at: null, last_status: null, last_job_id: null })
    const expected = nextRuns('30 2 * * *', 'America/New_York', new Date(), 3).map((d) => d.toISOString())
    t.equal(sc.next_run_at, expected[0], 'next run: 02:30 in New York')
    t.same(sc.next_runs, expected, 'the next three run times are shown')
    t.match(new Date(sc.next_run_at).getUTCHours(), /^(6|7)$/, '02:30 New York is 06:30 or 07:30 UTC')
    const row = await knex(s)('schedules').where({ id: sc.id }).first()
    t.equal(column.date(row.next_run_at)!.toISOString(), expected[0], 'next_run_at stored')

    // invalid input: 422 naming the parameter, nothing written
    const bad = async (schedule: Record<string, unknown>, params: string[]) => {
      assertProblem(t, await s.request('POST', '/schedules', { token: s.admin.token, json: { schedule: { ...body.schedule, name: 'Other', ...schedule } } }), 422, params)
    }
    await bad({ cron: 'every night' }, ['schedule[cron]'])
    await bad({ cron: '61 * * * *' }, ['schedule[cron]'])
    await bad({ cron: '0 0 30 2 *' }, ['schedule[cron]'])
    await bad({ time_zone: 'Mars/Olympus_Mons' }, ['schedule[time_zone]'])
    await bad({ strategy_type: 'tape' }, ['schedule[strategy_type]'])
    await bad({ strategy_id: archive.id }, ['schedule[strategy_id]'])
    await bad({ strategy_id: 999999 }, ['schedule[strategy_id]'])
    await bad({ selection: {} }, ['schedule[selection]'])
    await bad({ selection: { status_flag_id: 4242 } }, ['schedule[selection][status_flag_id]'])
    await bad({ selection: { older_than_days: -1 } }, ['schedule[selection][older_than_days]'])
    await bad({ selection: { everything: true } }, ['schedule[selection][everything]'])
    assertProblem(t, await s.request('POST', '/schedules', { token: s.admin.token, json: { schedule: { name: 'Empty' } } }), 422, ['schedule[cron]', 'schedule[strategy_type]', 'schedule[strategy_id]', 'schedule[selection]'])
    // sent at the top level, named as sent
    assertProblem(t, await s.request('POST', '/schedules', { token: s.admin.token, json: { ...body.schedule, name: 'Flat', cron: 'x' } }), 422, ['cron'])
    t.equal(await count(s, 'schedules'), 1, 'no refused schedule was written')

    // a form, as older clients send it; the zone defaults to UTC
    const form = await s.request('POST', '/schedules', {
      token: s.admin.token,
      form: { 'schedule[name]': 'Weekly archive', 'schedule[cron]': '0 4 * * 0', 'schedule[strategy_type]': 'archive', 'schedule[strategy_id]': String(archive.id), 'schedule[selection][older_than_days]': '90' },
    })
    t.equal(form.status, 201, form.text)
    t.match(form.body.schedule, { time_zone: 'UTC', strategy_type: 'archive', selection: { older_than_days: 90 } })
    t.equal(new Date(form.body.schedule.next_run_at).getUTCDay(), 0, 'weekly on Sunday')

    const list = await s.request('GET', '/schedules', { token: s.admin.token })
    t.same(list.body.schedules.map((x: any) => x.name), ['Nightly', 'Weekly archive'])
    const shown = await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })
    t.equal(shown.body.schedule.name, 'Nightly')
    t.same(shown.body.schedule.runs, [], 'no runs yet')
    assertProblem(t, await s.request('GET', '/schedules/999999', { token: s.admin.token }), 404)

    // a new cron moves the next run; switched off there is none; back on it is computed again
    const moved = await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { schedule: { cron: '*/15 * * * * *', time_zone: 'UTC' } } })
    t.equal(moved.status, 200, moved.text)
    t.ok(new Date(moved.body.schedule.next_run_at).getTime() - Date.now() <= 15_000, 'a six-field cron: next run within 15 s')
    const off = await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { enabled: false } })
    t.match(off.body.schedule, { enabled: false, next_run_at: null, next_runs: [] })
    const on = await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { schedule: { enabled: true } } })
    t.ok(on.body.schedule.next_run_at, 'on again: a next run')
    assertProblem(t, await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { schedule: { cron: 'nope' } } }), 422, ['schedule[cron]'])
    assertProblem(t, await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { schedule: { name: 'Weekly archive' } } }), 409, ['schedule[name]'])
    assertProblem(t, await s.request('PUT', `/schedules/${sc.id}`, { token: s.user.token, json: { schedule: { name: 'Mine' } } }), 403)
    assertProblem(t, await s.request('PUT', '/schedules/999999', { token: s.admin.token, json: { schedule: { name: 'X' } } }), 404)
    t.equal((await knex(s)('schedules').where({ id: sc.id }).first('cron')).cron, '*/15 * * * * *', 'refused changes left the row alone')

    // two creations with one name at once: one 201, one 409
    const racing = await Promise.all([1, 2].map(() => s.request('POST', '/schedules', { token: s.admin.token, json: { schedule: { ...body.schedule, name: 'Twin' } } })))
    t.same(racing.map((r) => r.status).sort(), [201, 409])
    t.equal(await count(s, 'schedules', { name: 'Twin' }), 1)

    assertProblem(t, await s.request('DELETE', `/schedules/${sc.id}`, { token: s.user.token }), 403)
    const gone = await s.request('DELETE', `/schedules/${sc.id}`, { token: s.admin.token })
    t.equal(gone.status, 200)
    t.equal(gone.body.schedule.id, sc.id)
    t.equal(await count(s, 'schedules', { id: sc.id }), 0)
    assertProblem(t, await s.request('DELETE', `/schedules/${sc.id}`, { token: s.admin.token }), 404)
  },
  manual,
)

onEachDatabase(
  t,
  'firing: two ticks at once run a due schedule once, missed slots run once, the selection is taken at run time, running projects are skipped',
  async (t, s) => {
    const backup = await diskStrategy(s, 'backup_strategies', path.join(dir, `${s.db}-fire`))
    const flag = (await s.request('POST', '/status_flags', { token: s.admin.token, json: { status_flag: { name: 'To back up', color: '#00aa00' } } })).body.status_flag
    const a = await createProject(s, s.user, 'Flagged A')
    const b = await createProject(s, s.user, 'Unflagged B')
    const c = await createProject(s, s.user, 'Flagged later C')
    t.equal((await s.request('PUT', `/projects/${a.id}/status_flags/${flag.id}`, { token: s.user.token, json: { set: true } })).status, 200)
    const sc = await makeSchedule(s, { name: 'Flagged backups', strategy_type: 'backup', strategy_id: backup.id, selection: { status_flag_id: flag.id } })

    t.same((await scheduler(s).tick()).ran, [], 'not due yet: nothing runs')
    // down for three days over a daily slot: one run, not three
    await overdue(s, sc.id, 3 * DAY)
    const ticks = await Promise.all([scheduler(s).tick(), scheduler(s).tick()])
    t.same(ticks.flatMap((x) => x.ran), [sc.id], 'two ticks at once: one claimed the run')
    t.equal(await count(s, 'schedule_runs', { schedule_id: sc.id }), 1, 'one run recorded')
    const jobs = await knex(s)('jobs').where({ type: 'strategies.backup' }).select('id', 'project_id', 'user_id', 'payload', 'state')
    t.equal(jobs.length, 1, 'one backup job')
    t.equal(Number(jobs[0].project_id), a.id, 'of the flagged project only')
    t.equal(Number(jobs[0].user_id), s.admin.id, 'queued for the administrator who made the schedule')
    const payload = typeof jobs[0].payload === 'string' ? JSON.parse(jobs[0].payload) : jobs[0].payload
    t.same(payload, { strategyId: backup.id, projectId: a.id })
    const shown = (await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })).body.schedule
    t.match(shown, { last_status: 'queued', last_job_id: Number(jobs[0].id), last_error: null })
    t.ok(new Date(shown.next_run_at).getTime() > Date.now(), 'the next run is the next slot from now, not a missed one')
    t.equal(shown.next_run_at, nextRuns('0 3 * * *', 'Europe/Berlin', new Date())[0].toISOString())
    t.match(shown.runs, [{ status: 'queued', projects: 1, queued: 1, skipped: 0, outcomes: [{ project_id: a.id, job_id: Number(jobs[0].id) }] }])
    t.same((await scheduler(s).tick()).ran, [], 'claimed: not due again')

    // the selection is evaluated when the run fires: C flagged since; A's backup has not run yet (no overlap)
    t.equal((await s.request('PUT', `/projects/${c.id}/status_flags/${flag.id}`, { token: s.user.token, json: { set: true } })).status, 200)
    await overdue(s, sc.id, 60_000)
    t.same((await scheduler(s).tick()).ran, [sc.id])
    const second = (await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })).body.schedule
    t.equal(second.last_status, 'partial')
    const run = second.runs[0]
    t.match(run, { projects: 2, queued: 1, skipped: 1 })
    t.match(run.outcomes.find((o: any) => o.project_id === a.id), { skipped: /still queued or running/ })
    t.ok(run.outcomes.find((o: any) => o.project_id === c.id).job_id, 'C got its backup')
    t.equal(await count(s, 'jobs', { type: 'strategies.backup', project_id: a.id }), 1, 'no second backup of A beside the first')
    t.equal(await count(s, 'jobs', { type: 'strategies.backup', project_id: b.id }), 0, 'B never selected')

    // a deleted strategy: the run fails saying so, and the schedule stays
    await knex(s)('strategies').where({ id: backup.id }).delete()
    await overdue(s, sc.id, 1000)
    t.same((await scheduler(s).tick()).ran, [sc.id])
    const failed = (await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })).body.schedule
    t.match(failed, { strategy_id: null, last_status: 'failed', last_error: /strategy of this schedule was deleted/ })

    // switched off: not fired even when its slot has passed
    await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { enabled: false } })
    await knex(s)('schedules').where({ id: sc.id }).update({ enabled: false, next_run_at: new Date(Date.now() - 1000) })
    t.same((await scheduler(s).tick()).ran, [])
  },
  { ...manual, runJobs: false },
)

onEachDatabase(
  t,
  'archive schedules: refused projects are skipped with their reason (frozen, archived), the others get an archive',
  async (t, s) => {
    const archive = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-archive`))
    const old = await createProject(s, s.user, 'Old')
    const frozen = await createProject(s, s.user, 'Old frozen')
    const fresh = await createProject(s, s.user, 'Fresh')
    const longAgo = new Date(Date.now() - 400 * DAY)
    await knex(s)('projects').whereIn('id', [old.id, frozen.id]).update({ created_at: longAgo })
    t.equal((await s.request('PUT', `/projects/${frozen.id}/freeze`, { token: s.user.token })).status, 200)
    const sc = await makeSchedule(s, { name: 'Archive the old', strategy_type: 'archive', strategy_id: archive.id, selection: { older_than_days: 365 } })
    await overdue(s, sc.id, 1000)
    t.same((await scheduler(s).tick()).ran, [sc.id])
    const run = (await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })).body.schedule.runs[0]
    t.match(run, { status: 'partial', projects: 2, queued: 1, skipped: 1 })
    t.match(run.outcomes.find((o: any) => o.project_id === frozen.id), { skipped: /frozen/ })
    const state = await knex(s)('archive_states').where({ project_id: old.id }).first()
    t.match(state, { state: 'queued', direction: 'archive' })
    t.equal(Number(state.archive_strategy_id), archive.id)
    t.equal(Number(state.job_id), run.outcomes.find((o: any) => o.project_id === old.id).job_id, 'the state row names the queued archive job')
    t.equal(await count(s, 'archive_states', { project_id: fresh.id }), 0, 'a project used lately is not taken')
    // last used long ago counts too, used lately keeps it
    await knex(s)('projects').where({ id: fresh.id }).update({ created_at: longAgo, last_used_at: new Date() })
    await overdue(s, sc.id, 1000)
    await scheduler(s).tick()
    const again = (await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })).body.schedule.runs[0]
    t.match(again, { status: 'skipped', queued: 0 })
    t.match(again.outcomes.find((o: any) => o.project_id === old.id), { skipped: /queued|cannot be archived/ })
    t.notOk(again.outcomes.find((o: any) => o.project_id === fresh.id), 'used yesterday: not old')
  },
  { ...manual, runJobs: false },
)

onEachDatabase(
  t,
  'the timer fires a six-field cron by itself and its jobs run',
  async (t, s) => {
    const backup = await diskStrategy(s, 'backup_strategies', path.join(dir, `${s.db}-timer`))
    const p = await createProject(s, s.user, 'Timed')
    const sc = await makeSchedule(s, { name: 'Every second', cron: '* * * * * *', time_zone: 'UTC', strategy_type: 'backup', strategy_id: backup.id, selection: { project_ids: [p.id] } })
    const job = await waitFor('a backup queued by the timer', async () => (await knex(s)('jobs').where({ type: 'strategies.backup', project_id: p.id }).first('id'))?.id)
    const done = await waitFor('the backup job to end', async () => {
      const r = await knex(s)('jobs').where({ id: job }).first('state', 'error')
      return ['finished', 'failed'].includes(r.state) ? r : null
    })
    t.equal(done.state, 'finished', done.error ?? '')
    t.ok((await count(s, 'schedule_runs', { schedule_id: sc.id })) >= 1, 'runs recorded')
    await s.request('PUT', `/schedules/${sc.id}`, { token: s.admin.token, json: { enabled: false } })
  },
  { config: { plugins: { strategies: { roots: [dir] }, schedules: { tickMs: 100 } } } },
)

// a restart after downtime: the run missed meanwhile fires once at start, then the schedule keeps its rhythm
for (const db of databaseKinds()) {
  t.test(`a run missed while no process was up fires once at start [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-schedules-'))
    const scratch = await scratchDatabase(db)
    t.teardown(async () => {
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    // an hour's tick: only the tick at start can fire in this test
    const config = { plugins: { strategies: { roots: [dir] }, schedules: { tickMs: 3_600_000 } } }
    const first = await startTestServer({ db, dataDir, databaseUrl: scratch.databaseUrl, config, runJobs: false })
    const backup = await diskStrategy(first, 'backup_strategies', path.join(dir, `${db}-restart`))
    const p = await createProject(first, first.user, 'Restarted')
    const sc = await makeSchedule(first, { name: 'Hourly', cron: '0 * * * *', time_zone: 'UTC', strategy_type: 'backup', strategy_id: backup.id, selection: { project_ids: [p.id] } })
    await overdue(first, sc.id, 5 * 3_600_000) // five hourly slots missed
    await first.close()

    const second = await startTestServer({ db, dataDir, databaseUrl: scratch.databaseUrl, config, runJobs: false })
    t.teardown(() => second.close())
    await waitFor('the missed run', async () => (await count(second, 'schedule_runs', { schedule_id: sc.id })) === 1)
    await waitFor('its end', async () => (await knex(second)('schedules').where({ id: sc.id }).first('last_status')).last_status !== 'running')
    t.equal(await count(second, 'schedule_runs', { schedule_id: sc.id }), 1, 'five missed slots: one run')
    t.equal(await count(second, 'jobs', { type: 'strategies.backup', project_id: p.id }), 1, 'one backup queued')
    const shown = (await second.request('GET', `/schedules/${sc.id}`, { token: second.admin.token })).body.schedule
    t.equal(shown.last_status, 'queued')
    t.ok(new Date(shown.next_run_at).getTime() > Date.now(), 'next run from now')
    t.ok(new Date(shown.next_run_at).getTime() - Date.now() <= 3_600_000, 'within the hour')
  })
}

onEachDatabase(
  t,
  'tier schedules: a storage instead of a strategy; a run queues moves, skipping frozen projects',
  async (t, s) => {
    const backup = await diskStrategy(s, 'backup_strategies', path.join(dir, `${s.db}-tier`))
    const a = await createProject(s, s.user, 'Tier A')
    const frozen = await createProject(s, s.user, 'Tier frozen')
    t.equal((await s.request('PUT', `/projects/${frozen.id}/freeze`, { token: s.user.token })).status, 200)
    const body = { name: 'To slow disks', cron: '0 1 * * 6', strategy_type: 'tier', selection: { project_ids: [a.id, frozen.id] } }
    const bad = async (schedule: Record<string, unknown>, params: string[]) =>
      assertProblem(t, await s.request('POST', '/schedules', { token: s.admin.token, json: { schedule: { ...body, ...schedule } } }), 422, params)
    await bad({}, ['schedule[storage]'])
    await bad({ storage: 'tape' }, ['schedule[storage]'])
    await bad({ storage: 'slow', strategy_id: backup.id }, ['schedule[strategy_id]'])
    await bad({ strategy_type: 'backup', strategy_id: backup.id, storage: 'slow' }, ['schedule[storage]'])
    const sc = await makeSchedule(s, { ...body, storage: 'slow' })
    t.match(sc, { strategy_type: 'tier', storage: 'slow', strategy_id: null })
    await overdue(s, sc.id, 1000)
    t.same((await scheduler(s).tick()).ran, [sc.id])
    const run = (await s.request('GET', `/schedules/${sc.id}`, { token: s.admin.token })).body.schedule.runs[0]
    t.match(run, { status: 'partial', queued: 1, skipped: 1 })
    t.match(run.outcomes.find((o: any) => o.project_id === frozen.id), { skipped: /frozen/ })
    const job = await knex(s)('jobs').where({ type: 'strategies.tier', project_id: a.id }).first('payload')
    t.same(typeof job.payload === 'string' ? JSON.parse(job.payload) : job.payload, { projectId: a.id, storage: 'slow' })
  },
  { runJobs: false, config: { plugins: { strategies: { roots: [dir] }, schedules: { tickMs: 0 }, storage: { storages: { slow: path.join(dir, 'slow-storage') } } } } },
)
