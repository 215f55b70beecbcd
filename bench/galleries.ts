/**
 * Galleries benchmark: a gallery of 10,000 entries in a 5-level folder tree, a review request over
 * it with 5 approvers, then the listing and the review status over HTTP beside raw SQL of the same rows.
 *
 *   npx tsc -p . && node dist/bench/galleries.js [--entries 10000] [--requests 300] [--only sqlite,postgresql]
 *
 * For each database (SQLite, and PostgreSQL when MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL
 * names a server) a mamkit server runs in a child process with a fresh data dir and database; the
 * child seeds the rows with knex (10,000 uploads over HTTP would measure the ingest, not galleries)
 * and reports its own CPU time. This process is the client. Timed, `--requests` sequential each:
 *
 *   assets page    GET /galleries/:id/assets?path=L1&recursive=true&per_page=100&page=<1..50> (entries, attributes, review status)
 *   count_assets   GET /galleries/:id/count_assets?path=L1 (recursive count under the top folder)
 *   raw page       the same 100 entries with one SQL join, and their review status with one grouped query, no HTTP
 *   status 1,000   ReviewService.statusOf for 1,000 assets × 5 approvers (one query), in the server process
 *
 * Figures: req/s, p50/p99, the server's CPU per request, and the ratio HTTP / raw SQL (absolute numbers drift).
 */
