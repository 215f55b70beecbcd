import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { appendFile, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { assertProblem as assertProblemOn, onEachDatabase, waitFor, type Reply, type TestServer } from '../../core/testing/index.js'
import jobsPlugin, { JOB_TYPE, Typed } from '../fixtures/jobs-plugin.js'
import { JobQueue } from '../../core/jobs/queue.js'
import { EventBus } from '../../core/events.js'

type Tap = typeof t

// subtests are Test objects, not the root TAP the helper is typed for
const assertProblem = (tap: object, reply: Reply, status: number, params?: string[]) => assertProblemOn(tap as Tap, reply, status, params)

// short leases and polls so retries and lapsed leases happen within the test; nothing asserts durations
const options = { extraPlugins: [jobsPlugin], config: { jobs: { leaseMs: 1000, pollMs: 100 } } }
const FINAL = ['finished', 'failed', 'cancelled']

const lines = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean)

async function enqueue(t: Pick<Tap, 'equal'>, s: TestServer, name: string, payload: object = {}, token = s.user.token) {
  const reply = await s.request('POST', `/jobs_test/${name}`, { json: payload, token })
  t.equal(reply.status, 200, `enqueued ${name}`)
  return reply.body.job as { id: number; state: string; action: string; [k: string]: any }
}

const status = (s: TestServer, id: number | string, token = s.user.token, route = 'status'): Promise<Reply> => s.request('GET', `/${route}/${id}`, { token })
const job = async (s: TestServer, id: number) => (await status(s, id, s.admin.token)).body.job
const until = (s: TestServer, id: number, what: string, pred: (job: any) => boolean) =>
  waitFor(`job ${id}: ${what}`, async () => {
    const j = await job(s, id)
    return pred(j) && j
  })
const settled = (s: TestServer, id: number) => until(s, id, 'settled', (j) => FINAL.includes(j.state))

