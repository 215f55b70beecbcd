/**
 * HTTP benchmark: mamkit's whole request path against the ceilings of PERFORMANCE.md, in ONE run.
 *
 *   npm run bench                       # tsc, then this script
 *   node dist/bench/http.js [--duration 10] [--warmup 2] [--connections 20] [--rounds 1]
 *                           [--only mamkit,pg] [--json]
 *                           [--profile DIR]   # --cpu-prof of the mamkit servers into DIR
 *                           [--baseline OTHER/dist/bench/http.js]   # every mamkit target also served by another build, interleaved
 *
 * Every target runs in a process of its own (the load generator, autocannon, stays in this one)
 * and is loaded one after the other (with --rounds N, N times in turn; medians are reported): a bare node:http hello-JSON handler, bare Koa + @koa/router, mamkit on
 * SQLite and, when MAMKIT_BENCH_DATABASE_URL (or MAMKIT_TEST_DATABASE_URL) names a PostgreSQL
 * server, mamkit on PostgreSQL and a raw `pg` endpoint serving the same rows. Figures are printed
 * with their ratio to node:http and to Koa measured in the same run; absolute numbers drift.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import autocannon, { type Result } from 'autocannon'
import pg from 'pg'
import { scratchDatabase } from '../core/testing/index.js'

const HERE = fileURLToPath(import.meta.url)
const API = '/api/v1'

type Kind = 'node-http' | 'koa' | 'mamkit' | 'raw-pg'

interface Target {
  name: string
  kind: Kind
  path: string
  token?: string
  dataDir?: string
  databaseUrl?: string
  /** served by another build's bench/http.js (`--baseline`) */
  script?: string
  /** started with --cpu-prof into this folder */
  profileDir?: string
}

interface Measured {
  target: Target
  result: Result
  cpuPerRequest: number
}

// ---------------------------------------------------------------------------------------------
// servers (child processes)
// ---------------------------------------------------------------------------------------------

const HELLO = JSON.stringify({ hello: 'world' })

async function serveTarget(target: Target): Promise<http.Server> {
  switch (target.kind) {
    case 'node-http':
      return listen(
        http.createServer((_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(HELLO) })
          res.end(HELLO)
        }),
      )
    case 'koa': {
      const { default: Koa } = await import('koa')
      const { default: Router } = await import('@koa/router')
      const app = new Koa()
      const router = new Router()
      router.get(`${API}/templates`, (ctx) => {
        ctx.body = { hello: 'world' }
      })
      app.use(router.routes())
      return listen(http.createServer(app.callback()))
    }
    case 'mamkit': {
      const { createMamServer } = await import('../host/index.js')
      const mam = createMamServer({
        config: { dataDir: target.dataDir, databaseUrl: target.databaseUrl, logLevel: 'silent' },
        runJobs: false,
      })
      await mam.start()
      const server = await listen(http.createServer(mam.handler))
      server.once('close', () => void mam.close())
      return server
    }
    case 'raw-pg': {
      // the ceiling for a DB-backed GET: one query, rows to JSON, nothing else
      const pool = new pg.Pool({ connectionString: target.databaseUrl, max: 10 })
      const root = path.join(target.dataDir!, 'templates')
      const server = await listen(
        http.createServer((_req, res) => {
          pool
            .query('select id, name, template_type, position, substitution_patterns, folder, created_at, updated_at from templates order by position, id')
            .then(({ rows }) => {
              const body = JSON.stringify({
                templates: rows.map((r) => ({
                  id: r.id,
                  name: r.name,
                  template_type: r.template_type,
                  position: r.position,
                  substitution_patterns: r.substitution_patterns,
                  directory: path.join(root, r.folder),
                  created_at: r.created_at.toISOString(),
                  updated_at: r.updated_at.toISOString(),
                })),
              })
              res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
              res.end(body)
            })
            .catch((err) => {
              res.writeHead(500).end(String(err))
            })
        }),
      )
      server.once('close', () => void pool.end())
      return server
    }
  }
}

