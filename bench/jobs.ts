/**
 * Job queue benchmark: the durable queue (core/jobs) against a minimal claim/complete loop on the
 * same database, in the SAME run, so that the ratio says how near the queue is to what the
 * database allows.
 *
 *   npx tsc -p . && node dist/bench/jobs.js                 # default run, about 3 minutes
 *   node dist/bench/jobs.js --full                          # 10,000 and 100,000 jobs, one and two processes
 *   node dist/bench/jobs.js --only postgresql --inflight 16 --handlers noop --jobs 20000
 *   node dist/bench/jobs.js --profile /tmp/prof             # --cpu-prof of the servers (bench/profile-top.ts reads them)
 *
 * SQLite always; PostgreSQL too when MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL names a
 * server (a scratch database per scenario, created and dropped).
 *
 * A scenario is (database, handler, jobs in flight, job count, server processes). Each server is a
 * child process running `MamRuntime` with jobs on (core only, plus a bench plugin with two job
 * types: `bench.noop` returns at once, `bench.sleep` waits 1 ms) and `jobs.concurrency` = the jobs
 * in flight. The first server enqueues the jobs through `JobService.enqueueMany` in batches of 500
 * (while the runners already work, as an ingest would); the clock runs from the first enqueue to
 * the last settle. Printed per scenario:
 *   jobs/s          jobs / (last settle − first enqueue)
 *   start p50/p99   enqueue → handler start (the payload carries the enqueue time)
 *   trips/job       database round trips per job, enqueue included (PostgreSQL: every
 *                   pg Client.query of the servers; SQLite: every statement run)
 *   CPU/job         user+system CPU of the server processes per job, enqueue included
 *   ceiling         the minimal loop on the same database and table, as many rows per round as jobs
 *                   in flight: one `UPDATE … WHERE id IN (SELECT … [FOR UPDATE SKIP LOCKED] LIMIT N)
 *                   RETURNING` and one `UPDATE … WHERE id = ANY(…)` per round, on one connection
 *   idle p50        (16 in flight, no-op) 200 single enqueues one after another, each waited for:
 *                   enqueue → start with nothing else to do; with two processes the other one
 *                   often takes it (NOTIFY)
 * Every figure carries the 1-minute load average at the time it was taken: the machine is shared.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { scratchDatabase } from '../core/testing/index.js'

const HERE = fileURLToPath(import.meta.url)

interface Spec {
  dataDir: string
  databaseUrl?: string
  concurrency: number
  index: number
}

type ToChild =
  | { op: 'enqueue'; jobs: number; type: string }
  | { op: 'idle'; count: number }
  | { op: 'ceiling'; rows: number; batch: number }
  | { op: 'reset' }
  | { op: 'report' }
  | { op: 'stop' }

// ---------------------------------------------------------------------------------------------
// child: a mamkit runtime with the bench plugin
// ---------------------------------------------------------------------------------------------

async function child(spec: Spec) {
  const { MamRuntime, definePlugin, Type } = await import('../core/index.js')
  const counters = { trips: 0 }
  // round trips: every query the pg driver sends, or every SQLite statement stepped
  if (spec.databaseUrl) {
    const query = pg.Client.prototype.query as (...a: unknown[]) => unknown
    pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
      counters.trips++
      return query.apply(this, args)
    } as typeof pg.Client.prototype.query
  } else {
    const { default: Sqlite } = await import('better-sqlite3')
    const probe = new Sqlite(':memory:')
    const proto = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...a: unknown[]) => unknown>
    for (const m of ['run', 'all', 'get', 'iterate']) {
      const orig = proto[m]
      proto[m] = function (this: unknown, ...args: unknown[]) {
        counters.trips++
        return orig.apply(this, args)
      }
    }
    probe.close()
  }
  const started: number[] = []
  let settled = 0
  let lastSettle = 0
  let listening: ((id: number) => void) | undefined
  const plugin = definePlugin({
    name: 'bench',
    title: 'Job bench',
    version: '0.0.1',
    description: 'no-op and 1 ms jobs for bench/jobs.ts',
    register(api) {
      api.jobs.define('bench.noop', {
        async handler(ctx) {
          started.push(Date.now() - (ctx.payload as { t: number }).t)
          return null
        },
      })
      api.jobs.define('bench.sleep', {
        async handler(ctx) {
          started.push(Date.now() - (ctx.payload as { t: number }).t)
          await new Promise((r) => setTimeout(r, 1))
          return null
        },
      })
    },
  })
  void Type
  const runtime = await MamRuntime.create({
    plugins: [plugin],
    config: { dataDir: spec.dataDir, databaseUrl: spec.databaseUrl, logLevel: 'silent', jobs: { concurrency: spec.concurrency } },
  })
  runtime.events.on('jobs.settled', (e: { id: number; state: string }) => {
    if (e.state !== 'finished') return
    settled++
    lastSettle = Date.now()
    listening?.(e.id)
  })
  let cpu = process.cpuUsage()
  const send = (m: unknown) => process.send!(m)
  process.on('message', async (m: ToChild) => {
    try {
      if (m.op === 'reset') {
        started.length = 0
        settled = 0
        counters.trips = 0
        cpu = process.cpuUsage()
        send({ op: 'reset' })
      } else if (m.op === 'enqueue') {
        const t0 = Date.now()
        for (let i = 0; i < m.jobs; i += 500) {
          const t = Date.now()
          await runtime.jobs.enqueueMany(Array.from({ length: Math.min(500, m.jobs - i) }, () => ({ type: m.type, payload: { t } })))
        }
        send({ op: 'enqueued', t0, t1: Date.now() })
      } else if (m.op === 'report') {
        const c = process.cpuUsage(cpu)
        send({ op: 'report', settled, lastSettle, trips: counters.trips, cpuMs: (c.user + c.system) / 1000, started: [...started] })
      } else if (m.op === 'idle') {
        const latencies: number[] = []
        for (let i = 0; i < m.count; i++) {
          const done = new Promise<void>((resolve) => (listening = () => resolve()))
          const before = started.length
          const t = Date.now()
          await runtime.jobs.enqueue('bench.noop', { t })
          // with two processes the other one may run it: then this one hears nothing; the parent asks both
          await Promise.race([done, new Promise((r) => setTimeout(r, 50))])
          if (started.length > before) latencies.push(started[started.length - 1])
          await new Promise((r) => setTimeout(r, 2))
        }
        listening = undefined
        send({ op: 'idle', latencies })
      } else if (m.op === 'ceiling') {
        send({ op: 'ceiling', ...(await ceiling(runtime.db.knex, runtime.db.dialect, spec, m.rows, m.batch)) })
      } else if (m.op === 'stop') {
        await runtime.close()
        send({ op: 'stopped' })
        process.exit(0)
      }
    } catch (err) {
      send({ op: 'error', error: String((err as Error)?.stack ?? err) })
    }
  })
  send({ op: 'ready' })
}

/**
 * The minimal loop: `rows` rows of the jobs table (a type no runner claims), claimed `batch` at a
 * time and completed with one statement per round, on one connection, nothing else.
 */
