/**
 * Assets benchmark: the media pipeline of the assets plugin against ceilings measured in the SAME run.
 *
 *   npx tsc -p . && node dist/bench/assets.js [--files 1000] [--proxy-seconds 25] [--big-mb 1024]
 *       [--folders 1000] [--per-folder 100] [--requests 200] [--probes 100]
 *       [--only sqlite,postgresql] [--sections ingest,proxy,hash,zip,list] [--json]
 *       [--ingest-on sqlite,postgresql]   # full ingest on these (default: the first database)
 *       [--profile DIR]   # --cpu-prof of the mamkit servers into DIR/<database> (bench/profile-top.ts reads them)
 *
 * SQLite always; PostgreSQL too when MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL names a
 * server (a scratch database is created and dropped). For each database a mamkit server runs in a
 * child process of its own (fresh data dir and database, jobs on, as `mamkit serve` would), so that
 * its memory can be read from /proc/<pid>/status; this process is the HTTP client and also asks the
 * child, over IPC, to run SQL on its own knex (polling states, bulk inserts, EXPLAIN).
 *
 *   ingest  register: (every database) POST /projects/:id/addassets of 100 and of --files paths
 *           with the job runner stopped: the cost of registering alone, per file.
 *           analysis: (--ingest-on, default the first database) --files copies of a 1 s 160x120
 *           H.264/AAC clip in folders of 100; one addassets; wall time until every asset has
 *           analysis_state ready → assets/s. Ceiling: the same ffprobe command run straight, 4 in
 *           flight (the job runner's default concurrency), on the same files.
 *           The proxy jobs that follow each analysis are cancelled once the count is taken.
 *           When the npm package's static ffprobe is installed and is not the one found first, the
 *           analysis runs again in a second server with MAMKIT_FFPROBE pointing at it (ceiling: that
 *           binary alone): a distribution's dynamically linked ffprobe spends most of a small
 *           file's probe loading its ~200 shared libraries.
 *   proxy   (first database) a 1920x1080 25 fps clip (lavfi testsrc2 + sine, H.264 superfast)
 *           through the assets.proxy job (after addassets, then again by POST /assets/:id/reencode)
 *           → multiple of real time; beside a plain `ffmpeg -preset ultrafast -crf 23` 720p encode
 *           of the same file (the ceiling of PERFORMANCE.md) and mamkit's own proxy ffmpeg run
 *           (buildProxies: low-res, poster and thumbnail strip in one decode) called straight, each
 *           twice, in turn with the job.
 *   hash    (this process) a --big-mb file: plain read (fs stream, 1 MiB chunks, discarded),
 *           O_DIRECT read (dd, the disk itself), SHA-256/CRC-32 in memory, then the hash worker
 *           (core/storage/sums.js, SUMS_WORKER, in piscina) CRC-32 only, CRC-32 + SHA-256, and two at once;
 *           plus the assets.rehash job end to end on the first database (3 runs, median).
 *   zip     (first database) that file as an asset: prepare_download_highres once with the CRC-32
 *           stored by rehash and once without (the assets.package job reads the file once for it:
 *           ceiling a plain read), then GET download_highres over loopback, the zip laid out from
 *           the original at download time (3 rounds in turn with the ceiling, medians), each with
 *           MB/s and the server's peak RSS growth; the download ceiling is a bare Koa server
 *           streaming the original file, in a child process too.
 *   upload  (first database) POST inject_uploads of the --big-mb file as one multipart part from a
 *           file-backed Blob: MB/s beside a stream copy of the file, and the server's RSS growth
 *           (the upload is streamed to disk, never held in memory).
 *   list    (every database) 100,000 asset rows (1,000 folders × 100) inserted with knex batch
 *           inserts, ANALYZE (PostgreSQL: VACUUM ANALYZE), then 200 sequential requests each of:
 *           GET /session/user_id (the baseline), a folder page, the first and the 500th page of
 *           the whole project (recursive); p50/p99. The SQL of each listing is captured, EXPLAINed and timed alone
 *           inside the server.
 *
 * MAMKIT_BENCH_NODE_ARGS adds node flags to the child processes (e.g. "--trace-gc").
 *
 * Every figure carries the 1-minute load average at the time it was taken.
 */
import { execFile, fork, spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes, randomFillSync, randomUUID } from 'node:crypto'
import { createReadStream, createWriteStream, readFileSync, writeFileSync } from 'node:fs'
import { pipeline } from 'node:stream/promises'
import { copyFile, link, mkdir, mkdtemp, open, rm, stat } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { parseArgs, promisify } from 'node:util'
import { crc32 } from 'node:zlib'
import { scratchDatabase } from '../core/testing/index.js'
import { SUMS_WORKER, sumsOrThrow, type DescriptorSumsTask } from '../core/index.js'

const HERE = fileURLToPath(import.meta.url)
const requireModule = createRequire(import.meta.url)
const HASH_WORKER = fileURLToPath(SUMS_WORKER)
const API = '/api/v1'
const MiB = 1 << 20
const run = promisify(execFile)

type Db = 'sqlite' | 'postgresql'

interface ServerSpec {
  dataDir: string
  databaseUrl?: string
}

