/**
 * Projects benchmark: create projects from a template over HTTP, then list and search them.
 *
 *   npx tsc -p . && node dist/bench/projects.js [--projects 1000] [--folders 50] [--concurrency 4]
 *                                                [--requests 200] [--only sqlite,postgresql]
 *
 * For each database (SQLite, and PostgreSQL when MAMKIT_BENCH_DATABASE_URL or
 * MAMKIT_TEST_DATABASE_URL names a server) a mamkit server runs in a child process of its own
 * with a fresh data dir and database. This process is the client. It creates a template with
 * `--folders` folders (a tenth of them carry a substitution token in their name), creates
 * `--projects` projects from it over HTTP as a standard user (each project: a row, the copied
 * tree, an access right for the user's own team), and checks that the trees on disk are complete.
 * It then times `--requests` sequential requests of each kind:
 *
 *   baseline        GET /session/user_id (the request path with authentication, no project query)
 *   list            GET /projects?per_page=100&page=<1..10> as an administrator
 *   list as user    the same as the standard user (filtered by access rights)
 *   name filter     GET /projects?name=<substring matching 10 projects> as the user
 *   search          GET /projects/search?name=<substring matching 1 project> as the user
 *
 * Figures: projects/s for the creation, p50/p99 latencies, and each latency as a ratio to the
 * baseline measured in the same run (absolute numbers drift; PERFORMANCE.md).
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { scratchDatabase } from '../core/testing/index.js'

const HERE = fileURLToPath(import.meta.url)
const API = '/api/v1'

interface ServerSpec {
  dataDir: string
  databaseUrl?: string
}

interface Ready {
  port: number
  adminToken: string
  userToken: string
}

// ---------------------------------------------------------------------------------------------
// the server (child process)
// ---------------------------------------------------------------------------------------------

async function childMain(spec: ServerSpec) {
  const { MamRuntime } = await import('../core/runtime.js')
  const { builtinPlugins } = await import('../plugins/index.js')
  const { createApiKey, createUser } = await import('../core/auth/accounts.js')
  const runtime = await MamRuntime.create({ plugins: builtinPlugins, config: { dataDir: spec.dataDir, databaseUrl: spec.databaseUrl, logLevel: 'silent' }, runJobs: false })
  const em = runtime.container.resolve<any>('em').fork()
  const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
  const user = await createUser(em, { username: 'bench-editor', password: 'bench-editor-password' })
  const ready: Ready = {
    port: 0,
    adminToken: (await createApiKey(em, admin, 'bench')).secret,
    userToken: (await createApiKey(em, user, 'bench')).secret,
  }
  const server = http.createServer(runtime.callback())
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  ready.port = (server.address() as AddressInfo).port
  process.send!(ready)
  const stop = () => {
    server.closeAllConnections()
    server.close(() => void runtime.close().finally(() => process.exit(0)))
  }
  process.once('SIGTERM', stop)
  process.once('disconnect', stop)
}

// ---------------------------------------------------------------------------------------------
// the client (parent process)
// ---------------------------------------------------------------------------------------------

function startServer(spec: ServerSpec): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = fork(HERE, ['--serve', JSON.stringify(spec)], { execArgv: ['--enable-source-maps'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    child.once('message', (ready: Ready) => resolve({ child, ready }))
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before listening`)))
  })
}

function stopServer(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}


class Client {
  constructor(private readonly base: string) {}
  async call(method: string, route: string, token: string, json?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
    const res = await fetch(`${this.base}${API}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: json === undefined ? undefined : JSON.stringify(json),
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers }
  }
  async ok(method: string, route: string, token: string, json?: unknown, expected = 200) {
    const reply = await this.call(method, route, token, json)
    if (reply.status !== expected) throw new Error(`${method} ${route}: ${reply.status} ${JSON.stringify(reply.body)}`)
    return reply
  }
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

interface Latency {
  label: string
  p50: number
  p99: number
  mean: number
}

async function time(label: string, requests: number, fn: (i: number) => Promise<unknown>): Promise<Latency> {
  for (let i = 0; i < Math.min(20, requests); i++) await fn(i) // warm-up: compiled validators, prepared statements, pools
  const ms: number[] = []
  for (let i = 0; i < requests; i++) {
    const started = performance.now()
    await fn(i)
    ms.push(performance.now() - started)
  }
  ms.sort((a, b) => a - b)
  return { label, p50: percentile(ms, 50), p99: percentile(ms, 99), mean: ms.reduce((a, b) => a + b, 0) / ms.length }
}

interface RunResult {
  db: string
  projects: number
  folders: number
  concurrency: number
  createSeconds: number
  perSecond: number
  createP50: number
  createP99: number
  latencies: Latency[]
}

async function runOne(db: 'sqlite' | 'postgresql', options: { projects: number; folders: number; concurrency: number; requests: number }, adminUrl?: string): Promise<RunResult> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-projects-'))
  const scratch = db === 'postgresql' ? await scratchDatabase('postgresql', adminUrl!) : undefined
  const { child, ready } = await startServer({ dataDir, databaseUrl: scratch?.databaseUrl })
  try {
    const api = new Client(`http://127.0.0.1:${ready.port}`)
    const { adminToken, userToken } = ready

    // a template with N folders; every tenth carries the project name
    const template = (
      await api.ok('POST', '/templates', adminToken, {
        template: { name: 'Bench template', template_type: 'generic', substitution_patterns: [{ token: 'PROJECT', pattern: '%n' }] },
      }, 201)
    ).body.template
    for (let i = 0; i < options.folders; i++) {
      const name = i % 10 === 0 ? `PROJECT ${String(i).padStart(2, '0')}` : `Folder ${String(i).padStart(2, '0')}`
      await mkdir(path.join(template.directory, i < options.folders / 2 ? name : path.join('Media', name)), { recursive: true })
    }
    const templateFolders = options.folders + (options.folders > 1 ? 1 : 0) // + Media

    // create the projects over HTTP, `concurrency` requests in flight
    const names = Array.from({ length: options.projects }, (_, i) => `Project ${String(i).padStart(4, '0')}`)
    const createMs: number[] = []
    let next = 0
    const started = performance.now()
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (next < names.length) {
          const name = names[next++]
          const t0 = performance.now()
          await api.ok('POST', '/projects', userToken, { project: { name, template_id: template.id } }, 201)
          createMs.push(performance.now() - t0)
        }
      }),
    )
    const createSeconds = (performance.now() - started) / 1000
    createMs.sort((a, b) => a - b)

    // every tree complete on disk
    const storageRoot = path.join(dataDir, 'storage', 'default')
    const count = async (dir: string): Promise<number> => {
      let n = 0
      for (const e of await readdir(dir, { withFileTypes: true })) if (e.isDirectory()) n += 1 + (await count(path.join(dir, e.name)))
      return n
    }
    for (const name of [names[0], names[names.length - 1]]) {
      const folders = await count(path.join(storageRoot, name))
      if (folders !== templateFolders) throw new Error(`${name}: ${folders} folders on disk, expected ${templateFolders}`)
    }
    const listed = await api.ok('GET', '/projects?per_page=1', userToken)
    if (listed.headers.get('x-total-count') !== String(options.projects)) throw new Error(`listed ${listed.headers.get('x-total-count')} projects`)

    const pages = Math.max(1, Math.ceil(options.projects / 100))
    const expect = async (route: string, token: string, n?: number) => {
      const reply = await api.ok('GET', route, token)
      if (n !== undefined && reply.body.projects.length !== n) throw new Error(`${route}: ${reply.body.projects.length} projects, expected ${n}`)
    }
    const tens = Math.max(1, Math.floor(options.projects / 10))
    const latencies = [
      await time('baseline: GET /session/user_id', options.requests, () => api.ok('GET', '/session/user_id', userToken)),
      await time('list: GET /projects?per_page=100&page=k (admin)', options.requests, (i) => expect(`/projects?per_page=100&page=${(i % pages) + 1}`, adminToken)),
      await time('list as user (access-right filter)', options.requests, (i) => expect(`/projects?per_page=100&page=${(i % pages) + 1}`, userToken)),
      // "Project 012" matches Project 0120 … 0129
      await time('name filter: GET /projects?name=…(10 hits)', options.requests, (i) => expect(`/projects?name=${encodeURIComponent(`Project ${String(i % tens).padStart(3, '0')}`)}`, userToken, options.projects >= 10 ? 10 : undefined)),
      await time('search: GET /projects/search?name=…(1 hit)', options.requests, (i) => expect(`/projects/search?name=${encodeURIComponent(names[(i * 7) % names.length].slice(-4))}`, userToken)),
    ]
    return {
      db,
      projects: options.projects,
      folders: options.folders,
      concurrency: options.concurrency,
      createSeconds,
      perSecond: options.projects / createSeconds,
      createP50: percentile(createMs, 50),
      createP99: percentile(createMs, 99),
      latencies,
    }
  } finally {
    await stopServer(child)
    await scratch?.drop().catch(() => {})
    await rm(dataDir, { recursive: true, force: true })
  }
}

function report(results: RunResult[]) {
  const f = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))
  console.log(`\n## Projects (node ${process.version}, ${os.cpus().length} CPUs, ${os.cpus()[0]?.model ?? ''})\n`)
  console.log('| database | projects × folders | concurrency | total | projects/s | create p50 | create p99 |')
  console.log('|---|---|---|---|---|---|---|')
  for (const r of results)
    console.log(`| ${r.db} | ${r.projects} × ${r.folders} | ${r.concurrency} | ${f(r.createSeconds)} s | ${f(r.perSecond)} | ${f(r.createP50)} ms | ${f(r.createP99)} ms |`)
  console.log('\n| database | request | p50 | p99 | mean | p50 / baseline p50 |')
  console.log('|---|---|---|---|---|---|')
  for (const r of results) {
    const base = r.latencies[0].p50
    for (const l of r.latencies) console.log(`| ${r.db} | ${l.label} | ${f(l.p50)} ms | ${f(l.p99)} ms | ${f(l.mean)} ms | ${(l.p50 / base).toFixed(2)}× |`)
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      projects: { type: 'string', default: '1000' },
      folders: { type: 'string', default: '50' },
      concurrency: { type: 'string', default: '4' },
      requests: { type: 'string', default: '200' },
      only: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  })
  const options = { projects: Number(values.projects), folders: Number(values.folders), concurrency: Number(values.concurrency), requests: Number(values.requests) }
  const pgUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
  const only = values.only?.split(',')
  const dbs = (['sqlite', 'postgresql'] as const).filter((db) => (db === 'postgresql' ? Boolean(pgUrl) : true) && (!only || only.includes(db)))
  const results: RunResult[] = []
  for (const db of dbs) {
    console.error(`${db}: creating ${options.projects} projects from a template with ${options.folders} folders …`)
    results.push(await runOne(db, options, pgUrl))
  }
  if (!pgUrl) console.error('(PostgreSQL skipped: set MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL)')
  if (values.json) console.log(JSON.stringify(results, null, 2))
  else report(results)
}

if (process.argv[2] === '--serve') void childMain(JSON.parse(process.argv[3]))
else
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
