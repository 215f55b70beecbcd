/**
 * Uploads and folder moves: what the storage journal, the name claims and Idempotency-Key cost.
 *
 *   npx tsc -p . && node dist/bench/uploads.js [--requests 200] [--concurrency 8] [--files 1000] [--only sqlite,postgresql]
 *
 * For each database (SQLite, and PostgreSQL when MAMKIT_BENCH_DATABASE_URL or
 * MAMKIT_TEST_DATABASE_URL names a server) a mamkit server runs in a child process (jobs off, so
 * analysis does not compete) with a fresh data dir and database; this process is the client.
 * Sequential requests, p50/p99 and the p50 as a ratio to the baseline of the same run:
 *
 *   baseline        GET /session/user_id (the request path with authentication)
 *   upload          POST /projects/:id/inject_uploads of one 1 KiB file, one name per request
 *   upload, clash   the same, always the same name (`clip.mov`, `clip (2).mov` …)
 *   upload + key    the same with a fresh Idempotency-Key per request
 *   replay          a repeat under a key already answered
 *   addassets       POST /projects/:id/addassets of one file already in the tree (rows only)
 *
 * Then `--concurrency` uploads of one name in flight (uploads/s), and one move_contents of
 * `--files` registered files (file by file) and one rename_folder of their folder (ms), with the
 * asset rows following.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { scratchDatabase } from '../core/testing/index.js'

const HERE = fileURLToPath(import.meta.url)
const API = '/api/v1'

interface Ready {
  port: number
  token: string
}

async function childMain(spec: { dataDir: string; databaseUrl?: string }) {
  const { MamRuntime } = await import('../core/runtime.js')
  const { builtinPlugins } = await import('../plugins/index.js')
  const { createApiKey, createUser } = await import('../core/auth/accounts.js')
  const runtime = await MamRuntime.create({ plugins: builtinPlugins, config: { dataDir: spec.dataDir, databaseUrl: spec.databaseUrl, logLevel: 'silent' }, runJobs: false })
  const em = runtime.container.resolve<any>('em').fork()
  const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
  const server = http.createServer(runtime.callback())
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  process.send!({ port: (server.address() as AddressInfo).port, token: (await createApiKey(em, admin, 'bench')).secret } satisfies Ready)
  const stop = () => {
    server.closeAllConnections()
    server.close(() => void runtime.close().finally(() => process.exit(0)))
  }
  process.once('SIGTERM', stop)
  process.once('disconnect', stop)
}

function startServer(spec: { dataDir: string; databaseUrl?: string }): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = fork(HERE, ['--serve', JSON.stringify(spec)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    child.once('message', (ready: Ready) => resolve({ child, ready }))
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before listening`)))
  })
}

const stopServer = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })


async function call(base: string, token: string, method: string, route: string, body?: { json?: unknown; form?: FormData }, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${API}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body?.json === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body?.form ?? (body?.json === undefined ? undefined : JSON.stringify(body.json)),
  })
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${method} ${route}: ${res.status} ${text}`)
  return text ? JSON.parse(text) : undefined
}

const oneFile = (name: string) => {
  const form = new FormData()
  form.append('file', new Blob([randomBytes(1024)]), name)
  return form
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

async function time(label: string, requests: number, fn: (i: number) => Promise<unknown>) {
  for (let i = 0; i < Math.min(10, requests); i++) await fn(-1 - i) // warm-up
  const ms: number[] = []
  for (let i = 0; i < requests; i++) {
    const started = performance.now()
    await fn(i)
    ms.push(performance.now() - started)
  }
  ms.sort((a, b) => a - b)
  return { label, p50: percentile(ms, 50), p99: percentile(ms, 99) }
}

async function runOne(db: string, options: { requests: number; concurrency: number; files: number }, adminUrl?: string) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-uploads-'))
  const scratch = db === 'postgresql' ? await scratchDatabase('postgresql', adminUrl!) : undefined
  const { child, ready } = await startServer({ dataDir, databaseUrl: scratch?.databaseUrl })
  const base = `http://127.0.0.1:${ready.port}`
  const api = (method: string, route: string, body?: { json?: unknown; form?: FormData }, headers?: Record<string, string>) => call(base, ready.token, method, route, body, headers)
  try {
    const project = (await api('POST', '/projects', { json: { name: 'Bench uploads' } })).project
    const upload = (name: string, headers?: Record<string, string>) => api('POST', `/projects/${project.id}/inject_uploads`, { form: oneFile(name) }, headers)
    await upload('kept.bin')
    const rows = [
      await time('baseline', options.requests, () => api('GET', '/session/user_id')),
      await time('upload', options.requests, (i) => upload(`file ${i}.bin`)),
      await time('upload, clash', options.requests, () => upload('clip.mov')),
      await time('upload + key', options.requests, (i) => upload(`keyed ${i}.bin`, { 'Idempotency-Key': `key-${i}` })),
      // the same name and size as the first keyed upload: the same request
      await time('replay', options.requests, () => upload('keyed 0.bin', { 'Idempotency-Key': 'key-0' })),
      await time('addassets', options.requests, () => api('POST', `/projects/${project.id}/addassets`, { json: { paths: ['kept.bin'] } })),
    ]
    let started = performance.now()
    let next = 0
    const total = options.requests
    await Promise.all(Array.from({ length: options.concurrency }, async () => { while (next++ < total) await upload('same.mov') }))
    const perSecond = total / ((performance.now() - started) / 1000)

    const files = Array.from({ length: options.files }, (_, i) => `Loose/file ${i}.txt`)
    await mkdir(path.join(project.path, 'Loose'), { recursive: true })
    for (const f of files) await writeFile(path.join(project.path, f), f)
    for (let i = 0; i < files.length; i += 1000) await api('POST', `/projects/${project.id}/addassets`, { json: { paths: files.slice(i, i + 1000) } })
    started = performance.now()
    await api('PUT', `/projects/${project.id}/move_contents`, { json: { source: files, destination: 'Moved' } })
    const moveMs = performance.now() - started
    started = performance.now()
    await api('PUT', `/projects/${project.id}/rename_folder`, { json: { path: 'Moved', name: 'Renamed' } })
    const renameMs = performance.now() - started
    return { db, rows, perSecond, moveMs, renameMs }
  } finally {
    await stopServer(child)
    await scratch?.drop()
    await rm(dataDir, { recursive: true, force: true })
  }
}

async function main() {
  const { values } = parseArgs({ options: { requests: { type: 'string', default: '200' }, concurrency: { type: 'string', default: '8' }, files: { type: 'string', default: '1000' }, only: { type: 'string' } } })
  const adminUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
  const dbs = (values.only?.split(',') ?? ['sqlite', 'postgresql']).filter((d) => d === 'sqlite' || adminUrl)
  const options = { requests: Number(values.requests), concurrency: Number(values.concurrency), files: Number(values.files) }
  console.log(`uploads bench: ${options.requests} sequential requests each, ${options.concurrency} in flight, ${options.files} files moved; load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  for (const db of dbs) {
    const r = await runOne(db, options, adminUrl)
    const baseline = r.rows[0].p50
    console.log(`\n[${db}]`)
    console.log('| request | p50 ms | p99 ms | p50 / baseline |\n|---|---|---|---|')
    for (const row of r.rows) console.log(`| ${row.label} | ${row.p50.toFixed(2)} | ${row.p99.toFixed(2)} | ${(row.p50 / baseline).toFixed(1)}× |`)
    console.log(`\n${options.concurrency} uploads of one name in flight: ${r.perSecond.toFixed(0)} uploads/s`)
    console.log(`move_contents of ${options.files} registered files: ${r.moveMs.toFixed(0)} ms (${(r.moveMs / options.files).toFixed(2)} ms per file); rename_folder of their folder: ${r.renameMs.toFixed(0)} ms`)
  }
}

if (process.argv[2] === '--serve') void childMain(JSON.parse(process.argv[3]))
else
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