import { fork, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { scratchDatabase } from '../core/testing/index.js'

const HERE = fileURLToPath(import.meta.url)
const API = '/api/v1'
const PAGE = 100

interface Ready {
  port: number
  adminToken: string
  userToken: string
  userId: number
}

type Msg = { op: 'seed'; projectId: number; galleryId: number; entries: number; approverIds: number[] } | { op: 'cpu' } | { op: 'raw'; galleryId: number; requests: number } | { op: 'status'; galleryId: number; requests: number }

// ---------------------------------------------------------------------------------------------
// the server (child process)
// ---------------------------------------------------------------------------------------------

/** folder of entry i: 5 levels, 10 × 5 × 4 × 3 × 2 leaves under `L1` */
const folderOf = (i: number) => `L1/a${i % 10}/b${Math.floor(i / 10) % 5}/c${Math.floor(i / 50) % 4}/d${Math.floor(i / 200) % 3}`

async function childMain(spec: { dataDir: string; databaseUrl?: string }) {
  const { MamRuntime } = await import('../core/runtime.js')
  const { builtinPlugins } = await import('../plugins/index.js')
  const { createApiKey, createUser } = await import('../core/auth/accounts.js')
  const runtime = await MamRuntime.create({ plugins: builtinPlugins, config: { dataDir: spec.dataDir, databaseUrl: spec.databaseUrl, logLevel: 'silent' }, runJobs: false })
  const em = runtime.container.resolve<any>('em').fork()
  const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
  const user = await createUser(em, { username: 'bench-editor', password: 'bench-editor-password' })
  const ready: Ready = { port: 0, adminToken: (await createApiKey(em, admin, 'bench')).secret, userToken: (await createApiKey(em, user, 'bench')).secret, userId: user.id }
  const server = http.createServer(runtime.callback())
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  ready.port = (server.address() as AddressInfo).port
  const knex = runtime.db.knex
  const review = runtime.container.resolve<any>('galleries.review')
  const { galleries: gal } = { galleries: runtime.container.resolve<any>('galleries.service') }

  process.on('message', async (m: Msg) => {
    if (m.op === 'cpu') return process.send!({ cpu: process.cpuUsage() })
    if (m.op === 'seed') {
      const now = new Date()
      const ids: number[] = []
      for (let i = 0; i < m.entries; i += 500) {
        const rows = Array.from({ length: Math.min(500, m.entries - i) }, (_, k) => {
          const n = i + k
          return { uuid: randomUUID(), project_id: m.projectId, path: `clip${n}.mov`, folder: '', name: `clip${n}.mov`, type: 'video', size: 1000, online: true, analysis_state: 'ready', proxy_state: 'ready', metadata: JSON.stringify({ width: 1920, height: 1080, frame_rate: 25, codec_private: 'x' }), proxy_version: 2, proxies: JSON.stringify({ lowres: 'lowres.mp4.enc', poster: 'poster.jpg.enc' }), created_at: now, updated_at: now }
        })
        const made = await knex('assets').insert(rows).returning('id')
        ids.push(...made.map((r: any) => Number(typeof r === 'object' ? r.id : r)))
      }
      const folders = new Set<string>()
      for (let i = 0; i < m.entries; i++) {
        const parts = folderOf(i).split('/')
        for (let d = 1; d <= parts.length; d++) folders.add(parts.slice(0, d).join('/'))
      }
      const folderRows = [...folders].map((p) => ({ gallery_id: m.galleryId, path: p, created_at: now, updated_at: now }))
      for (let i = 0; i < folderRows.length; i += 400) await knex('gallery_folders').insert(folderRows.slice(i, i + 400))
      for (let i = 0; i < ids.length; i += 500)
        await knex('gallery_entries').insert(ids.slice(i, i + 500).map((id, k) => ({ gallery_id: m.galleryId, asset_id: id, folder: folderOf(i + k), name: `clip${i + k}.mov`, uploaded: false, selected: (i + k) % 7 === 0, rating: (i + k) % 6, created_at: now, updated_at: now })))
      // one request over the top folder, 5 approvers; each approver decided on 60 % of the assets
      const [req] = await knex('review_requests').insert({ gallery_id: m.galleryId, requested_by_id: ready.userId, rule: 'all', state: 'open', created_at: now, updated_at: now }).returning('id')
      const requestId = Number(typeof req === 'object' ? req.id : req)
      await knex('review_request_items').insert({ request_id: requestId, folder: 'L1' })
      const approvers: number[] = []
      for (const uid of m.approverIds) {
        const [a] = await knex('review_approvers').insert({ request_id: requestId, user_id: uid, created_at: now, updated_at: now }).returning('id')
        approvers.push(Number(typeof a === 'object' ? a.id : a))
      }
      const statuses = ['approved', 'approved', 'needs_changes', 'rejected']
      for (const [ai, approver] of approvers.entries()) {
        const decided = ids.filter((_, i) => (i + ai) % 5 < 3)
        for (let i = 0; i < decided.length; i += 500)
          await knex('review_statuses').insert(decided.slice(i, i + 500).map((asset_id, k) => ({ request_id: requestId, approver_id: approver, asset_id, status: statuses[(i + k + ai) % 4], created_at: now, updated_at: now })))
      }
      if (runtime.db.dialect === 'postgresql') await knex.raw('analyze')
      return process.send!({ seeded: ids.length })
    }
    // the same rows as one assets page, without HTTP, JSON or access checks: the SQL floor
    const timed = async (requests: number, fn: (i: number) => Promise<unknown>) => {
      for (let i = 0; i < 20; i++) await fn(i)
      const ms: number[] = []
      const cpu0 = process.cpuUsage()
      for (let i = 0; i < requests; i++) {
        const t0 = performance.now()
        await fn(i)
        ms.push(performance.now() - t0)
      }
      const cpu = process.cpuUsage(cpu0)
      return { ms, cpuUs: (cpu.user + cpu.system) / requests }
    }
    if (m.op === 'raw')
      return process.send!(
        await timed(m.requests, async (i) => {
          const rows = await gal.entriesQuery(m.galleryId, 'L1', true).orderBy([{ column: 'e.folder' }, { column: 'e.name' }]).limit(PAGE).offset((i % 50) * PAGE)
          await review.statusOf(m.galleryId, rows.map((r: any) => Number(r.asset_id)))
        }),
      )
    if (m.op === 'status') {
      const all: number[] = (await knex('gallery_entries').where({ gallery_id: m.galleryId }).orderBy('id').limit(1000).pluck('asset_id')).map(Number)
      return process.send!(await timed(m.requests, () => review.statusOf(m.galleryId, all)))
    }
  })
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

function ask<T>(child: ChildProcess, msg: Msg): Promise<T> {
  return new Promise((resolve) => {
    child.once('message', (reply: T) => resolve(reply))
    child.send(msg)
  })
}


const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

interface Figure {
  label: string
  perSecond: number
  p50: number
  p99: number
  cpuMsPerRequest: number
}

const figure = (label: string, ms: number[], cpuUs: number): Figure => {
  const sorted = [...ms].sort((a, b) => a - b)
  return { label, perSecond: 1000 / (ms.reduce((a, b) => a + b, 0) / ms.length), p50: percentile(sorted, 50), p99: percentile(sorted, 99), cpuMsPerRequest: cpuUs / 1000 }
}

async function runOne(db: 'sqlite' | 'postgresql', options: { entries: number; requests: number }, adminUrl?: string) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-galleries-'))
  const scratch = db === 'postgresql' ? await scratchDatabase('postgresql', adminUrl!) : undefined
  const child = fork(HERE, ['--serve', JSON.stringify({ dataDir, databaseUrl: scratch?.databaseUrl })], { execArgv: ['--enable-source-maps'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('message', (r: Ready) => resolve(r))
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before listening`)))
  })
  const base = `http://127.0.0.1:${ready.port}${API}`
  const call = async (method: string, route: string, token: string, json?: unknown, expected = 200) => {
    const res = await fetch(`${base}${route}`, { method, headers: { authorization: `Bearer ${token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) }, body: json === undefined ? undefined : JSON.stringify(json) })
    const text = await res.text()
    if (res.status !== expected) throw new Error(`${method} ${route}: ${res.status} ${text}`)
    return JSON.parse(text)
  }
  try {
    const project = (await call('POST', '/projects', ready.userToken, { project: { name: 'Bench source' } }, 201)).project
    const gallery = (await call('POST', '/galleries', ready.userToken, { gallery: { name: 'Bench gallery' } }, 201)).gallery
    const approverIds: number[] = []
    for (let i = 0; i < 5; i++) approverIds.push((await call('POST', '/users', ready.adminToken, { user: { username: `approver${i}`, password: 'approver-password-1', email: `a${i}@example.test` } }, 201)).user.id)
    const t0 = performance.now()
    await ask(child, { op: 'seed', projectId: project.id, galleryId: gallery.id, entries: options.entries, approverIds })
    const seedSeconds = (performance.now() - t0) / 1000

    const http = async (label: string, route: (i: number) => string) => {
      for (let i = 0; i < 20; i++) await call('GET', route(i), ready.userToken)
      const before = (await ask<{ cpu: NodeJS.CpuUsage }>(child, { op: 'cpu' })).cpu
      const ms: number[] = []
      for (let i = 0; i < options.requests; i++) {
        const s = performance.now()
        await call('GET', route(i), ready.userToken)
        ms.push(performance.now() - s)
      }
      const after = (await ask<{ cpu: NodeJS.CpuUsage }>(child, { op: 'cpu' })).cpu
      return figure(label, ms, (after.user - before.user + after.system - before.system) / options.requests)
    }
    const first = await call('GET', `/galleries/${gallery.id}/assets?path=L1&recursive=true&per_page=${PAGE}`, ready.userToken)
    if (first.assets.length !== PAGE || !first.assets.some((a: any) => a.review_status)) throw new Error('the listing does not show what the bench expects')
    const count = await call('GET', `/galleries/${gallery.id}/count_assets?path=L1`, ready.userToken)
    if (count.hash.count !== options.entries) throw new Error(`count_assets says ${count.hash.count}`)
    const page = await http('assets page (100, recursive, with review status)', (i) => `/galleries/${gallery.id}/assets?path=L1&recursive=true&per_page=${PAGE}&page=${(i % 50) + 1}`)
    const counted = await http('count_assets (10,000 under L1)', () => `/galleries/${gallery.id}/count_assets?path=L1`)
    const rawReply = await ask<{ ms: number[]; cpuUs: number }>(child, { op: 'raw', galleryId: gallery.id, requests: options.requests })
    const raw = figure('raw SQL: same page + status query', rawReply.ms, rawReply.cpuUs)
    const statusReply = await ask<{ ms: number[]; cpuUs: number }>(child, { op: 'status', galleryId: gallery.id, requests: Math.min(options.requests, 100) })
    const status = figure('review status, 1,000 assets × 5 approvers (one query)', statusReply.ms, statusReply.cpuUs)
    return { db, seedSeconds, figures: [page, counted, raw, status], ratio: { p50: page.p50 / raw.p50, cpu: page.cpuMsPerRequest / raw.cpuMsPerRequest } }
  } finally {
    await new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.once('exit', () => resolve())
      child.kill('SIGTERM')
    })
    await scratch?.drop()
    await rm(dataDir, { recursive: true, force: true })
  }
}

async function main() {
  const { values } = parseArgs({ options: { entries: { type: 'string', default: '10000' }, requests: { type: 'string', default: '300' }, only: { type: 'string' } } })
  const options = { entries: Number(values.entries), requests: Number(values.requests) }
  const adminUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
  const dbs = (['sqlite', 'postgresql'] as const).filter((d) => (values.only ? values.only.split(',').includes(d) : d === 'sqlite' || adminUrl))
  console.log(`galleries bench: ${options.entries} entries (5-level tree), ${options.requests} sequential requests each; ${os.cpus().length} CPUs, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  for (const db of dbs) {
    const r = await runOne(db, options, adminUrl)
    console.log(`\n[${db}] seeded in ${r.seedSeconds.toFixed(1)} s`)
    console.log('| | req/s | p50 | p99 | server CPU / request |\n|---|---|---|---|---|')
    for (const f of r.figures) console.log(`| ${f.label} | ${f.perSecond.toFixed(0)} | ${f.p50.toFixed(1)} ms | ${f.p99.toFixed(1)} ms | ${f.cpuMsPerRequest.toFixed(2)} ms |`)
    console.log(`assets page over HTTP / raw SQL: ${r.ratio.p50.toFixed(1)}× the p50, ${r.ratio.cpu.toFixed(1)}× the CPU`)
  }
}

if (process.argv[2] === '--serve') void childMain(JSON.parse(process.argv[3]))
else
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