/** ffmpeg and ffprobe as the server finds them (MAMKIT_FFMPEG/MAMKIT_FFPROBE, PATH, npm packages) */
const tools = { ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', bundledFfprobe: null as string | null }

interface Ready {
  port: number
  token: string
  dialect: Db
}

interface Rpc {
  id: number
  op: 'sql' | 'sql-time' | 'insert-assets' | 'capture-start' | 'capture-stop' | 'jobs-stop' | 'jobs-start'
  sql?: string
  /** sql-time: runs */
  n?: number
  bindings?: unknown[]
  projectId?: number
  folders?: number
  perFolder?: number
}

// ---------------------------------------------------------------------------------------------
// the asset rows of the listing section (shared by both processes)
// ---------------------------------------------------------------------------------------------

const pad = (n: number, width: number) => String(n).padStart(width, '0')
/** 20 cards a shooting day: Shoot/Day 01/Card 01 … Shoot/Day 50/Card 20 */
const folderName = (f: number) => `Shoot/Day ${pad(Math.floor(f / 20) + 1, 2)}/Card ${pad((f % 20) + 1, 2)}`
const fileName = (f: number, i: number) => `A${pad(f, 4)}C${pad(i + 1, 3)}_${pad(240501 + (f % 28), 6)}.mov`

function assetRow(projectId: number, f: number, i: number, now: Date) {
  const folder = folderName(f)
  const name = fileName(f, i)
  return {
    uuid: randomUUID(),
    project_id: projectId,
    path: `${folder}/${name}`,
    folder,
    name,
    type: 'video',
    size: 1_500_000_000 + f * 1000 + i,
    mtime: now,
    inode: 1_000_000 + f * 1000 + i,
    device: 2049,
    online: true,
    analysis_state: 'ready',
    proxy_state: 'ready',
    metadata: JSON.stringify({
      container: 'mov,mp4,m4a,3gp,3g2,mj2',
      duration: 12.48 + i,
      bit_rate: 147_000_000,
      creation_date: '2024-05-01T08:00:00.000000Z',
      start_timecode: `10:${pad(f % 60, 2)}:${pad(i % 60, 2)}:00`,
      reel_name: `A${pad(f, 4)}`,
      clip_name: name.replace(/\.mov$/, ''),
      video_codec: 'prores',
      video_profile: 'HQ',
      width: 3840,
      height: 2160,
      frame_rate: 25,
      pixel_format: 'yuv422p10le',
      field_order: 'progressive',
      audio_codec: 'pcm_s24le',
      audio_channels: 4,
      audio_streams: 4,
      sample_rate: 48000,
    }),
    duration: 12.48 + i,
    description: null,
    crc32: randomBytes(4).toString('hex'),
    sha256: randomBytes(32).toString('hex'),
    hashed_at: now,
    proxy_key_enc: null,
    proxy_version: 1,
    proxies: JSON.stringify({ lowres: 'lowres.mp4.enc', poster: 'poster.jpg.enc', thumbnails: 'thumbnails.jpg.enc' }),
    proxy_error: null,
    analysis_error: null,
    metadata_changed_at: now,
    created_at: now,
    updated_at: now,
  }
}

// ---------------------------------------------------------------------------------------------
// child processes: the mamkit server, and the bare Koa ceiling
// ---------------------------------------------------------------------------------------------

async function serverMain(spec: ServerSpec) {
  const { MamRuntime } = await import('../core/runtime.js')
  const { builtinPlugins } = await import('../plugins/index.js')
  const { createApiKey, createUser } = await import('../core/auth/accounts.js')
  const runtime = await MamRuntime.create({
    plugins: builtinPlugins,
    config: { dataDir: spec.dataDir, databaseUrl: spec.databaseUrl, logLevel: process.env.MAMKIT_BENCH_LOG ?? 'silent' },
  })
  const knex = runtime.db.knex
  const em = runtime.container.resolve<any>('em').fork()
  const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
  const token = (await createApiKey(em, admin, 'bench')).secret

  let captured: Array<{ sql: string; bindings: unknown[] }> | null = null
  // knex reports PostgreSQL queries with native `$n` placeholders; knex.raw (EXPLAIN, timing) takes `?`
  knex.on('query', (q: { sql: string; bindings?: unknown[] }) => captured?.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] }))

  const handle = async (msg: Rpc): Promise<unknown> => {
    switch (msg.op) {
      case 'sql': {
        const result = await knex.raw(msg.sql!, (msg.bindings ?? []) as any)
        return runtime.db.dialect === 'postgresql' ? result.rows : result
      }
      case 'sql-time': {
        // the query alone, inside the server process: p50 of n runs (ms)
        const ms: number[] = []
        for (let i = 0; i < msg.n!; i++) {
          const t0 = performance.now()
          await knex.raw(msg.sql!, (msg.bindings ?? []) as any)
          ms.push(performance.now() - t0)
        }
        return ms.sort((a, b) => a - b)[Math.floor(ms.length / 2)]
      }
      case 'insert-assets': {
        const started = performance.now()
        const now = new Date()
        let batch: ReturnType<typeof assetRow>[] = []
        await knex.transaction(async (trx) => {
          for (let f = 0; f < msg.folders!; f++) {
            for (let i = 0; i < msg.perFolder!; i++) {
              batch.push(assetRow(msg.projectId!, f, i, now))
              if (batch.length === 500) {
                await trx('assets').insert(batch)
                batch = []
              }
            }
          }
          if (batch.length) await trx('assets').insert(batch)
        })
        return performance.now() - started
      }
      case 'jobs-stop':
        await runtime.runner.close()
        return null
      case 'jobs-start':
        runtime.runner.start()
        return null
      case 'capture-start':
        captured = []
        return null
      case 'capture-stop': {
        const out = captured
        captured = null
        return out
      }
    }
  }
  process.on('message', (msg: Rpc) => {
    handle(msg).then(
      (result) => process.send!({ id: msg.id, result }),
      (err: Error) => process.send!({ id: msg.id, error: err.stack ?? String(err) }),
    )
  })

  const server = http.createServer(runtime.callback())
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  process.send!({ ready: { port: (server.address() as AddressInfo).port, token, dialect: runtime.db.dialect } satisfies Ready })
  const stop = () => {
    server.closeAllConnections()
    server.close(() => void runtime.close().finally(() => process.exit(0)))
  }
  process.once('SIGTERM', stop)
  process.once('disconnect', stop)
}

/** the download ceiling: bare Koa answering every request with one file, streamed with 1 MiB chunks */
async function koaMain(file: string) {
  const { default: Koa } = await import('koa')
  const size = (await stat(file)).size
  const app = new Koa()
  app.use((ctx) => {
    ctx.type = 'application/zip'
    ctx.length = size
    ctx.body = createReadStream(file, { highWaterMark: MiB })
  })
  const server = http.createServer(app.callback())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  process.send!({ ready: { port: (server.address() as AddressInfo).port, token: '', dialect: 'sqlite' } satisfies Ready })
  const stop = () => {
    server.closeAllConnections()
    server.close(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('disconnect', stop)
}

class Child {
  private nextId = 1
  private readonly pending = new Map<number, { resolve(v: any): void; reject(e: Error): void }>()
  private constructor(
    readonly child: ChildProcess,
    readonly ready: Ready,
  ) {
    child.on('message', (msg: any) => {
      const p = this.pending.get(msg.id)
      if (!p) return
      this.pending.delete(msg.id)
      if (msg.error) p.reject(new Error(msg.error))
      else p.resolve(msg.result)
    })
  }

  static start(args: string[], profileDir?: string, env: Record<string, string> = {}): Promise<Child> {
    // MAMKIT_BENCH_NODE_ARGS: more node flags for the child processes (e.g. --trace-gc)
    const extra = process.env.MAMKIT_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []
    const execArgv = ['--enable-source-maps', ...extra, ...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])]
    // advanced serialisation: Dates and Buffers cross the IPC channel as themselves
    const child = fork(HERE, args, { execArgv, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' })
    return new Promise((resolve, reject) => {
      const onMessage = (msg: any) => {
        if (!msg?.ready) return
        child.off('message', onMessage)
        resolve(new Child(child, msg.ready))
      }
      child.on('message', onMessage)
      child.once('exit', (code) => reject(new Error(`child exited (${code}) before listening`)))
    })
  }

  get pid() {
    return this.child.pid!
  }
  get base() {
    return `http://127.0.0.1:${this.ready.port}`
  }

  rpc<T = any>(msg: Omit<Rpc, 'id'>): Promise<T> {
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.child.send({ ...msg, id })
    })
  }
  sql<T = any>(sql: string, bindings: unknown[] = []): Promise<T[]> {
    return this.rpc({ op: 'sql', sql, bindings })
  }

  async api(method: string, route: string, json?: unknown, expected = 200): Promise<{ status: number; body: any; headers: Headers }> {
    const res = await fetch(`${this.base}${API}${route}`, {
      method,
      headers: { authorization: `Bearer ${this.ready.token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: json === undefined ? undefined : JSON.stringify(json),
    })
    const text = await res.text()
    const body = text && /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : text
    if (res.status !== expected) throw new Error(`${method} ${route}: ${res.status} ${text.slice(0, 500)}`)
    return { status: res.status, body, headers: res.headers }
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve()
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000)
      this.child.once('exit', () => {
        clearTimeout(timer)
        resolve()
      })
      this.child.kill('SIGTERM')
    })
  }
}


// ---------------------------------------------------------------------------------------------
// measuring helpers
// ---------------------------------------------------------------------------------------------

const load = () => os.loadavg()[0]
const percentile = (sorted: number[], p: number) => sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1))]
const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b)
const toMs = (v: unknown): number => (v instanceof Date ? v.getTime() : typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : Date.parse(String(v)))
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const log = (...args: unknown[]) => console.error(`[${new Date().toISOString().slice(11, 19)} load ${load().toFixed(1)}]`, ...args)

async function waitFor<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs: number, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await check()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(everyMs)
  }
}

/** CPU time (ms) of this process's waited-for children: fields 16/17 of /proc/self/stat */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').replace(/^.*\) /, '').split(' ')
  // after "pid (comm) " the fields start at 3 (state); cutime = 16, cstime = 17
  const tick = 1000 / 100
  return (Number(fields[16 - 3]) + Number(fields[17 - 3])) * tick
}

function procStatus(pid: number): { rssKb: number; hwmKb: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN)
  return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM') }
}

/** samples a process's RSS every 20 ms; VmHWM is reset first (clear_refs 5) so it covers the window too */
function watchMemory(pid: number) {
  let reset = false
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5')
    reset = true
  } catch {
    // not permitted here: the sampled maximum alone
  }
  const base = procStatus(pid).rssKb
  let peak = base
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, procStatus(pid).rssKb)
    } catch {
      // exited
    }
  }, 20)
  return {
    stop() {
      clearInterval(timer)
      const s = procStatus(pid)
      const top = Math.max(peak, s.rssKb, reset ? s.hwmKb : 0)
      return { baseMb: base / 1024, peakMb: top / 1024, growthMb: (top - base) / 1024 }
    },
  }
}

async function timeProcess(cmd: string, args: string[]): Promise<number> {
  const started = performance.now()
  await new Promise<void>((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} failed (${code}): ${stderr}`))))
  })
  return (performance.now() - started) / 1000
}
const ffmpeg = (args: string[]) => timeProcess(tools.ffmpeg, ['-hide_banner', '-nostdin', '-y', '-v', 'error', ...args])