function listen(server: http.Server): Promise<http.Server> {
  server.keepAliveTimeout = 65_000
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve(server))
  })
}

async function childMain(target: Target) {
  const server = await serveTarget(target)
  process.send!({ port: (server.address() as AddressInfo).port })
  // CPU time spent so far: per request it is the figure a busy, shared machine disturbs least
  process.on('message', (m) => {
    if (m === 'cpu') {
      const { user, system } = process.cpuUsage()
      process.send!({ cpu: user + system })
    }
  })
  const stop = () => {
    server.closeAllConnections()
    server.close(() => setTimeout(() => process.exit(0), 200))
  }
  process.once('SIGTERM', stop)
  process.once('disconnect', stop)
}

// ---------------------------------------------------------------------------------------------
// the run (parent process)
// ---------------------------------------------------------------------------------------------

/** the server process's CPU time so far, in µs */
function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    const onMessage = (m: { cpu?: number }) => {
      if (typeof m?.cpu !== 'number') return
      child.off('message', onMessage)
      resolve(m.cpu)
    }
    child.on('message', onMessage)
    child.send('cpu')
  })
}

function startChild(target: Target): Promise<{ child: ChildProcess; port: number }> {
  const execArgv = ['--enable-source-maps']
  if (target.profileDir) execArgv.push('--cpu-prof', `--cpu-prof-dir=${target.profileDir}`, `--cpu-prof-name=${target.name.replace(/[^\w.-]+/g, '_')}.cpuprofile`)
  const child = fork(target.script ?? HERE, ['--serve', JSON.stringify(target)], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve({ child, port: m.port }))
    child.once('exit', (code) => reject(new Error(`${target.name}: server exited (${code}) before listening`)))
  })
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

