/**
 * Recurring jobs (`api.jobs.schedule`): one chain of runs per type, each run queued by the end of
 * the one before in the same transaction, a chain that a cancelled run or a fresh database does
 * not break, and two processes starting on one database that queue one run, not two.
 */
import t from 'tap'
import { appendFile, readFile, rm } from 'node:fs/promises'
import path from 'node:path'
import { coreServices, defineJob, definePlugin, Type } from '../../core/index.js'
import { databaseKinds, scratchDatabase, startTestServer, waitFor, type TestServer } from '../../core/testing/index.js'
import { JobQueue } from '../../core/jobs/queue.js'

const Tick = defineJob('recur.tick', Type.Object({}, { additionalProperties: false }))
const EVERY_MS = 1000

/** each run appends its job id to `ticks` in the data dir; it fails while `fail` exists there */
const recurPlugin = definePlugin({
  name: 'recur',
  title: 'Recurring job tests',
  version: '0.0.1',
  description: 'Test fixture: a job scheduled to run again and again',
  register(api) {
    api.jobs.define(Tick, {
      maxAttempts: 1,
      async handler(ctx) {
        const dir = ctx.resolve(coreServices.config).dataDir
        await appendFile(path.join(dir, 'ticks'), `${ctx.id}\n`)
        if (await readFile(path.join(dir, 'fail')).then(() => true, () => false)) throw new Error('told to fail')
        return { ok: true }
      },
    })
    api.jobs.schedule(Tick, EVERY_MS, { firstAfterMs: 0 })
  },
})

const options = { extraPlugins: [recurPlugin], config: { jobs: { pollMs: 100, leaseMs: 2000 } } }
const rows = (s: TestServer) => s.runtime.db.knex('jobs').where({ type: Tick.type }).orderBy('id').select('id', 'state', 'run_at', 'finished_at', 'error')
const live = async (s: TestServer) => (await rows(s)).filter((r) => r.state === 'queued' || r.state === 'running')
const ended = async (s: TestServer) => (await rows(s)).filter((r) => r.state !== 'queued' && r.state !== 'running')
const ms = (v: unknown) => (v instanceof Date ? v.getTime() : typeof v === 'string' && !/^\d+$/.test(v) ? Date.parse(v) : Number(v))

for (const db of databaseKinds()) {
  t.test(`recurring jobs (${db})`, async (t) => {
    const s = await startTestServer({ ...options, db })
    t.teardown(() => s.close())

    await t.test('runs again and again, one run live at a time, each queued a period after the last ended', async (t) => {
      const done = await waitFor('three runs', async () => ((await ended(s)).length >= 3 ? ended(s) : undefined), 30_000)
      t.ok(done.every((r) => r.state === 'finished'), 'the runs finished')
      const all = await rows(s)
      for (let i = 1; i < all.length; i++) {
        const before = all[i - 1]
        if (before.finished_at === null) continue
        t.ok(ms(all[i].run_at) - ms(before.finished_at) >= EVERY_MS - 5, `run ${all[i].id} is due ${EVERY_MS} ms after run ${before.id} ended`)
      }
      t.ok((await live(s)).length <= 1, 'never two live runs')
    })

    await t.test('a run that fails for good still queues the next', async (t) => {
      await appendFile(path.join(s.dataDir, 'fail'), 'yes')
      const failed = await waitFor('a failed run', async () => (await rows(s)).find((r) => r.state === 'failed'), 30_000)
      t.match(failed.error, /told to fail/)
      const next = await waitFor('the run after it', async () => (await rows(s)).find((r) => r.id > failed.id), 30_000)
      t.ok(['queued', 'running', 'finished', 'failed'].includes(next.state), 'queued after the failure')
      await rm(path.join(s.dataDir, 'fail'))
    })

    await t.test('cancelling the queued run queues another; the chain is not broken', async (t) => {
      const queued = await waitFor('a queued run', async () => (await live(s)).find((r) => r.state === 'queued'), 30_000)
      const reply = await s.request('DELETE', `/status/${queued.id}`, { token: s.admin.token })
      t.equal(reply.status, 200, 'cancelled through DELETE /status/:id')
      const cancelled = reply.body.job
      if (cancelled.state !== 'cancelled') return t.pass(`the run had started meanwhile (${cancelled.state}); the chain goes on by its end`)
      const after = await waitFor('a run after the cancelled one', async () => (await rows(s)).find((r) => r.id > queued.id), 30_000)
      t.ok(after, `run ${after.id} replaces the cancelled ${queued.id}`)
      t.equal((await live(s)).length <= 1, true, 'one live run')
    })

    await t.test('two processes starting on one database queue one run, not two', async (t) => {
      // two runtimes (two connection pools) on one database and data dir (one secret key), without
      // runners; their queues race
      // to start the chain of a type that has no run yet, ten times over
      const shared = await scratchDatabase(db)
      t.teardown(() => shared.drop())
      const first = await startTestServer({ ...options, db, databaseUrl: shared.databaseUrl, runJobs: false })
      t.teardown(() => first.close())
      const second = await startTestServer({ ...options, db, databaseUrl: shared.databaseUrl, dataDir: first.dataDir, runJobs: false })
      t.teardown(() => second.close())
      const queueOf = (server: TestServer) => {
        const queue = new JobQueue(server.runtime.db.knex, server.runtime.db.dialect, server.runtime.events, { maxAttempts: 1 })
        queue.recurring.set(Tick.type, { everyMs: EVERY_MS, firstAfterMs: 60_000, kind: 'generic' })
        return queue
      }
      const [qa, qb] = [queueOf(first), queueOf(second)]
      const knex = first.runtime.db.knex
      for (let round = 0; round < 10; round++) {
        await knex('jobs').where({ type: Tick.type }).delete()
        await Promise.all([qa.ensureRecurring([Tick.type]), qb.ensureRecurring([Tick.type])])
        const live = await knex('jobs').where({ type: Tick.type, state: 'queued' }).count({ n: '*' })
        t.equal(Number(live[0].n), 1, `round ${round}: one queued run`)
      }
    })
  })
}