/** GETs a URL and discards the body; answers bytes, seconds and the Content-Length header */
function download(url: string, headers: Record<string, string> = {}): Promise<{ bytes: number; seconds: number; status: number; length: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const req = http.get(url, { headers, agent: false }, (res) => {
      let bytes = 0
      res.on('data', (chunk: Buffer) => (bytes += chunk.length))
      res.on('end', () => resolve({ bytes, seconds: (performance.now() - started) / 1000, status: res.statusCode!, length: Number(res.headers['content-length']) }))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
}

async function readThrough(file: string, highWaterMark = MiB): Promise<{ bytes: number; seconds: number }> {
  const started = performance.now()
  let bytes = 0
  for await (const chunk of createReadStream(file, { highWaterMark })) bytes += (chunk as Buffer).length
  return { bytes, seconds: (performance.now() - started) / 1000 }
}

interface Latency {
  label: string
  p50: number
  p99: number
  mean: number
  load: number
}

async function time(label: string, requests: number, fn: (i: number) => Promise<unknown>): Promise<Latency> {
  for (let i = 0; i < Math.min(20, requests); i++) await fn(i)
  const ms: number[] = []
  const l = load()
  for (let i = 0; i < requests; i++) {
    const started = performance.now()
    await fn(i)
    ms.push(performance.now() - started)
  }
  const sorted = sortNum(ms)
  return { label, p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean: ms.reduce((a, b) => a + b, 0) / ms.length, load: Math.max(l, load()) }
}

// ---------------------------------------------------------------------------------------------
// sections
// ---------------------------------------------------------------------------------------------

interface Fixtures {
  dir: string
  smallClip: string
  bigFile: string
  bigBytes: number
}

interface RegisterResult {
  db: Db
  files: number
  seconds: number
  load: number
}

interface IngestResult {
  db: Db
  /** the ffprobe binary the server and the ceiling used */
  ffprobe: string
  files: number
  requestSeconds: number
  seconds: number
  perSecond: number
  /** analysed when the addassets response came, and the rate from then on (no registering competing) */
  readyAtResponse: number
  perSecondAfterResponse: number
  failed: number
  jobP50Ms: number
  jobP90Ms: number
  /** proxy jobs that ran (one at a time) before the last analysis ended */
  proxiesMeanwhile: number
  probeWallP50Ms: number
  probeCpuMs: number
  ceilingPerSecond: number
  load: number
}

const probeOnce = (ffprobe: string, file: string) => run(ffprobe, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', '-protocol_whitelist', 'file', `file:${file}`], { maxBuffer: 16 * MiB })

/** the same ffprobe command as probe.ts, `files` times, `concurrency` in flight: files/s */
async function probeCeiling(ffprobe: string, files: string[], concurrency: number): Promise<number> {
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < files.length) {
        await probeOnce(ffprobe, files[next++])
      }
    }),
  )
  return files.length / ((performance.now() - started) / 1000)
}

/** `files` copies (or hard links) of the small clip in folders of 100 inside a new project */
async function smallFilesProject(server: Child, name: string, fx: Fixtures, files: number, place: (from: string, to: string) => Promise<void>) {
  const project = (await server.api('POST', '/projects', { project: { name } }, 201)).body.project
  const relatives: string[] = []
  for (let i = 0; i < files; i++) {
    const rel = `Card ${pad(Math.floor(i / 100) + 1, 2)}/C${pad(i + 1, 4)}.mp4`
    if (i % 100 === 0) await mkdir(path.join(project.path, path.dirname(rel)), { recursive: true })
    await place(fx.smallClip, path.join(project.path, rel))
    relatives.push(rel)
  }
  return { project, relatives }
}

/**
 * POST addassets of `files` paths with the job runner stopped: what registering costs by itself
 * (the rows, and one queued analysis job per file), without analyses competing for the database.
 * The queued jobs are deleted afterwards.
 */
async function registerOnly(server: Child, db: Db, fx: Fixtures, files: number): Promise<RegisterResult> {
  const { project, relatives } = await smallFilesProject(server, `Register bench ${db} ${files}`, fx, files, link)
  log(`${db}: addassets of ${files} files with jobs stopped …`)
  await server.rpc({ op: 'jobs-stop' })
  try {
    const l = load()
    const started = performance.now()
    await server.api('POST', `/projects/${project.id}/addassets`, { paths: relatives }, 201)
    const seconds = (performance.now() - started) / 1000
    await server.sql(`delete from jobs where project_id = ? and state = 'queued'`, [project.id])
    return { db, files, seconds, load: Math.max(l, load()) }
  } finally {
    await server.rpc({ op: 'jobs-start' })
  }
}

async function ingest(server: Child, db: Db, fx: Fixtures, options: { files: number; probes: number }, ffprobe: string): Promise<IngestResult> {
  const { project, relatives } = await smallFilesProject(server, `Ingest bench ${db}`, fx, options.files, copyFile)
  log(`${db}: registering ${options.files} files and waiting for their analysis (${ffprobe}) …`)
  const l0 = load()
  const started = performance.now()
  await server.api('POST', `/projects/${project.id}/addassets`, { paths: relatives }, 201)
  const requestSeconds = (performance.now() - started) / 1000
  const readyAtResponse = Number((await server.sql(`select count(*) as n from assets where project_id = ? and analysis_state in ('ready', 'failed')`, [project.id]))[0].n)
  const states = await waitFor(
    'analysis',
    async () => {
      const rows = await server.sql<{ state: string; n: number | string }>('select analysis_state as state, count(*) as n from assets where project_id = ? group by analysis_state', [project.id])
      const by = Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]))
      return (by.ready ?? 0) + (by.failed ?? 0) >= options.files ? by : null
    },
    30 * 60_000,
  )
  const seconds = (performance.now() - started) / 1000
  const l1 = load()
  // the proxies that follow analysis are not what this section measures
  await server.sql(`update jobs set state = 'cancelled', error = 'cancelled by the benchmark', finished_at = ?, updated_at = ? where type = 'assets.proxy' and state = 'queued'`, [new Date(), new Date()])
  const jobs = await server.sql<{ started_at: unknown; finished_at: unknown }>(`select started_at, finished_at from jobs where type = 'assets.analyse' and project_id = ? and state = 'finished'`, [project.id])
  const jobMs = sortNum(jobs.map((j) => toMs(j.finished_at) - toMs(j.started_at)))
  const lastAnalysis = Math.max(...jobs.map((j) => toMs(j.finished_at)))
  await waitFor('running proxy jobs to end', async () => Number((await server.sql(`select count(*) as n from jobs where type = 'assets.proxy' and state = 'running'`))[0].n) === 0, 10 * 60_000, 250)
  const proxies = await server.sql<{ started_at: unknown }>(`select started_at from jobs where type = 'assets.proxy' and project_id = ? and started_at is not null`, [project.id])
  const proxiesMeanwhile = proxies.filter((p) => toMs(p.started_at) < lastAnalysis).length

  // ffprobe by itself: sequential (wall and CPU per file), then 4 in flight (the runner's default concurrency)
  log(`${db}: ${ffprobe} alone …`)
  const sample = relatives.slice(0, options.probes).map((r) => path.join(project.path, r))
  const walls: number[] = []
  const sequential = sample.slice(0, 20)
  const cpu0 = childrenCpuMs()
  for (const file of sequential) {
    const t0 = performance.now()
    await probeOnce(ffprobe, file)
    walls.push(performance.now() - t0)
  }
  const probeCpuMs = (childrenCpuMs() - cpu0) / sequential.length
  const ceilingPerSecond = await probeCeiling(ffprobe, sample, 4)
  return {
    db,
    ffprobe,
    files: options.files,
    requestSeconds,
    seconds,
    perSecond: options.files / seconds,
    readyAtResponse,
    perSecondAfterResponse: (options.files - readyAtResponse) / (seconds - requestSeconds),
    failed: states.failed ?? 0,
    jobP50Ms: percentile(jobMs, 50),
    jobP90Ms: percentile(jobMs, 90),
    proxiesMeanwhile,
    probeWallP50Ms: percentile(sortNum(walls), 50),
    probeCpuMs,
    ceilingPerSecond,
    load: Math.max(l0, l1),
  }
}