/** a database with an administrator, an API key and a few templates; returns the key's secret */
async function prepareMamkit(dataDir: string, databaseUrl: string | undefined, templates: number): Promise<string> {
  const { MamRuntime } = await import('../core/runtime.js')
  const { builtinPlugins } = await import('../plugins/index.js')
  const { createApiKey, createUser } = await import('../core/auth/accounts.js')
  const runtime = await MamRuntime.create({ plugins: builtinPlugins, config: { dataDir, databaseUrl, logLevel: 'silent' }, runJobs: false })
  try {
    const em = runtime.container.resolve<any>('em').fork()
    const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
    const { secret } = await createApiKey(em, admin, 'bench')
    const server = await listen(http.createServer(runtime.callback()))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}${API}`
    try {
      for (let i = 1; i <= templates; i++) {
        const res = await fetch(`${base}/templates`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            template: { name: `Bench template ${i}`, template_type: 'generic', substitution_patterns: [{ token: '{project}', pattern: `P${i}` }] },
          }),
        })
        if (res.status !== 201) throw new Error(`creating a template: ${res.status} ${await res.text()}`)
      }
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
    return secret
  } finally {
    await runtime.close()
  }
}


interface Sample {
  result: Result
  /** server CPU time per answered request, µs */
  cpuPerRequest: number
}

async function measure(target: Target, child: ChildProcess, port: number, options: { connections: number; duration: number; warmup: number }): Promise<Sample> {
  const url = `http://127.0.0.1:${port}${target.path}`
  const headers: Record<string, string> = target.token ? { authorization: `Bearer ${target.token}` } : {}
  const probe = await fetch(url, { headers })
  const body = await probe.text()
  if (probe.status !== 200) throw new Error(`${target.name}: GET ${target.path} answered ${probe.status}: ${body}`)
  if (options.warmup > 0) await autocannon({ url, headers, connections: options.connections, duration: options.warmup })
  const before = await cpuOf(child)
  const result = await autocannon({ url, headers, connections: options.connections, duration: options.duration })
  const cpu = (await cpuOf(child)) - before
  return { result, cpuPerRequest: cpu / Math.max(1, result.requests.total) }
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** per figure, the median over the rounds; errors are summed */
function medianResult(results: Result[]): Result {
  if (results.length === 1) return results[0]
  const sum = (f: (r: Result) => number) => results.reduce((n, r) => n + f(r), 0)
  return {
    ...results[0],
    requests: { ...results[0].requests, average: median(results.map((r) => r.requests.average)) },
    latency: { ...results[0].latency, p50: median(results.map((r) => r.latency.p50)), p99: median(results.map((r) => r.latency.p99)) },
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
  }
}

function report(results: Measured[], options: { connections: number; duration: number; warmup: number }, rounds: number) {
  const base = results.find((r) => r.target.kind === 'node-http')
  const koa = results.find((r) => r.target.kind === 'koa')
  const ratio = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '-' : `${fmt(x, 2)}×`)
  const rows = results.map(({ target, result, cpuPerRequest }) => {
    const rps = result.requests.average
    return [
      target.name,
      fmt(rps),
      fmt(result.latency.p50, 1),
      fmt(result.latency.p99, 1),
      ratio(base && rps / base.result.requests.average),
      ratio(koa && rps / koa.result.requests.average),
      fmt(cpuPerRequest),
      ratio(base && base.cpuPerRequest / cpuPerRequest),
      ratio(koa && koa.cpuPerRequest / cpuPerRequest),
      String(result.non2xx + result.errors + result.timeouts),
    ]
  })
  const head = ['target', 'req/s', 'p50 ms', 'p99 ms', 'req/s vs node', 'vs koa', 'CPU µs/req', 'CPU vs node', 'vs koa', 'non-2xx/err']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')
  console.log(`\n${options.connections} connections, ${options.duration} s after a ${options.warmup} s warm-up, per target${rounds > 1 ? `; median of ${rounds} rounds` : ''}`)
  console.log(line(head))
  console.log(line(widths.map((w) => '-'.repeat(w))))
  for (const r of rows) console.log(line(r))
  console.log('(CPU vs …: server CPU time per request of the reference divided by this target’s; 1.00× = as cheap)')
  const rawPg = results.find((r) => r.target.kind === 'raw-pg')
  const mamPg = results.find((r) => r.target.name === 'mamkit/postgresql GET /templates')
  if (rawPg && mamPg)
    console.log(
      `\nmamkit/postgresql GET /templates vs the raw pg endpoint: req/s ${fmt(mamPg.result.requests.average / rawPg.result.requests.average, 2)}×, ` +
        `CPU per request ${fmt(rawPg.cpuPerRequest / mamPg.cpuPerRequest, 2)}×`,
    )
}

