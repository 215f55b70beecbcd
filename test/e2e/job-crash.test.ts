/**
 * The fault tests of SECURITY.md for jobs, against the real CLI server in child processes:
 * SIGKILL mid-job and restart (the job runs again once its lease lapses, ends exactly once, leaves
 * no temporary files), SIGTERM mid-job (exit 0, the job is handed back without counting the
 * attempt), and on PostgreSQL two processes sharing one queue.
 */
import t from 'tap'
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import Sqlite from 'better-sqlite3'
import pg from 'pg'
import { databaseKinds, request, scratchDatabase, waitFor } from '../../core/testing/index.js'
import { killAll, login, serveProcess } from '../helpers/process.js'
import { MamRuntime } from '../../core/runtime.js'
import { builtinPlugins } from '../../plugins/index.js'
import jobsPlugin from '../fixtures/jobs-plugin.js'

const PLUGIN = fileURLToPath(new URL('../fixtures/jobs-plugin.js', import.meta.url))
// the slow job: 20 steps of 100 ms, long enough to be killed while it runs
const SLOW = { steps: 20, ms: 100 }

const lines = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean)

async function enqueue(url: string, token: string, name: string, payload: object) {
  const reply = await request(url, 'POST', `/jobs_test/${name}`, { json: payload, token })
  if (reply.status !== 200) throw new Error(`enqueue failed: ${reply.status} ${reply.text}`)
  return reply.body.job as { id: number; state: string }
}

const jobOf = async (url: string, token: string, id: number) => (await request(url, 'GET', `/status/${id}`, { token })).body.job
const settled = (url: string, token: string, id: number) =>
  waitFor(`job ${id} to settle`, async () => {
    const job = await jobOf(url, token, id)
    return ['finished', 'failed', 'cancelled'].includes(job?.state) && job
  })

/** files left below `dir` whose names mark them as temporary */
async function tempFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath ?? (e as any).path, e.name)))
    .filter((name) => /\.tmp$|(^|\/)tmp\//.test(name))
}

/** the job row as stored, read by a runtime that claims nothing */
async function storedJob(dataDir: string, databaseUrl: string | undefined, id: number) {
  const runtime = await MamRuntime.create({ plugins: [...builtinPlugins, jobsPlugin], config: { dataDir, databaseUrl, logLevel: 'silent' }, runJobs: false })
  try {
    return await runtime.jobs.get(id)
  } finally {
    await runtime.close()
  }
}