interface ProxyResult {
  clipSeconds: number
  /** mean of the runs before and after the job */
  ceilingSeconds: number
  ceilingRuns: number[]
  ceilingLoad: number
  commandSeconds: number
  commandRuns: number[]
  commandLoad: number
  /** mean of the first run (after addassets) and a POST /assets/:id/reencode */
  jobSeconds: number
  jobRuns: number[]
  jobLoad: number
  endToEndSeconds: number
  lowresBytes: number
}

async function proxy(server: Child, fx: Fixtures, clipSeconds: number): Promise<ProxyResult> {
  const source = path.join(fx.dir, 'A001C001_1080p25.mp4')
  log(`making a ${clipSeconds} s 1920x1080 25 fps source clip …`)
  await ffmpeg([
    '-f', 'lavfi', '-i', `testsrc2=size=1920x1080:rate=25:duration=${clipSeconds}`,
    '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${clipSeconds}`,
    '-c:v', 'libx264', '-preset', 'superfast', '-crf', '20', '-g', '50', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac', '-b:a', '192k', '-ac', '2', '-shortest', source,
  ])
  const ceilingRuns: number[] = []
  const commandRuns: number[] = []
  let ceilingLoad = 0
  let commandLoad = 0
  let lowresBytes = 0
  const ceiling = async () => {
    log('ceiling: ffmpeg -preset ultrafast 720p …')
    const l = load()
    ceilingRuns.push(await ffmpeg(['-i', source, '-vf', 'scale=-2:720', '-c:v', 'libx264', '-preset', 'ultrafast', '-crf', '23', '-c:a', 'aac', '-b:a', '128k', path.join(fx.dir, 'ceiling-720p.mp4')]))
    ceilingLoad = Math.max(ceilingLoad, l, load())
    await rm(path.join(fx.dir, 'ceiling-720p.mp4'), { force: true })
  }
  // mamkit's proxy command by itself: buildProxies of plugins/assets/proxies.ts, called straight
  const { buildProxies, DEFAULT_PROXY_SETTINGS } = await import('../plugins/assets/proxies.js')
  const command = async () => {
    log("mamkit's proxy ffmpeg run alone (low-res, poster, thumbnails) …")
    const work = path.join(fx.dir, 'proxy-work')
    await mkdir(work, { recursive: true })
    const l = load()
    const t0 = performance.now()
    const made = await buildProxies(tools.ffmpeg, { type: 'video', duration: clipSeconds, metadata: {}, name: 'A001C001.mp4' } as any, source, work, DEFAULT_PROXY_SETTINGS)
    commandRuns.push((performance.now() - t0) / 1000)
    commandLoad = Math.max(commandLoad, l, load())
    lowresBytes = (await stat(made.lowres)).size
    await rm(work, { recursive: true, force: true })
  }

  // in turn, so that a change in the machine's load hits all three alike: ceiling, command, job, ceiling, command, job
  await ceiling()
  await command()

  log('the assets.proxy job …')
  const project = (await server.api('POST', '/projects', { project: { name: 'Proxy bench' } }, 201)).body.project
  await link(source, path.join(project.path, 'A001C001.mp4'))
  const l = load()
  const started = performance.now()
  const asset = (await server.api('POST', `/projects/${project.id}/addassets`, { paths: ['A001C001.mp4'] }, 201)).body.assets[0]
  const row = await waitFor(
    'the proxy',
    async () => {
      const [r] = await server.sql<{ analysis_state: string; proxy_state: string; proxy_error: string | null }>('select analysis_state, proxy_state, proxy_error from assets where id = ?', [asset.id])
      return r.analysis_state === 'failed' || r.proxy_state === 'ready' || r.proxy_state === 'failed' ? r : null
    },
    20 * 60_000,
    200,
  )
  const endToEndSeconds = (performance.now() - started) / 1000
  const jobLoad = Math.max(l, load())
  if (row.proxy_state !== 'ready') throw new Error(`proxy: analysis ${row.analysis_state}, proxy ${row.proxy_state}: ${row.proxy_error}`)
  const jobTime = async (id: number) => {
    const [j] = await server.sql<{ started_at: unknown; finished_at: unknown }>(`select started_at, finished_at from jobs where id = ?`, [id])
    return (toMs(j.finished_at) - toMs(j.started_at)) / 1000
  }
  const [first] = await server.sql<{ id: number }>(`select id from jobs where type = 'assets.proxy' and asset_id = ? and state = 'finished'`, [asset.id])
  const jobRuns = [await jobTime(first.id)]

  await ceiling()
  await command()
  log('the assets.proxy job again (POST /assets/:id/reencode) …')
  let jobLoad2 = load()
  const again = (await server.api('POST', `/assets/${asset.id}/reencode`, {}, 202)).body.job
  await waitFor(
    'the second proxy job',
    async () => {
      const [j] = await server.sql<{ state: string; error: string | null }>('select state, error from jobs where id = ?', [again.id])
      if (j.state === 'failed' || j.state === 'cancelled') throw new Error(`reencode ${j.state}: ${j.error}`)
      return j.state === 'finished'
    },
    20 * 60_000,
    200,
  )
  jobLoad2 = Math.max(jobLoad2, load())
  jobRuns.push(await jobTime(again.id))
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
  return { clipSeconds, ceilingSeconds: mean(ceilingRuns), ceilingRuns, ceilingLoad, commandSeconds: mean(commandRuns), commandRuns, commandLoad, jobSeconds: mean(jobRuns), jobRuns, jobLoad: Math.max(jobLoad, jobLoad2), endToEndSeconds, lowresBytes }
}

interface Rate {
  label: string
  gbps: number
  perCore: number
  load: number
}

async function hashing(fx: Fixtures): Promise<Rate[]> {
  const { Piscina } = await import('piscina')
  const out: Rate[] = []
  const gb = fx.bigBytes / 1e9
  /** one thread, one file: GB/s is also GB/s per core */
  const add = (label: string, seconds: number, l: number) => out.push({ label, gbps: gb / seconds, perCore: gb / seconds, load: l })

  // page cache warm (the file was just written); a second pass is the one counted
  await readThrough(fx.bigFile)
  let l = load()
  const plain = await readThrough(fx.bigFile)
  add('plain read: fs stream, 1 MiB chunks, discarded (page cache)', plain.seconds, Math.max(l, load()))

  try {
    l = load()
    const { stderr } = await run('dd', [`if=${fx.bigFile}`, 'of=/dev/null', 'bs=1M', 'iflag=direct'])
    const m = /(\d+) bytes .* copied, ([\d.]+) s/.exec(stderr)
    if (m) out.push({ label: 'disk read: dd bs=1M iflag=direct (no page cache)', gbps: Number(m[1]) / 1e9 / Number(m[2]), perCore: Number(m[1]) / 1e9 / Number(m[2]), load: Math.max(l, load()) })
  } catch (err) {
    log(`dd with O_DIRECT failed (${(err as Error).message.split('\n')[0]}); the disk figure is left out`)
  }

  // CPU ceilings in memory: 256 MiB in 1 MiB updates
  const buf = Buffer.allocUnsafe(MiB)
  randomFillSync(buf)
  const memBytes = 256 * MiB
  l = load()
  let t0 = performance.now()
  const sha = createHash('sha256')
  for (let n = 0; n < memBytes; n += MiB) sha.update(buf)
  sha.digest()
  let s = (performance.now() - t0) / 1000
  out.push({ label: 'SHA-256 in memory (256 MiB, 1 MiB updates)', gbps: memBytes / 1e9 / s, perCore: memBytes / 1e9 / s, load: Math.max(l, load()) })
  t0 = performance.now()
  let c = 0
  for (let n = 0; n < memBytes; n += MiB) c = crc32(buf, c)
  s = (performance.now() - t0) / 1000
  out.push({ label: 'zlib.crc32 in memory (256 MiB, 1 MiB updates)', gbps: memBytes / 1e9 / s, perCore: memBytes / 1e9 / s, load: Math.max(l, load()) })

  const pool = new Piscina({ maxThreads: 2, minThreads: 2, idleTimeout: 30_000 })
  try {
    // the worker hashes a descriptor the job opened and checked (plugins/assets/originals.ts); opening is part of the cost
    const task = async (sha256: boolean) => {
      const handle = await open(fx.bigFile, 'r')
      try {
        const r = sumsOrThrow(await pool.run({ from: handle.fd, sha256 } satisfies DescriptorSumsTask, { filename: HASH_WORKER }))
        return { crc32: r.crc32!, sha256: r.sha256, bytes: r.size }
      } finally {
        await handle.close()
      }
    }
    await task(false) // threads up, module loaded
    for (const [label, withSha] of [
      ['hash worker: CRC-32 only', false],
      ['hash worker: CRC-32 + SHA-256 (one pass)', true],
    ] as const) {
      l = load()
      t0 = performance.now()
      const r = await task(withSha)
      s = (performance.now() - t0) / 1000
      if (r.bytes !== fx.bigBytes) throw new Error(`hash worker read ${r.bytes} bytes of ${fx.bigBytes}`)
      add(label, s, Math.max(l, load()))
    }
    l = load()
    t0 = performance.now()
    await Promise.all([task(true), task(true)])
    s = (performance.now() - t0) / 1000
    out.push({ label: 'hash worker: CRC-32 + SHA-256, two files at once (2 threads)', gbps: (2 * gb) / s, perCore: (2 * gb) / s / 2, load: Math.max(l, load()) })
  } finally {
    await pool.destroy()
  }
  return out
}

