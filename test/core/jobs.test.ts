import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { appendFile, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { assertProblem as assertProblemOn, onEachDatabase, type Reply, type TestServer } from '../helpers/index.js'
import jobsPlugin, { JOB_TYPE } from '../fixtures/jobs-plugin.js'

type Tap = typeof t

// subtests are Test objects, not the root TAP the helper is typed for
const assertProblem = (tap: object, reply: Reply, status: number, params?: string[]) => assertProblemOn(tap as Tap, reply, status, params)

// short leases and polls so retries and lapsed leases happen within the test; nothing asserts durations
const options = { extraPlugins: [jobsPlugin], config: { jobs: { leaseMs: 1000, pollMs: 100 } } }
const FINAL = ['finished', 'failed', 'cancelled']

/** polls until `check` returns something truthy; fails after a generous overall timeout */
async function waitFor<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

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
      const [{ n }] = await s.runtime.db.knex('jobs').where({ type: JOB_TYPE('append') }).whereNot('state', 'finished').count({ n: '*' })
      t.equal(Number(n), 0, 'all finished')
      t.same(await s.runtime.jobs.enqueueMany([]), [], 'nothing to enqueue is no statement')
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