async function ceiling(knex: any, dialect: string, spec: Spec, rows: number, batch: number) {
  const type = `ceiling.${batch}`
  const now = new Date()
  const base = { type, kind: 'generic', state: 'queued', payload: '{}', progress: 0, attempts: 0, max_attempts: 5, priority: 0, run_at: now, cancel_requested: false, success: 0, failure: 0, created_at: now, updated_at: now }
  for (let i = 0; i < rows; i += 500) await knex('jobs').insert(Array.from({ length: Math.min(500, rows - i) }, () => base))
  let done = 0
  const t0 = performance.now()
  if (dialect === 'postgresql') {
    const c = new pg.Client({ connectionString: spec.databaseUrl })
    await c.connect()
    try {
      for (;;) {
        const claimed = await c.query({
          name: 'ceiling-claim',
          text: `update jobs set state = 'running', attempts = attempts + 1, locked_by = 'ceiling', lease_until = now() + interval '30 s', updated_at = now()
                  where id in (select id from jobs where type = $1 and state = 'queued' and run_at <= now() order by priority desc, id limit $2 for update skip locked)
                  returning id, payload`,
          values: [type, batch],
        })
        if (!claimed.rows.length) break
        await c.query({
          name: 'ceiling-complete',
          text: `update jobs set state = 'finished', locked_by = null, lease_until = null, finished_at = now(), updated_at = now() where id = any($1::int[])`,
          values: [claimed.rows.map((r: { id: number }) => r.id)],
        })
        done += claimed.rows.length
      }
    } finally {
      await c.end()
    }
  } else {
    const { default: Sqlite } = await import('better-sqlite3')
    const db = new Sqlite(path.join(spec.dataDir, 'mamkit.sqlite'))
    db.pragma('busy_timeout = 15000')
    db.pragma('synchronous = NORMAL')
    const claim = db.prepare(
      `update jobs set state = 'running', attempts = attempts + 1, locked_by = 'ceiling', lease_until = ?, updated_at = ?
        where id in (select id from jobs where type = ? and state = 'queued' and run_at <= ? order by priority desc, id limit ?)
        returning id, payload`,
    )
    const complete = db.prepare(`update jobs set state = 'finished', locked_by = null, lease_until = null, finished_at = ?, updated_at = ? where id in (select value from json_each(?))`)
    try {
      for (;;) {
        const t = Date.now()
        const claimed = claim.all(t + 30_000, t, type, t, batch) as Array<{ id: number }>
        if (!claimed.length) break
        // an await per round, as a server would have between its statements
        await null
        complete.run(t, t, JSON.stringify(claimed.map((r) => r.id)))
        done += claimed.length
      }
    } finally {
      db.close()
    }
  }
  const seconds = (performance.now() - t0) / 1000
  return { perSecond: done / seconds, done }
}