interface ZipResult {
  bytes: number
  zipBytes: number
  rehash: { seconds: number; gbps: number; runs: number[]; load: number }
  prepareWarmSeconds: number
  prepareSeconds: number
  prepareMbps: number
  prepareRss: { baseMb: number; peakMb: number; growthMb: number }
  prepareLoad: number
  readMbps: number
  readLoad: number
  downloadMbps: number
  downloadRuns: number[]
  downloadRss: { baseMb: number; peakMb: number; growthMb: number }
  downloadLoad: number
  koaMbps: number
  koaRuns: number[]
  koaRss: { baseMb: number; peakMb: number; growthMb: number }
  koaLoad: number
  rangeOk: boolean
}

async function zip(server: Child, fx: Fixtures, rounds = 3): Promise<ZipResult> {
  const project = (await server.api('POST', '/projects', { project: { name: 'Download bench' } }, 201)).body.project
  await mkdir(path.join(project.path, 'Reel 1'), { recursive: true })
  await link(fx.bigFile, path.join(project.path, 'Reel 1', 'A002C001.mov'))
  const asset = (await server.api('POST', `/projects/${project.id}/addassets`, { paths: ['Reel 1/A002C001.mov'] }, 201)).body.assets[0]
  await waitFor('analysis', async () => ['ready', 'failed'].includes((await server.sql('select analysis_state as s from assets where id = ?', [asset.id]))[0].s), 5 * 60_000)
  const jobDone = (id: number) =>
    waitFor(
      `job ${id}`,
      async () => {
        const [j] = await server.sql<{ state: string; error: string | null; started_at: unknown; finished_at: unknown }>('select state, error, started_at, finished_at from jobs where id = ?', [id])
        if (j.state === 'failed' || j.state === 'cancelled') throw new Error(`job ${id} ${j.state}: ${j.error}`)
        return j.state === 'finished' ? j : null
      },
      10 * 60_000,
      50,
    )

  // rehash: the assets.rehash job end to end (CRC-32 + SHA-256 in the piscina pool), 3 times; the median counts
  log('rehash job, 3 times …')
  let l = load()
  const rehashRuns: number[] = []
  for (let i = 0; i < 3; i++) {
    const rehashJob = (await server.api('PUT', `/projects/${project.id}/rehash`, { sha256: true }, 202)).body.job
    const rj = await jobDone(rehashJob.id)
    rehashRuns.push((toMs(rj.finished_at) - toMs(rj.started_at)) / 1000)
  }
  const rehashSeconds = sortNum(rehashRuns)[1]
  const rehash = { seconds: rehashSeconds, gbps: fx.bigBytes / 1e9 / rehashSeconds, runs: rehashRuns.map((s) => fx.bigBytes / 1e9 / s), load: Math.max(l, load()) }

  // prepare with the CRC-32 that rehash stored: nothing to read
  log('prepare_download_highres with the stored CRC-32 …')
  let t0 = performance.now()
  const warm = (await server.api('PUT', `/assets/${asset.id}/prepare_download_highres`, {}, 202)).body.assetstate
  await jobDone(warm.job_id)
  const prepareWarmSeconds = (performance.now() - t0) / 1000

  // prepare without it: one CRC-32 pass over the file in a worker; the ceiling is a plain read
  log('plain read (ceiling), then prepare_download_highres without a stored CRC-32 …')
  l = load()
  const read = await readThrough(fx.bigFile)
  const readLoad = Math.max(l, load())
  await server.sql('update assets set crc32 = null, hashed_at = null where id = ?', [asset.id])
  l = load()
  const mem = watchMemory(server.pid)
  t0 = performance.now()
  const state = (await server.api('PUT', `/assets/${asset.id}/prepare_download_highres`, {}, 202)).body.assetstate
  await jobDone(state.job_id)
  const prepareSeconds = (performance.now() - t0) / 1000
  const prepareRss = mem.stop()
  const prepareLoad = Math.max(l, load())
  const [{ size }] = await server.sql<{ size: number | string }>('select size from asset_states where id = ?', [state.id])
  const zipBytes = Number(size)

  // mamkit and the bare Koa ceiling in turn, `rounds` times each; the median speed and the largest RSS growth count
  log(`download_highres and bare Koa (download ceiling), ${rounds} rounds each …`)
  const url = `${server.base}${API}/assets/${asset.id}/download_highres?state_id=${state.id}`
  const auth = { authorization: `Bearer ${server.ready.token}` }
  await download(url, { ...auth, range: 'bytes=0-1048575' }) // warm: route, auth cache
  const ranged = await download(url, { ...auth, range: 'bytes=100-199' })
  const koa = await Child.start(['--koa', fx.bigFile])
  try {
    await download(`${koa.base}/`, { range: 'bytes=0-0' })
    const ours: Array<{ mbps: number; rss: ReturnType<ReturnType<typeof watchMemory>['stop']>; load: number }> = []
    const theirs: typeof ours = []
    for (let round = 0; round < rounds; round++) {
      for (const [target, into] of [
        [server, ours],
        [koa, theirs],
      ] as const) {
        l = load()
        const m = watchMemory(target.pid)
        const got = target === server ? await download(url, auth) : await download(`${koa.base}/`)
        const rss = m.stop()
        const expected = target === server ? zipBytes : fx.bigBytes
        if (got.status !== 200 || got.bytes !== expected || got.length !== expected) throw new Error(`download: ${got.status}, ${got.bytes} bytes, Content-Length ${got.length}, expected ${expected}`)
        into.push({ mbps: got.bytes / 1e6 / got.seconds, rss, load: Math.max(l, load()) })
      }
    }
    const median = (xs: typeof ours) => sortNum(xs.map((v) => v.mbps))[Math.floor(xs.length / 2)]
    const worst = (xs: typeof ours) => xs.reduce((a, b) => (b.rss.growthMb > a.rss.growthMb ? b : a)).rss
    return {
      bytes: fx.bigBytes,
      zipBytes,
      rehash,
      prepareWarmSeconds,
      prepareSeconds,
      prepareMbps: fx.bigBytes / 1e6 / prepareSeconds,
      prepareRss,
      prepareLoad,
      readMbps: read.bytes / 1e6 / read.seconds,
      readLoad,
      downloadMbps: median(ours),
      downloadRuns: ours.map((v) => v.mbps),
      downloadRss: worst(ours),
      downloadLoad: Math.max(...ours.map((v) => v.load)),
      koaMbps: median(theirs),
      koaRuns: theirs.map((v) => v.mbps),
      koaRss: worst(theirs),
      koaLoad: Math.max(...theirs.map((v) => v.load)),
      rangeOk: ranged.status === 206 && ranged.bytes === 100,
    }
  } finally {
    await koa.stop()
  }
}