for (const db of databaseKinds()) {
  t.test(`jobs survive crashes and restarts of the real server [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-jobcrash-'))
    const database = await scratchDatabase(db)
    const databaseUrl = database.databaseUrl
    const start = () => serveProcess(dataDir, databaseUrl, ['--plugin', PLUGIN])
    t.teardown(async () => {
      // whatever happened: no server left behind, then the database and the data dir go
      await killAll()
      await database.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const work = path.join(dataDir, 'work')
    await mkdir(work)
    let server = await start()
    const token = await login(server.url)

    await t.test('SIGKILL mid-job: the job runs again after its lease lapses and finishes once', async (t) => {
      const marker = path.join(work, 'kill-marker')
      const out = path.join(work, 'kill-out')
      const job = await enqueue(server.url, token, 'slow', { marker, out, ...SLOW })
      await waitFor('the first run to start', async () => (await lines(marker)).includes('start 1'))
      server.child.kill('SIGKILL')
      t.same(await server.exited, { code: null, signal: 'SIGKILL' }, 'killed mid-job')
      t.same(await lines(marker), ['start 1'], 'the first run did not finish')

      server = await start()
      const done = await settled(server.url, token, job.id)
      t.match(done, { state: 'finished', attempts: 2, error: null, progress: 1, result: { chunks: SLOW.steps, pid: server.child.pid } }, 'finished by the new process')
      t.same(await lines(marker), ['start 1', 'start 2', 'done'], 'ran twice, completed exactly once')
      t.equal((await lines(out)).length, SLOW.steps, 'complete output, written once')
      t.same(await tempFiles(dataDir), [], 'no temporary files left')
    })

    await t.test('SIGTERM mid-job: exit 0, the job is handed back and finished by the next start', async (t) => {
      const marker = path.join(work, 'term-marker')
      const out = path.join(work, 'term-out')
      const job = await enqueue(server.url, token, 'slow', { marker, out, ...SLOW })
      await waitFor('the first run to start', async () => (await lines(marker)).includes('start 1'))
      server.child.kill('SIGTERM')
      t.same(await server.exited, { code: 0, signal: null }, 'exit code 0')
      t.match(server.output(), /stopping/, 'logged the shutdown')

      t.match(await storedJob(dataDir, databaseUrl, job.id), { state: 'queued', attempts: 0, cancel_requested: false }, 'handed back, the attempt not counted')
      t.same(await lines(marker), ['start 1'], 'the run stopped')
      t.same(await tempFiles(dataDir), [], 'the stopped run removed its temporary file')

      server = await start()
      t.match(await settled(server.url, token, job.id), { state: 'finished', attempts: 1, result: { chunks: SLOW.steps, pid: server.child.pid } })
      t.same(await lines(marker), ['start 1', 'start 1', 'done'], 'run again as the first counted attempt, completed once')
      t.same(await tempFiles(dataDir), [], 'no temporary files left')
    })

    await t.test('SIGKILL while a batch of completions is being written: nothing half-written, every job ends once', async (t) => {
      const file = path.join(work, 'batch-ran')
      // the test's own connection: it holds the write lock that keeps the completion waiting
      const sql = db === 'postgresql' ? new pg.Client({ connectionString: databaseUrl }) : undefined
      const lite = db === 'sqlite' ? new Sqlite(path.join(dataDir, 'mamkit.sqlite')) : undefined
      await sql?.connect()
      t.teardown(async () => {
        await sql?.end().catch(() => {})
        lite?.close()
      })
      const query = async (text: string, params: unknown[] = []): Promise<any[]> => (sql ? (await sql.query(text, params)).rows : lite!.prepare(text.replace(/\$\d+/g, '?')).all(...params))
      lite?.pragma('busy_timeout = 15000')

      // 16 in flight, so that the 12 jobs are claimed and completed together
      server.child.kill('SIGTERM')
      await server.exited
      server = await serveProcess(dataDir, databaseUrl, ['--plugin', PLUGIN], { MAMKIT_JOB_CONCURRENCY: '16' })
      const killed = server
      // 2 s each: all 12 must be running at once even when the machine is loaded (400 ms was not, once)
      const ids = (await Promise.all(Array.from({ length: 12 }, () => enqueue(killed.url, token, 'append', { file, ms: 2000 })))).map((j) => j.id)
      const running = async () => Number((await query(`select count(*) as n from jobs where state = 'running' and id in (${ids.join(', ')})`))[0].n)
      await waitFor('all 12 running', async () => (await running()) === 12)
      // PostgreSQL: writes to the jobs table wait from here on (reads go on), so the completion is
      // caught in the middle: its transaction has begun, its UPDATE waits. SQLite cannot be held
      // like that (a server waiting for SQLite's lock blocks its event loop, handlers included):
      // there the kill comes as soon as the handlers have ended, before, during or after the write,
      // and the same must hold whichever it was.
      if (sql) await sql.query('begin').then(() => sql.query('lock table jobs in share mode'))
      await waitFor('the 12 handlers to end', async () => (await lines(file)).length >= 12, 30_000)
      if (sql)
        await waitFor('the completion waiting for the lock', async () =>
          Number((await query(`select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%set state = v.state%'`))[0].n) > 0,
        )
      killed.child.kill('SIGKILL')
      t.same(await killed.exited, { code: null, signal: 'SIGKILL' }, 'killed while completing')
      if (sql) await sql.query('rollback')
      // PostgreSQL: the dead client's transaction ends when its backend notices; wait until nothing of it is left
      if (sql) await waitFor('the killed server gone', async () => Number((await query(`select count(*) as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`))[0].n) === 0)
      const afterKill = await query(`select id, state from jobs where id in (${ids.join(', ')})`)
      const finishedBefore = new Set(afterKill.filter((r) => r.state === 'finished').map((r) => Number(r.id)))
      // PostgreSQL: the completion caught waiting was a transaction (a user's jobs publish job.finished
      // with it) and went with the process; the outcomes behind it were only in its memory
      if (sql) t.equal(finishedBefore.size, 0, 'the completion under way was rolled back whole')
      else t.comment(`${finishedBefore.size} of 12 were completed before the kill`)
      t.equal(afterKill.filter((r) => r.state !== 'finished' && r.state !== 'running').length, 0, 'the others are still held by the dead process')

      server = await start()
      await waitFor('the 12 jobs to finish', async () => Number((await query(`select count(*) as n from jobs where state = 'finished' and id in (${ids.join(', ')})`))[0].n) === 12)
      const runs = (await lines(file)).map((l) => l.split(' ').map(Number))
      const rows = await query(`select id, attempts, result from jobs where id in (${ids.join(', ')})`)
      for (const row of rows) {
        const id = Number(row.id)
        const ran = runs.filter(([r]) => r === id).map(([, pid]) => pid)
        if (finishedBefore.has(id)) t.same(ran, [killed.child.pid], `job ${id}: completed before the kill, not run again`)
        else {
          t.same(ran, [killed.child.pid, server.child.pid], `job ${id}: its completion was lost with the process, so it ran again once`)
          t.equal(Number(row.attempts), 2, `job ${id}: two attempts`)
          t.same(JSON.parse(row.result), { pid: server.child.pid }, `job ${id}: the result of the run that completed`)
        }
      }
      // the completion's event is written with it: one job.finished per job, never two
      const events = await query(`select subject_id, count(*) as n from event_outbox where name = 'job.finished' and subject_id in (${ids.join(', ')}) group by subject_id`)
      t.same(events.map((e) => [Number(e.subject_id), Number(e.n)]).sort((a, b) => a[0] - b[0]), [...ids].sort((a, b) => a - b).map((id) => [id, 1]), 'one job.finished event per job')
    })

    if (db === 'postgresql') {
      await t.test('two processes share one PostgreSQL queue: every job runs exactly once', async (t) => {
        const file = path.join(work, 'ran')
        const a = server
        const b = await start()
        const ids: number[] = []
        for (let batch = 0; batch < 5; batch++) {
          const jobs = await Promise.all(Array.from({ length: 10 }, () => enqueue(a.url, token, 'append', { file, ms: 30 })))
          ids.push(...jobs.map((j) => j.id))
        }
        await waitFor('50 runs', async () => (await lines(file)).length >= ids.length)
        for (const id of ids) t.equal((await jobOf(a.url, token, id)).state, 'finished')
        const runs = (await lines(file)).map((l) => l.split(' ').map(Number))
        t.same(
          runs.map(([id]) => id).sort((x, y) => x - y),
          [...ids].sort((x, y) => x - y),
          'every job ran exactly once',
        )
        t.same([...new Set(runs.map(([, pid]) => pid))].sort(), [a.child.pid, b.child.pid].sort(), 'both processes took jobs')
        t.comment(`the enqueuing process ran ${runs.filter(([, pid]) => pid === a.child.pid).length}, the other ${runs.filter(([, pid]) => pid === b.child.pid).length}`)
        b.child.kill('SIGTERM')
        t.same(await b.exited, { code: 0, signal: null }, 'SIGTERM: clean exit')
      })
    }

    server.child.kill('SIGTERM')
    t.same(await server.exited, { code: 0, signal: null }, 'SIGTERM with nothing running: clean exit')
    t.same(await lines(path.join(work, 'kill-marker')), ['start 1', 'start 2', 'done'], 'finished jobs did not run again')
  })
}