// ---------------------------------------------------------------------------------------------
// parent: scenarios, children, figures
// ---------------------------------------------------------------------------------------------

class Child {
  private waiting = new Map<string, { resolve: (m: any) => void; reject: (err: Error) => void }>()
  private constructor(readonly proc: ChildProcess) {
    proc.once('exit', (code) => {
      for (const [op, w] of this.waiting) w.reject(new Error(`child exited (${code}) waiting for ${op}`))
      this.waiting.clear()
    })
    proc.on('message', (m: any) => {
      if (m.op === 'error') {
        console.error(`child ${proc.pid}: ${m.error}`)
        process.exitCode = 1
      }
      const w = this.waiting.get(m.op)
      if (w) {
        this.waiting.delete(m.op)
        w.resolve(m)
      }
    })
  }

  static async start(spec: Spec, profileDir?: string): Promise<Child> {
    const execArgv = ['--enable-source-maps', ...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])]
    const proc = fork(HERE, ['--child', JSON.stringify(spec)], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const c = new Child(proc)
    await c.next('ready')
    return c
  }

  next<T = any>(op: string): Promise<T> {
    return new Promise((resolve, reject) => this.waiting.set(op, { resolve, reject }))
  }

  async ask<T = any>(m: ToChild, reply: string = m.op): Promise<T> {
    const p = this.next<T>(reply)
    this.proc.send(m)
    return p
  }
}


const load = () => os.loadavg()[0].toFixed(1)
const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.max(0, Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1))]
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })

interface Scenario {
  db: 'sqlite' | 'postgresql'
  handler: 'noop' | 'sleep'
  inflight: number
  jobs: number
  procs: number
}