interface UploadResult {
  bytes: number
  seconds: number
  mbps: number
  rss: { baseMb: number; peakMb: number; growthMb: number }
  load: number
  copyMbps: number
  copyLoad: number
}

/**
 * POST /projects/:id/inject_uploads of the big file as one multipart part, sent from a file-backed
 * Blob (the client holds none of it in memory either); the server's RSS is sampled throughout.
 * Ceiling: a stream copy of the file on the same disk.
 */
async function upload(server: Child, fx: Fixtures): Promise<UploadResult> {
  const { openAsBlob } = await import('node:fs')
  const project = (await server.api('POST', '/projects', { project: { name: 'Upload bench' } }, 201)).body.project
  log('stream copy (upload ceiling) …')
  const copy = path.join(fx.dir, 'copy.bin')
  let l = load()
  let t0 = performance.now()
  await pipeline(createReadStream(fx.bigFile, { highWaterMark: MiB }), createWriteStream(copy, { highWaterMark: MiB }))
  const copySeconds = (performance.now() - t0) / 1000
  const copyLoad = Math.max(l, load())
  await rm(copy, { force: true })

  log(`inject_uploads of ${f(fx.bigBytes / MiB)} MiB …`)
  const form = new FormData()
  form.append('path', 'Uploads')
  form.append('file', await openAsBlob(fx.bigFile), 'A003C001.mov')
  l = load()
  const mem = watchMemory(server.pid)
  t0 = performance.now()
  const res = await fetch(`${server.base}${API}/projects/${project.id}/inject_uploads`, { method: 'POST', headers: { authorization: `Bearer ${server.ready.token}` }, body: form })
  const body = await res.json()
  const seconds = (performance.now() - t0) / 1000
  const rss = mem.stop()
  if (res.status !== 201 || Number(body.assets?.[0]?.size) !== fx.bigBytes) throw new Error(`upload: ${res.status} ${JSON.stringify(body).slice(0, 300)}`)
  return { bytes: fx.bigBytes, seconds, mbps: fx.bigBytes / 1e6 / seconds, rss, load: Math.max(l, load()), copyMbps: fx.bigBytes / 1e6 / copySeconds, copyLoad }
}

interface ListResult {
  db: Db
  rows: number
  insertSeconds: number
  latencies: Latency[]
  plans: Array<{ label: string; sql: string; plan: string[]; sqlMs: number }>
  /** by request label: the p50s of its SQL statements run alone in the server, added up */
  sqlMs: Record<string, number>
}

async function listing(server: Child, db: Db, options: { folders: number; perFolder: number; requests: number }): Promise<ListResult> {
  const project = (await server.api('POST', '/projects', { project: { name: 'Listing bench' } }, 201)).body.project
  const rows = options.folders * options.perFolder
  log(`${db}: inserting ${rows} asset rows …`)
  const insertMs = await server.rpc<number>({ op: 'insert-assets', projectId: project.id, folders: options.folders, perFolder: options.perFolder })
  // the state autovacuum would reach soon after such an insert: statistics, and on PostgreSQL the visibility map
  await server.sql(db === 'postgresql' ? 'vacuum analyze assets' : 'analyze')
  const base = `/projects/${project.id}/assets`
  const deepPage = Math.max(1, Math.min(500, Math.floor(rows / 100)))
  const kinds: Array<{ label: string; route: (i: number) => string; expectRows: number; expectTotal: number }> = [
    { label: `folder page: ?folder=<one of ${options.folders}>&per_page=100`, route: (i) => `${base}?folder=${encodeURIComponent(folderName((i * 37) % options.folders))}&per_page=100`, expectRows: Math.min(100, options.perFolder), expectTotal: options.perFolder },
    { label: 'whole project, page 1: ?recursive=true&per_page=100', route: () => `${base}?recursive=true&per_page=100`, expectRows: Math.min(100, rows), expectTotal: rows },
    { label: `whole project, page ${deepPage}: ?recursive=true&per_page=100&page=${deepPage}`, route: () => `${base}?recursive=true&per_page=100&page=${deepPage}`, expectRows: Math.min(100, rows - (deepPage - 1) * 100), expectTotal: rows },
  ]
  // the same deep page by keyset: `after` the last row of the page before it
  const before = await server.api('GET', `${base}?recursive=true&per_page=100&page=${Math.max(1, deepPage - 1)}`)
  const after = before.headers.get('x-next-after')
  if (after && deepPage > 1)
    kinds.push({ label: `whole project, page ${deepPage} by keyset: ?recursive=true&per_page=100&after=<last path of page ${deepPage - 1}>`, route: () => `${base}?recursive=true&per_page=100&after=${after}`, expectRows: Math.min(100, rows - (deepPage - 1) * 100), expectTotal: rows })
  // correctness once, and the shape of a row
  for (const k of kinds) {
    const r = await server.api('GET', k.route(1))
    if (r.body.assets.length !== k.expectRows || Number(r.headers.get('x-total-count')) !== k.expectTotal) throw new Error(`${k.route(1)}: ${r.body.assets.length} rows, total ${r.headers.get('x-total-count')}`)
    const a = r.body.assets[0]
    if (Number.isNaN(Date.parse(a.modified_at)) || a.type !== 'video' || a.metadata.width !== 3840) throw new Error(`unexpected row: ${JSON.stringify(a).slice(0, 300)}`)
  }
  log(`${db}: ${options.requests} requests of each kind …`)
  const latencies = [await time('baseline: GET /session/user_id', options.requests, () => server.api('GET', '/session/user_id'))]
  for (const k of kinds) latencies.push(await time(k.label, options.requests, (i) => server.api('GET', k.route(i))))

  // the SQL each listing runs, and its plan
  const plans: ListResult['plans'] = []
  const sqlMs: Record<string, number> = {}
  for (const k of kinds) {
    await server.rpc({ op: 'capture-start' })
    await server.api('GET', k.route(3))
    const queries = ((await server.rpc<Array<{ sql: string; bindings: unknown[] }>>({ op: 'capture-stop' })) ?? []).filter((q) => /\bassets\b/.test(q.sql) && /^\s*select/i.test(q.sql))
    for (const q of queries) {
      const explain = db === 'postgresql' ? `explain (analyze, buffers) ${q.sql}` : `explain query plan ${q.sql}`
      const out = await server.sql<any>(explain, q.bindings).catch((err: Error) => [{ detail: `EXPLAIN failed: ${err.message.split('\n')[0]}` }])
      const ms = await server.rpc<number>({ op: 'sql-time', sql: q.sql, bindings: q.bindings, n: 20 })
      sqlMs[k.label] = (sqlMs[k.label] ?? 0) + ms
      plans.push({ label: k.label, sql: q.sql.replace(/\s+/g, ' '), plan: out.map((r: any) => r['QUERY PLAN'] ?? r.detail ?? JSON.stringify(r)), sqlMs: ms })
    }
  }
  return { db, rows, insertSeconds: insertMs / 1000, latencies, plans, sqlMs }
}

// ---------------------------------------------------------------------------------------------
// report
// ---------------------------------------------------------------------------------------------

const f = (n: number) => (!Number.isFinite(n) ? '–' : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))
const x = (n: number) => `${n.toFixed(2)}×`

interface Results {
  register: RegisterResult[]
  ingest: IngestResult[]
  proxy?: ProxyResult
  hash?: Rate[]
  zip?: ZipResult
  upload?: UploadResult
  list: ListResult[]
}