async function main() {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: process.env.BENCH_DURATION ?? '10' },
      warmup: { type: 'string', default: process.env.BENCH_WARMUP ?? '2' },
      connections: { type: 'string', default: process.env.BENCH_CONNECTIONS ?? '20' },
      templates: { type: 'string', default: '5' },
      rounds: { type: 'string', default: process.env.BENCH_ROUNDS ?? '1' },
      only: { type: 'string' },
      profile: { type: 'string' },
      baseline: { type: 'string' },
      json: { type: 'boolean' },
    },
  })
  const options = { duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections) }
  const pgAdmin = process.env.MAMKIT_BENCH_DATABASE_URL || process.env.MAMKIT_TEST_DATABASE_URL || undefined
  const profileDir = values.profile ? path.resolve(values.profile) : undefined
  const cpus = os.cpus()

  console.log(`mamkit HTTP benchmark, ${new Date().toISOString()}`)
  console.log(`node ${process.version}, ${cpus.length} × ${cpus[0]?.model ?? 'cpu'}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)

  const cleanup: Array<() => Promise<unknown>> = []
  const templates = Number(values.templates)
  try {
    const sqliteDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-'))
    cleanup.push(() => rm(sqliteDir, { recursive: true, force: true }))
    const sqliteKey = await prepareMamkit(sqliteDir, undefined, templates)

    const targets: Target[] = [
      { name: 'node:http hello', kind: 'node-http', path: `${API}/templates` },
      { name: 'koa+router hello', kind: 'koa', path: `${API}/templates` },
      { name: 'mamkit/sqlite GET /templates', kind: 'mamkit', path: `${API}/templates`, token: sqliteKey, dataDir: sqliteDir, profileDir },
      // authenticated, no database, a body as small as the hello's: the middleware chain alone
      // (request id, problem mapping, API-key auth from the cache, access check, params, envelope)
      { name: 'mamkit GET /session/user_id', kind: 'mamkit', path: `${API}/session/user_id`, token: sqliteKey, dataDir: sqliteDir, profileDir },
    ]
    if (pgAdmin) {
      const scratch = await scratchDatabase('postgresql', pgAdmin)
      cleanup.push(scratch.drop)
      const pgDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-'))
      cleanup.push(() => rm(pgDir, { recursive: true, force: true }))
      const pgKey = await prepareMamkit(pgDir, scratch.databaseUrl, templates)
      targets.push(
        { name: 'mamkit/postgresql GET /templates', kind: 'mamkit', path: `${API}/templates`, token: pgKey, dataDir: pgDir, databaseUrl: scratch.databaseUrl, profileDir },
        { name: 'raw pg GET /templates', kind: 'raw-pg', path: `${API}/templates`, dataDir: pgDir, databaseUrl: scratch.databaseUrl },
      )
    } else {
      console.log('(no MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL: PostgreSQL targets skipped)')
    }

    const only = values.only?.split(',').filter(Boolean)
    const selected = only ? targets.filter((t) => t.kind === 'node-http' || t.kind === 'koa' || only.some((o) => t.name.includes(o))) : targets
    if (values.baseline) {
      // the same mamkit targets served by another build (its compiled bench/http.js) on the same data, interleaved with these
      const script = path.resolve(values.baseline)
      for (const t of selected.filter((x) => x.kind === 'mamkit')) selected.splice(selected.indexOf(t), 0, { ...t, name: `${t.name} (baseline)`, script, profileDir: undefined })
    }
    // every server stays up for the whole run; rounds interleave the targets so that a change in
    // the machine's load (a shared box) weighs on all of them alike
    const running: Array<{ target: Target; child: ChildProcess; port: number }> = []
    cleanup.push(() => Promise.all(running.map((r) => stopChild(r.child))))
    for (const target of selected) running.push({ target, ...(await startChild(target)) })
    const rounds = Math.max(1, Number(values.rounds))
    const samples = new Map<Target, Sample[]>(selected.map((t) => [t, []]))
    for (let round = 1; round <= rounds; round++) {
      if (rounds > 1) console.log(`round ${round} of ${rounds}`)
      for (const { target, child, port } of running) {
        process.stdout.write(`  ${target.name} … `)
        const sample = await measure(target, child, port, options)
        const { result } = sample
        console.log(
          `${fmt(result.requests.average)} req/s, p99 ${fmt(result.latency.p99, 1)} ms, ${fmt(sample.cpuPerRequest)} µs CPU/req (load average ${os.loadavg()[0].toFixed(2)})`,
        )
        samples.get(target)!.push(sample)
      }
    }
    const results: Measured[] = selected.map((target) => {
      const all = samples.get(target)!
      return { target, result: medianResult(all.map((x) => x.result)), cpuPerRequest: median(all.map((x) => x.cpuPerRequest)) }
    })
    report(results, options, rounds)
    if (values.json)
      console.log(
        JSON.stringify(
          results.map(({ target, result, cpuPerRequest }) => ({
            target: target.name,
            rps: result.requests.average,
            cpu_us_per_request: cpuPerRequest,
            p50: result.latency.p50,
            p99: result.latency.p99,
            non2xx: result.non2xx,
            errors: result.errors,
          })),
        ),
      )
    if (profileDir) console.log(`\nCPU profiles of the mamkit servers in ${profileDir} (summarise with node dist/bench/profile-top.js FILE)`)
  } finally {
    for (const fn of cleanup.reverse()) await fn().catch(() => {})
  }
}

const serveArg = process.argv.indexOf('--serve')
if (serveArg !== -1) {
  await childMain(JSON.parse(process.argv[serveArg + 1]) as Target)
} else {
  await main()
}