onEachDatabase(
  t,
  'durable jobs',
  async (t, s) => {
    await t.test('a job goes queued → running → finished with its result', async (t) => {
      const seen: { id: number; state: string }[] = []
      const unsubscribe = s.runtime.events.on('jobs.settled', (e) => seen.push(e))
      t.teardown(unsubscribe)
      const queued = await enqueue(t, s, 'quick', { value: 'hello' })
      t.match(queued, { id: Number, action: JOB_TYPE('quick'), state: 'queued', progress: 0, error: null, attempts: 0 })
      const done = await settled(s, queued.id)
      t.match(done, { id: queued.id, state: 'finished', progress: 1, error: null, attempts: 1, result: { echo: 'hello', attempt: 1 } })
      t.ok(done.started_at && done.finished_at, 'start and end recorded')
      t.ok(Date.parse(done.updated_at) >= Date.parse(done.created_at), 'updated after creation')
      t.same(seen.filter((e) => e.id === queued.id).map((e) => e.state), ['finished'], 'settled once')

      // running in between, with progress written by the heartbeat while the handler works
      const dir = s.dataDir
      const gate = path.join(dir, 'gate')
      const marker = path.join(dir, 'stepper-marker')
      const stepper = await enqueue(t, s, 'stepper', { steps: 4, gate, marker })
      const running = await until(s, stepper.id, 'running', (j) => j.state === 'running')
      t.equal(running.progress, 0, 'no progress yet')
      t.equal(running.attempts, 1)
      await appendFile(gate, 'step\n')
      t.match(await until(s, stepper.id, 'progress 0.25', (j) => j.progress === 0.25), { state: 'running' }, 'progress visible while running')
      await appendFile(gate, 'step\n')
      t.match(await until(s, stepper.id, 'progress 0.5', (j) => j.progress === 0.5), { state: 'running' })
      await appendFile(gate, 'step\nstep\n')
      t.match(await settled(s, stepper.id), { state: 'finished', progress: 1, result: { steps: 4 }, attempts: 1 })
      t.same(await lines(marker), ['start 1'], 'ran once')
    })

    await t.test('failed jobs are retried with backoff, and fail for good after maxAttempts', async (t) => {
      const flakyFile = path.join(s.dataDir, 'flaky')
      const brokenFile = path.join(s.dataDir, 'broken')
      const flaky = await enqueue(t, s, 'flaky', { failures: 2, file: flakyFile })
      const broken = await enqueue(t, s, 'broken', { file: brokenFile })

      // after the first failure the job waits in the queue with its error, due later (backoff)
      const retrying = await until(s, flaky.id, 'first failure', (j) => j.attempts === 1 && j.state === 'queued')
      t.equal(retrying.error, 'flaky failure 1', 'the error of the failed attempt is shown')
      const row = await s.runtime.db.knex('jobs').where({ id: flaky.id }).first()
      t.ok(new Date(row.run_at).getTime() > new Date(row.updated_at).getTime(), 'the retry is due after the failure (backoff)')
      t.equal(row.locked_by, null, 'no longer held by a worker')

      t.match(await settled(s, flaky.id), { state: 'finished', attempts: 3, error: null, result: { attempts: 3 }, progress: 1 }, 'succeeded on the third attempt')
      t.same(await lines(flakyFile), ['attempt 1', 'attempt 2', 'attempt 3'])

      t.match(await settled(s, broken.id), { state: 'failed', attempts: 2, error: 'broken on purpose' }, 'failed after maxAttempts')
      t.same(await lines(brokenFile), ['attempt 1', 'attempt 2'], 'not run again after the last attempt')

      // a limit chosen at enqueue beats the definition's
      const onceFile = path.join(s.dataDir, 'once')
      const once = await s.runtime.jobs.enqueue(JOB_TYPE('broken'), { file: onceFile }, { userId: s.user.id, maxAttempts: 1 })
      t.match(await settled(s, once.id), { state: 'failed', attempts: 1, error: 'broken on purpose' }, 'failed after its own maxAttempts')
      t.same(await lines(onceFile), ['attempt 1'])
    })

    await t.test('cancellation of queued and running jobs', async (t) => {
      // a queued job (due in an hour) ends at once
      const later = await s.runtime.jobs.enqueue(JOB_TYPE('quick'), {}, { userId: s.user.id, runAt: new Date(Date.now() + 3_600_000) })
      const cancelled = await s.request('DELETE', `/status/${later.id}`, { token: s.user.token })
      t.equal(cancelled.status, 200)
      t.match(cancelled.body.job, { id: later.id, state: 'cancelled' }, 'a queued job is cancelled immediately')
      t.ok(cancelled.body.job.finished_at)

      // a running job is asked to stop: its handler sees the abort signal and the job ends cancelled
      const gate = path.join(s.dataDir, 'cancel-gate')
      const marker = path.join(s.dataDir, 'cancel-marker')
      const stepper = await enqueue(t, s, 'stepper', { steps: 2, gate, marker })
      await until(s, stepper.id, 'running', (j) => j.state === 'running')
      await waitFor('the handler started', async () => (await lines(marker)).includes('start 1'))
      const asked = await s.request('DELETE', `/status/${stepper.id}`, { token: s.user.token })
      t.equal(asked.status, 200)
      t.equal(asked.body.job.cancel_requested, true, 'cancellation requested')
      t.match(await settled(s, stepper.id), { state: 'cancelled', attempts: 1 })
      t.same(await lines(marker), ['start 1', 'aborted cancelled'], 'the handler saw the abort signal')

      // cancelling a finished job changes nothing
      const quick = await enqueue(t, s, 'quick')
      await settled(s, quick.id)
      const again = await s.request('DELETE', `/status/${quick.id}`, { token: s.user.token })
      t.match(again.body.job, { state: 'finished', cancel_requested: false })
    })

    await t.test('CPU work in a piscina worker', async (t) => {
      const file = path.join(s.dataDir, 'media.bin')
      const content = randomBytes(3 << 20)
      await writeFile(file, content)
      const hash = await enqueue(t, s, 'hash', { file })
      const done = await settled(s, hash.id)
      t.match(done, { state: 'finished', result: { sha256: createHash('sha256').update(content).digest('hex'), thread: true } }, 'the right hash, from a worker thread')
    })


    await t.test('enqueueMany: a thousand jobs in a few statements, each run exactly once', async (t) => {
      const file = path.join(s.dataDir, 'many.log')
      await writeFile(file, '')
      const rows = await s.runtime.jobs.enqueueMany(Array.from({ length: 1100 }, (_, i) => ({ type: JOB_TYPE('append'), payload: { file }, options: { userId: s.user.id, priority: i % 3 } })))
      t.equal(rows.length, 1100, 'a row per job')
      t.equal(new Set(rows.map((r) => r.id)).size, 1100, 'distinct ids')
      t.match(rows[0], { type: JOB_TYPE('append'), state: 'queued', kind: 'generic', user_id: s.user.id, attempts: 0, payload: { file } })
      t.same([...new Set(rows.map((r) => r.priority))].sort(), [0, 1, 2], 'options per job')
      const ran = await waitFor('all 1100 jobs', async () => {
        const l = await lines(file)
        return l.length >= 1100 && l
      }, 120_000)
      const ids = ran.map((l) => Number(l.split(' ')[0]))
      t.equal(new Set(ids).size, 1100, 'every job ran once')
      t.same(new Set(ids), new Set(rows.map((r) => r.id)), 'the enqueued jobs ran')
      // the handler's line comes before its outcome's write (batched with others): wait for those
      const unfinished = async () => Number((await s.runtime.db.knex('jobs').where({ type: JOB_TYPE('append') }).whereNot('state', 'finished').count({ n: '*' }))[0].n)
      await waitFor('all finished', async () => (await unfinished()) === 0, 30_000).catch(() => {})
      t.equal(await unfinished(), 0, 'all finished')
      t.same(await s.runtime.jobs.enqueueMany([]), [], 'nothing to enqueue is no statement')
    })
    await t.test('a payload that does not match its defineJob schema is refused, and nothing is written', async (t) => {
      const count = async () => Number((await s.runtime.db.knex('jobs').where({ type: Typed.type }).count({ n: '*' }))[0].n)
      const before = await count()
      const refused = (p: Promise<unknown>) => p.then(() => 'accepted', (err) => err)
      t.match(await refused(s.runtime.jobs.enqueue(Typed, { n: 'three' } as any)), { status: 422, code: 'invalid_parameters', extra: { errors: [{ param: 'payload[n]' }] } }, 'a wrong type names the field')
      t.match(await refused(s.runtime.jobs.enqueue(Typed, { n: 1, extra: true } as any)), { status: 422, extra: { errors: [{ param: 'payload[extra]' }] } }, 'an undeclared field')
      t.match(await refused(s.runtime.jobs.enqueue(Typed.type, {})), { status: 422, extra: { errors: [{ param: 'payload[n]' }] } }, 'by its name too: a missing field')
      t.match(await refused(s.runtime.jobs.enqueueMany([{ type: Typed, payload: { n: 1 } }, { type: Typed, payload: { n: -1 } }])), { status: 422 }, 'one bad payload in a batch')
      t.equal(await count(), before, 'no row written')
      const ok = await s.runtime.jobs.enqueue(Typed, { n: 21 }, { userId: s.user.id })
      t.match(await settled(s, ok.id), { state: 'finished', result: { doubled: 42 } }, 'a matching payload runs')
    })

    await t.test('jobs enqueued in a transaction exist only if it commits, and run once it has', async (t) => {
      const knex = s.runtime.db.knex
      const rolledBack = await knex
        .transaction(async (trx) => {
          const job = await s.runtime.jobs.enqueue(Typed, { n: 1 }, { trx })
          await s.runtime.jobs.enqueueMany([{ type: Typed, payload: { n: 2 } }], { trx })
          throw Object.assign(new Error('the change fails'), { jobId: job.id })
        })
        .catch((err) => err.jobId as number)
      t.notOk(await knex('jobs').where({ id: rolledBack }).first('id'), 'rolled back with the change: no job')
      let ids: number[] = []
      await knex.transaction(async (trx) => {
        const one = await s.runtime.jobs.enqueue(Typed, { n: 3 }, { trx, userId: s.user.id })
        const [two] = await s.runtime.jobs.enqueueMany([{ type: Typed, payload: { n: 4 }, options: { userId: s.user.id } }], { trx })
        ids = [one.id, two.id]
        // another connection does not see them before the commit (SQLite has one writer: checked by the rollback above)
        if (s.db === 'postgresql') t.equal((await s.runtime.db.knex('jobs').whereIn('id', ids)).length, 0, 'not visible before the commit')
      })
      t.match(await settled(s, ids[0]), { state: 'finished', result: { doubled: 6 } }, 'committed: the first runs')
      t.match(await settled(s, ids[1]), { state: 'finished', result: { doubled: 8 } }, 'and the batch')
    })

    await t.test('claim tokens and faults: held leases are not swept, hand-backs count no attempt', async (t) => {
      // a type no runner of this server claims: the queue alone, as the runner drives it. The server's
      // own runner is paused meanwhile: its sweep fails lapsed last attempts of any type, and would
      // race the claims below (it did, once in a loaded PostgreSQL run)
      s.runtime.runner.pause()
      t.teardown(() => s.runtime.runner.resume())
      const type = 'merge_test.unclaimed'
      const knex = s.runtime.db.knex
      const queue = new JobQueue(knex, s.db, new EventBus(), { maxAttempts: 5 })
      const row = async (id: number) => (await queue.get(id))!
      // run_at is not part of JobRow: read as stored (a Date on PostgreSQL, epoch ms on SQLite)
      const dueAt = async (id: number) => new Date((await knex('jobs').where({ id }).first()).run_at).getTime()
      const [a, b] = await queue.enqueueMany([
        { type, kind: 'generic', payload: {} },
        { type, kind: 'generic', payload: {}, options: { maxAttempts: 1 } },
      ])
      // claimed with a lease that lapsed at once: what an outage longer than the lease leaves behind
      t.equal((await queue.claim('w1:1', [type], 10, -1000, false)).length, 2, 'both claimed')
      t.same(await queue.claim('w1:2', [type], 10, 1000, true, ['w1:1']), [], 'the sweep leaves leases the runner still holds')
      t.match(await row(b.id), { state: 'running', locked_by: 'w1:1', attempts: 1 }, 'not failed on its last attempt either')

      // a fault hands a job back: queued, due later, the attempt not counted
      const later = new Date(Date.now() + 3_600_000)
      await queue.release([{ id: a.id, token: 'w1:1', runAt: later }])
      const released = await row(a.id)
      t.match(released, { state: 'queued', attempts: 0, locked_by: null }, 'released without counting the attempt')
      t.ok(Math.abs((await dueAt(a.id)) - later.getTime()) < 1000, 'due at runAt')
      t.same(await queue.settleMany([{ id: b.id, token: 'nobody', state: 'finished' }]), [false], 'another token settles nothing')
      t.same(await queue.settleMany([{ id: b.id, token: 'w1:1', state: 'queued', runAt: later, uncount: true }]), [true], 'a hand-back in a completion batch')
      const handed = await row(b.id)
      t.match(handed, { state: 'queued', attempts: 0, locked_by: null, finished_at: null }, 'queued, no attempt counted')
      t.ok(Math.abs((await dueAt(b.id)) - later.getTime()) < 1000, 'due at runAt')

      // leases that lapse and are not held: the sweep fails the one on its last attempt and takes the other
      await knex('jobs').whereIn('id', [a.id, b.id]).update({ run_at: new Date(Date.now() - 1000) })
      t.equal((await queue.claim('w1:3', [type], 10, -1000, false)).length, 2)
      const swept = await queue.claim('w2:1', [type], 10, 1000, true, ['w2:0'])
      t.same(swept.map((j) => j.id), [a.id], 'the lapsed lease is taken by another claim')
      t.match(await row(a.id), { state: 'running', locked_by: 'w2:1', attempts: 2 })
      t.match(await row(b.id), { state: 'failed', locked_by: null }, 'a lapsed last attempt fails')

      // a detached runner's jobs go to the others: its own claims pass them over until it learns it
      // was detached (the farm's revoke; once in CI the revoked process took its job back at once)
      t.same(await queue.releaseWorker('w2'), [a.id], 'handed back from runner w2')
      t.match(await row(a.id), { state: 'queued', attempts: 1 })
      t.same(await queue.claim('w2:2', [type], 10, 1000, false), [], 'not by the runner it was taken from')
      t.same((await queue.claim('w3:1', [type], 10, 1000, false)).map((j) => j.id), [a.id], 'by another')
      t.match(await row(a.id), { state: 'running', locked_by: 'w3:1', attempts: 2 })
      await knex('jobs').whereIn('id', [a.id, b.id]).delete()
    })

    if (s.db === 'postgresql') {
      await t.test('the NOTIFY listener comes back after its connection dies', async (t) => {
        const knex = s.runtime.db.knex
        const listeners = async (): Promise<number[]> =>
          (await knex.raw(`select pid from pg_stat_activity where datname = current_database() and query = 'listen mamkit_jobs'`)).rows.map((r: any) => r.pid)
        const [before] = await waitFor('a listener', async () => (await listeners()).length > 0 && listeners())
        await knex.raw('select pg_terminate_backend(?)', [before])
        const after = await waitFor('a new listener', async () => {
          const pids = await listeners()
          return pids.length > 0 && !pids.includes(before) && pids
        })
        t.equal(after.length, 1, 'one listener again')
        const quick = await enqueue(t, s, 'quick')
        t.match(await settled(s, quick.id), { state: 'finished' }, 'jobs still run')
      })
    }

    await t.test('status endpoints: kinds, fields, visibility, errors', async (t) => {
      const asset = await enqueue(t, s, 'asset')
      const copy = await enqueue(t, s, 'copy_to')
      const plain = await enqueue(t, s, 'quick')
      for (const j of [asset, copy, plain]) await settled(s, j.id)

      const shown = await status(s, asset.id, s.user.token, 'asset_status')
      t.equal(shown.status, 200)
      const body = shown.body.job
      for (const field of ['id', 'action', 'state', 'error', 'progress', 'created_at', 'updated_at', 'success', 'failure']) t.ok(field in body, `job.${field}`)
      t.match(body, { id: asset.id, action: JOB_TYPE('asset'), state: 'finished', error: null, progress: 1, success: 3, failure: 1 })
      t.match(body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, 'ISO 8601 timestamps')
      t.match(body.updated_at, /^\d{4}-\d\d-\d\dT/)
      t.match((await status(s, copy.id, s.user.token, 'copy_to_status')).body.job, { id: copy.id, action: JOB_TYPE('copy_to'), state: 'finished' })

      // each endpoint shows its own kind; /status shows every kind
      for (const j of [asset, copy, plain]) t.equal((await status(s, j.id)).status, 200, `/status/${j.id}`)
      assertProblem(t, await status(s, copy.id, s.user.token, 'asset_status'), 404)
      assertProblem(t, await status(s, plain.id, s.user.token, 'asset_status'), 404)
      assertProblem(t, await status(s, asset.id, s.user.token, 'copy_to_status'), 404)
      assertProblem(t, await status(s, plain.id, s.user.token, 'copy_to_status'), 404)

      // only the user who started a job, and administrators, see it
      const other = await s.createUser('other-editor')
      assertProblem(t, await status(s, plain.id, other.token), 404)
      assertProblem(t, await status(s, asset.id, other.token, 'asset_status'), 404)
      assertProblem(t, await status(s, copy.id, other.token, 'copy_to_status'), 404)
      assertProblem(t, await s.request('DELETE', `/status/${plain.id}`, { token: other.token }), 404)
      t.equal((await status(s, plain.id, s.admin.token)).status, 200, 'an administrator sees every job')
      t.equal((await status(s, asset.id, s.admin.token, 'asset_status')).status, 200)
      const own = await enqueue(t, s, 'quick', {}, other.token)
      t.equal((await status(s, own.id, other.token)).status, 200, 'the other user sees their own job')
      assertProblem(t, await status(s, own.id), 404, undefined)

      for (const route of ['status', 'asset_status', 'copy_to_status']) {
        assertProblem(t, await s.request('GET', `/${route}/${plain.id}`), 401)
        assertProblem(t, await status(s, 999_999, s.admin.token, route), 404)
        assertProblem(t, await status(s, 'abc', s.admin.token, route), 422, ['id'])
        assertProblem(t, await status(s, '1.5', s.admin.token, route), 422, ['id'])
      }
      assertProblem(t, await s.request('DELETE', `/status/${plain.id}`), 401)
      assertProblem(t, await s.request('DELETE', '/status/999999', { token: s.admin.token }), 404)
      assertProblem(t, await s.request('DELETE', '/status/abc', { token: s.admin.token }), 422, ['id'])
      assertProblem(t, await s.request('POST', '/jobs_test/quick', { json: {} }), 401)
    })
  },
  options,
)