function report(r: Results, options: { bigMb: number }) {
  console.log(`\n## Assets (node ${process.version}, ${os.cpus().length} CPUs, ${os.cpus()[0]?.model ?? ''}, ffmpeg ${ffmpegVersion})\n`)
  if (r.register.length) {
    console.log('### Registering: POST /projects/:id/addassets of small files, job runner stopped\n')
    console.log('| database | files | request | per file | load |')
    console.log('|---|---|---|---|---|')
    for (const g of r.register) console.log(`| ${g.db} | ${g.files} | ${f(g.seconds)} s | ${f((g.seconds * 1000) / g.files)} ms | ${f(g.load)} |`)
  }
  if (r.ingest.length) {
    console.log('\n### Ingest: register + analyse small clips (1 s 160x120 H.264/AAC), jobs running\n')
    console.log('| database | ffprobe | files | addassets request | until all ready | assets/s | amortised per file | analyse job p50 / p90 | that ffprobe alone, 4 in flight | ratio | load |')
    console.log('|---|---|---|---|---|---|---|---|---|---|---|')
    for (const i of r.ingest)
      console.log(`| ${i.db} | ${i.ffprobe === tools.bundledFfprobe ? 'npm package (static)' : i.ffprobe} | ${i.files}${i.failed ? ` (${i.failed} failed)` : ''} | ${f(i.requestSeconds)} s | ${f(i.seconds)} s | ${f(i.perSecond)} | ${f((i.seconds * 1000) / i.files)} ms | ${f(i.jobP50Ms)} / ${f(i.jobP90Ms)} ms | ${f(i.ceilingPerSecond)} files/s | ${x(i.perSecond / i.ceilingPerSecond)} | ${f(i.load)} |`)
    for (const i of r.ingest)
      console.log(
        `\n${i.db} (${i.ffprobe}): ${i.readyAtResponse} assets were analysed when the addassets response came; from then on ${f(i.perSecondAfterResponse)} assets/s (${x(i.perSecondAfterResponse / i.ceilingPerSecond)} of ffprobe alone). ` +
          `One ffprobe of a small clip takes ${f(i.probeWallP50Ms)} ms wall (p50 of 20 sequential) and ${f(i.probeCpuMs)} ms CPU. ${i.proxiesMeanwhile} proxy jobs (1 at a time) ran before the last analysis ended.`,
      )
  }
  if (r.proxy) {
    const p = r.proxy
    console.log(`\n### Low-res proxy of a ${p.clipSeconds} s 1920x1080 25 fps clip\n`)
    console.log('| what | wall | × real time | ratio to ceiling | load |')
    console.log('|---|---|---|---|---|')
    console.log(`| ceiling: ffmpeg -preset ultrafast -crf 23, 720p (mean of ${p.ceilingRuns.map(f).join(' s, ')} s) | ${f(p.ceilingSeconds)} s | ${x(p.clipSeconds / p.ceilingSeconds)} | 1.00× | ${f(p.ceilingLoad)} |`)
    console.log(`| mamkit's proxy ffmpeg run alone: low-res veryfast crf 23 540p AAC faststart + poster + thumbnail strip, one decode (mean of ${p.commandRuns.map(f).join(' s, ')} s) | ${f(p.commandSeconds)} s | ${x(p.clipSeconds / p.commandSeconds)} | ${x(p.ceilingSeconds / p.commandSeconds)} | ${f(p.commandLoad)} |`)
    console.log(`| assets.proxy job: that run + encryption + bookkeeping (mean of ${p.jobRuns.map(f).join(' s, ')} s) | ${f(p.jobSeconds)} s | ${x(p.clipSeconds / p.jobSeconds)} | ${x(p.ceilingSeconds / p.jobSeconds)} | ${f(p.jobLoad)} |`)
    console.log(`| addassets → proxy_state ready (analysis + queue + first job) | ${f(p.endToEndSeconds)} s | ${x(p.clipSeconds / p.endToEndSeconds)} | ${x(p.ceilingSeconds / p.endToEndSeconds)} | ${f(p.jobLoad)} |`)
  }
  if (r.hash) {
    const plain = r.hash[0]
    console.log(`\n### Hashing a ${options.bigMb} MiB file\n`)
    console.log('| what | GB/s | GB/s per core | ratio to plain read | load |')
    console.log('|---|---|---|---|---|')
    for (const h of r.hash) console.log(`| ${h.label} | ${f(h.gbps)} | ${f(h.perCore)} | ${x(h.perCore / plain.perCore)} | ${f(h.load)} |`)
    if (r.zip) console.log(`| assets.rehash job, CRC-32 + SHA-256, end to end | ${f(r.zip.rehash.gbps)} | ${f(r.zip.rehash.gbps)} | ${x(r.zip.rehash.gbps / plain.perCore)} | ${f(r.zip.rehash.load)} |`)
  }
  if (r.zip) {
    const z = r.zip
    const mb = (m: { growthMb: number; peakMb: number }) => `+${f(m.growthMb)} MB (peak ${f(m.peakMb)} MB)`
    console.log(`\n### Highres zip download of a ${options.bigMb} MiB asset (zip ${f(z.zipBytes / 1e6)} MB)\n`)
    console.log('| what | MB/s | ratio to ceiling | server RSS growth | load |')
    console.log('|---|---|---|---|---|')
    console.log(`| prepare_download_highres → job done, CRC-32 stored by rehash (nothing read) | ${f(z.prepareWarmSeconds * 1000)} ms | – | – | – |`)
    console.log(`| prepare ceiling: plain read of the file, 1 MiB chunks | ${f(z.readMbps)} | 1.00× | – | ${f(z.readLoad)} |`)
    console.log(`| prepare_download_highres → job done, no stored CRC-32 (one CRC-32 pass in a worker) | ${f(z.prepareMbps)} | ${x(z.prepareMbps / z.readMbps)} | ${mb(z.prepareRss)} | ${f(z.prepareLoad)} |`)
    console.log(`| download ceiling: bare Koa streaming the original file (child process; median of ${z.koaRuns.map(f).join(', ')}) | ${f(z.koaMbps)} | 1.00× | ${mb(z.koaRss)} | ${f(z.koaLoad)} |`)
    console.log(`| GET download_highres: the zip laid out at download time (median of ${z.downloadRuns.map(f).join(', ')}) | ${f(z.downloadMbps)} | ${x(z.downloadMbps / z.koaMbps)} | ${mb(z.downloadRss)} | ${f(z.downloadLoad)} |`)
    const endToEnd = (prepare: number) => z.zipBytes / 1e6 / (prepare + z.zipBytes / 1e6 / z.downloadMbps)
    console.log(`| prepare (CRC stored) + download, end to end | ${f(endToEnd(z.prepareWarmSeconds))} | ${x(endToEnd(z.prepareWarmSeconds) / z.koaMbps)} (of Koa) | – | – |`)
    console.log(`| prepare (CRC computed) + download, end to end | ${f(endToEnd(z.prepareSeconds))} | ${x(endToEnd(z.prepareSeconds) / z.koaMbps)} (of Koa) | – | – |`)
    console.log(`\nRange request (bytes=100-199): ${z.rangeOk ? '206 with 100 bytes' : 'WRONG'}.`)
  }
  if (r.upload) {
    const u = r.upload
    console.log(`\n### Upload: inject_uploads of a ${options.bigMb} MiB file (one multipart part)\n`)
    console.log('| what | MB/s | ratio to ceiling | server RSS growth | load |')
    console.log('|---|---|---|---|---|')
    console.log(`| ceiling: stream copy of the file on the same disk | ${f(u.copyMbps)} | 1.00× | – | ${f(u.copyLoad)} |`)
    console.log(`| POST inject_uploads, 201 with the asset | ${f(u.mbps)} | ${x(u.mbps / u.copyMbps)} | +${f(u.rss.growthMb)} MB (peak ${f(u.rss.peakMb)} MB) | ${f(u.load)} |`)
  }
  if (r.list.length) {
    console.log('\n### GET /projects/:id/assets with 100,000 assets in one project\n')
    for (const l of r.list) console.log(`${l.db}: ${l.rows} rows inserted in ${f(l.insertSeconds)} s (${f(l.rows / l.insertSeconds)} rows/s, knex batches of 500 in one transaction).`)
    console.log('\n| database | request (sequential, after 20 warm-up) | p50 | p99 | mean | p50 / baseline p50 | its SQL alone (p50) | load |')
    console.log('|---|---|---|---|---|---|---|---|')
    for (const l of r.list) {
      const base = l.latencies[0].p50
      for (const t of l.latencies) console.log(`| ${l.db} | ${t.label} | ${f(t.p50)} ms | ${f(t.p99)} ms | ${f(t.mean)} ms | ${x(t.p50 / base)} | ${l.sqlMs[t.label] === undefined ? '–' : `${f(l.sqlMs[t.label])} ms`} | ${f(t.load)} |`)
    }
    console.log('\n### Query plans\n')
    for (const l of r.list)
      for (const p of l.plans) {
        console.log(`${l.db} — ${p.label} (${f(p.sqlMs)} ms alone)\n\n    ${p.sql}`)
        for (const line of p.plan) console.log(`      ${line}`)
        console.log('')
      }
  }
}