async function run(s: Scenario, pgUrl: string | undefined, profileDir: string | undefined, withCeiling: boolean, withIdle: boolean) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-benchjobs-'))
  const scratch = s.db === 'postgresql' ? await scratchDatabase('postgresql', pgUrl!) : undefined
  const children: Child[] = []
  try {
    for (let i = 0; i < s.procs; i++) {
      // the first one migrates; the second one starts on the migrated database
      children.push(await Child.start({ dataDir, databaseUrl: scratch?.databaseUrl, concurrency: s.inflight, index: i }, profileDir && path.join(profileDir, `${s.db}-${s.handler}-${s.inflight}-${s.procs}p`)))
    }
    await Promise.all(children.map((c) => c.ask({ op: 'reset' })))
    const loadBefore = load()
    const enq = await children[0].ask<{ t0: number; t1: number }>({ op: 'enqueue', jobs: s.jobs, type: s.handler === 'noop' ? 'bench.noop' : 'bench.sleep' }, 'enqueued')
    let reports: any[] = []
    const deadline = Date.now() + 20 * 60_000
    for (;;) {
      reports = await Promise.all(children.map((c) => c.ask({ op: 'report' })))
      if (reports.reduce((n, r) => n + r.settled, 0) >= s.jobs) break
      if (Date.now() > deadline) throw new Error('timed out')
      await sleep(50)
    }
    const end = Math.max(...reports.map((r) => r.lastSettle))
    const seconds = (end - enq.t0) / 1000
    const started = reports.flatMap((r) => r.started)
    const trips = reports.reduce((n, r) => n + r.trips, 0)
    const cpuMs = reports.reduce((n, r) => n + r.cpuMs, 0)
    const out: Record<string, string | number> = {
      db: s.db,
      handler: s.handler === 'noop' ? 'no-op' : '1 ms',
      'in flight': s.inflight,
      jobs: s.jobs,
      procs: s.procs,
      'jobs/s': Math.round(s.jobs / seconds),
      'start p50': `${fmt(pct(started, 50), 0)} ms`,
      'start p99': `${fmt(pct(started, 99), 0)} ms`,
      'trips/job': fmt(trips / s.jobs, 2),
      'CPU/job': `${fmt((cpuMs * 1000) / s.jobs, 0)} µs`,
      load: `${loadBefore}→${load()}`,
    }
    if (s.procs > 1) out.split = reports.map((r) => r.settled).join('/')
    if (withCeiling) {
      const c = await children[0].ask<{ perSecond: number }>({ op: 'ceiling', rows: Math.min(s.jobs, 20_000), batch: s.inflight })
      out.ceiling = Math.round(c.perSecond)
      out.ratio = fmt(s.jobs / seconds / c.perSecond, 2)
    }
    if (withIdle) {
      const replies = await Promise.all([children[0].ask<{ latencies: number[] }>({ op: 'idle', count: 200 })])
      // with two processes, the other one's handler starts count too
      const others = await Promise.all(children.slice(1).map((c) => c.ask({ op: 'report' })))
      const lat = [...replies[0].latencies, ...others.flatMap((r) => r.started.slice(-200))]
      out['idle p50'] = `${fmt(pct(lat, 50), 1)} ms`
    }
    return out
  } finally {
    await Promise.all(children.map((c) => c.ask({ op: 'stop' }, 'stopped').catch(() => c.proc.kill('SIGKILL'))))
    await scratch?.drop().catch((err) => console.error('dropping the scratch database failed', err))
    await rm(dataDir, { recursive: true, force: true })
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      child: { type: 'string' },
      full: { type: 'boolean', default: false },
      only: { type: 'string' },
      inflight: { type: 'string' },
      handlers: { type: 'string' },
      jobs: { type: 'string' },
      procs: { type: 'string' },
      profile: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  })
  if (values.child) return child(JSON.parse(values.child))
  const pgUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
  const dbs = (values.only?.split(',') ?? ['sqlite', 'postgresql']).filter((d) => d === 'sqlite' || (d === 'postgresql' && pgUrl)) as Scenario['db'][]
  const inflights = (values.inflight ?? '1,4,16,64').split(',').map(Number)
  const handlers = (values.handlers ?? 'noop,sleep').split(',') as Scenario['handler'][]
  const counts = values.jobs ? values.jobs.split(',').map(Number) : values.full ? [10_000, 100_000] : [10_000]
  const procsList = values.procs ? values.procs.split(',').map(Number) : values.full ? [1, 2] : [1]
  console.log(`jobs bench: ${os.cpus().length} CPUs, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}, node ${process.version}`)
  const rows: Record<string, string | number>[] = []
  for (const db of dbs)
    for (const procs of procsList) {
      if (procs > 1 && db === 'sqlite') continue // two servers share a queue on PostgreSQL (SQLite is one machine's file)
      for (const jobs of counts)
        for (const handler of handlers)
          for (const inflight of inflights) {
            // the default run stays short: at 1 and 4 in flight a tenth of the jobs says as much
            const n = !values.jobs && !values.full && inflight < 16 ? Math.min(jobs, 2_000) : jobs
            if (values.full && jobs >= 100_000 && (inflight < 16 || handler !== 'noop')) continue
            const row = await run({ db, handler, inflight, jobs: n, procs }, pgUrl, values.profile, handler === 'noop' && jobs === counts[0], handler === 'noop' && inflight === 16 && jobs === counts[0])
            rows.push(row)
            console.log(values.json ? JSON.stringify(row) : Object.entries(row).map(([k, v]) => `${k} ${v}`).join(' | '))
          }
    }
  if (!values.json) console.table(rows)
}

await main()