let ffmpegVersion = ''

async function main() {
  const { values } = parseArgs({
    options: {
      files: { type: 'string', default: '1000' },
      probes: { type: 'string', default: '100' },
      'proxy-seconds': { type: 'string', default: '25' },
      'big-mb': { type: 'string', default: '1024' },
      folders: { type: 'string', default: '1000' },
      'per-folder': { type: 'string', default: '100' },
      requests: { type: 'string', default: '200' },
      only: { type: 'string' },
      sections: { type: 'string', default: 'ingest,proxy,hash,zip,upload,list' },
      profile: { type: 'string' },
      'ingest-on': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  })
  const o = {
    files: Number(values.files),
    probes: Number(values.probes),
    proxySeconds: Number(values['proxy-seconds']),
    bigMb: Number(values['big-mb']),
    folders: Number(values.folders),
    perFolder: Number(values['per-folder']),
    requests: Number(values.requests),
  }
  const sections = new Set(values.sections!.split(','))
  const pgUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
  const only = values.only?.split(',')
  const dbs = (['sqlite', 'postgresql'] as const).filter((db) => (db === 'postgresql' ? Boolean(pgUrl) : true) && (!only || only.includes(db)))
  // the full ingest (analysis of every file) takes minutes on a loaded machine: the first database only unless asked
  const ingestOn = values['ingest-on']?.split(',') ?? dbs.slice(0, 1)
  const { MediaTools } = await import('../core/media/tools.js')
  const found = await new MediaTools().ready()
  tools.ffmpeg = found.get('ffmpeg')?.path ?? 'ffmpeg'
  tools.ffprobe = found.get('ffprobe')?.path ?? 'ffprobe'
  try {
    const bundled = (requireModule('@ffprobe-installer/ffprobe') as { path: string }).path
    if (bundled !== tools.ffprobe) tools.bundledFfprobe = bundled
  } catch {
    // optional dependency not installed
  }
  ffmpegVersion = `${found.get('ffmpeg')?.version ?? '?'} (${found.get('ffmpeg')?.source ?? 'missing'}), ffprobe ${found.get('ffprobe')?.version ?? '?'} (${found.get('ffprobe')?.source ?? 'missing'})`

  const root = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-assets-'))
  const cleanup = () => rm(root, { recursive: true, force: true })
  const children = new Set<Child>()
  const scratches: Array<() => Promise<void>> = []
  const onSignal = () => {
    for (const c of children) c.child.kill('SIGKILL')
    void Promise.allSettled([cleanup(), ...scratches.map((d) => d())]).finally(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)

  const results: Results = { register: [], ingest: [], list: [] }
  const started = performance.now()
  try {
    const fx: Fixtures = { dir: path.join(root, 'fixtures'), smallClip: '', bigFile: '', bigBytes: 0 }
    await mkdir(fx.dir, { recursive: true })
    if (sections.has('ingest')) {
      fx.smallClip = path.join(fx.dir, 'small.mp4')
      await ffmpeg(['-f', 'lavfi', '-i', 'testsrc2=size=160x120:rate=25:duration=1', '-f', 'lavfi', '-i', 'sine=frequency=1000:sample_rate=48000:duration=1', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-shortest', fx.smallClip])
    }
    if (sections.has('hash') || sections.has('zip') || sections.has('upload')) {
      log(`writing a ${o.bigMb} MiB file …`)
      fx.bigFile = path.join(fx.dir, 'big.bin')
      const chunk = randomBytes(16 * MiB)
      const fh = await open(fx.bigFile, 'w')
      try {
        for (let n = 0; n < o.bigMb * MiB; n += chunk.length) {
          chunk.writeUInt32LE(n >>> 20, 0) // no two chunks alike
          await fh.write(chunk, 0, Math.min(chunk.length, o.bigMb * MiB - n))
        }
      } finally {
        await fh.close()
      }
      fx.bigBytes = (await stat(fx.bigFile)).size
    }
    if (sections.has('hash')) {
      log('hashing …')
      results.hash = await hashing(fx)
    }

    const serverSections = ['ingest', 'proxy', 'zip', 'upload', 'list'].filter((name) => sections.has(name))
    for (const [n, db] of (serverSections.length ? dbs : []).entries()) {
      const dataDir = path.join(root, `data-${db}`)
      await mkdir(dataDir, { recursive: true })
      const scratch = db === 'postgresql' ? await scratchDatabase('postgresql', pgUrl!) : undefined
      if (scratch) scratches.push(scratch.drop)
      log(`${db}: starting a mamkit server …`)
      const server = await Child.start(['--serve', JSON.stringify({ dataDir, databaseUrl: scratch?.databaseUrl } satisfies ServerSpec)], values.profile ? path.resolve(values.profile, db) : undefined)
      children.add(server)
      try {
        if (sections.has('ingest')) {
          // 100 and then all the files: registering should cost the same per file at any size
          for (const n of new Set([Math.min(100, o.files), o.files])) results.register.push(await registerOnly(server, db, fx, n))
          if (ingestOn.includes(db)) results.ingest.push(await ingest(server, db, fx, o, tools.ffprobe))
        }
        if (n === 0 && sections.has('proxy')) results.proxy = await proxy(server, fx, o.proxySeconds)
        if (n === 0 && sections.has('zip')) results.zip = await zip(server, fx)
        if (n === 0 && sections.has('upload')) results.upload = await upload(server, fx)
        if (sections.has('list')) results.list.push(await listing(server, db, o))
      } finally {
        await server.stop()
        children.delete(server)
        await scratch?.drop().catch((err) => log(`dropping the scratch database failed: ${err.message}`))
        await rm(dataDir, { recursive: true, force: true })
      }
    }
    if (sections.has('ingest') && tools.bundledFfprobe) {
      const db = dbs[0]
      const dataDir = path.join(root, `data-${db}-bundled`)
      await mkdir(dataDir, { recursive: true })
      const scratch = db === 'postgresql' ? await scratchDatabase('postgresql', pgUrl!) : undefined
      if (scratch) scratches.push(scratch.drop)
      log(`${db}: a second server with MAMKIT_FFPROBE=${tools.bundledFfprobe} …`)
      const server = await Child.start(['--serve', JSON.stringify({ dataDir, databaseUrl: scratch?.databaseUrl } satisfies ServerSpec)], undefined, { MAMKIT_FFPROBE: tools.bundledFfprobe })
      children.add(server)
      try {
        results.ingest.push(await ingest(server, db, fx, o, tools.bundledFfprobe))
      } finally {
        await server.stop()
        children.delete(server)
        await scratch?.drop().catch((err) => log(`dropping the scratch database failed: ${err.message}`))
        await rm(dataDir, { recursive: true, force: true })
      }
    }
  } finally {
    await cleanup()
  }
  if (!pgUrl) log('PostgreSQL skipped: set MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL')
  log(`done in ${f((performance.now() - started) / 1000)} s`)
  if (values.json) console.log(JSON.stringify(results, null, 2))
  else report(results, o)
}

if (process.argv[2] === '--serve') void serverMain(JSON.parse(process.argv[3]))
else if (process.argv[2] === '--koa') void koaMain(process.argv[3])
else
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })

