import http from 'node:http'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import pg from 'pg'
import type t from 'tap'
import { MamRuntime, type RuntimeOptions } from '../runtime.js'
import type { MamConfigInput } from '../config.js'
import type { PluginDefinition } from '../plugin/contract.js'
import { createApiKey, createUser } from '../auth/accounts.js'
import type { EntityManager } from '../db/orm.js'
import { coreServices } from '../plugin/services.js'
import { builtinPlugins } from '../../plugins/index.js'

export type DbKind = 'sqlite' | 'postgresql'

/** SQLite always; PostgreSQL too when MAMKIT_TEST_DATABASE_URL points at a server (CI sets it). */
export function databaseKinds(): DbKind[] {
  return process.env.MAMKIT_TEST_DATABASE_URL ? ['sqlite', 'postgresql'] : ['sqlite']
}

/** A scratch database: a file in the data dir for SQLite, a fresh database on the PostgreSQL server. */
export async function scratchDatabase(kind: DbKind, adminUrl = process.env.MAMKIT_TEST_DATABASE_URL): Promise<{ databaseUrl?: string; drop(): Promise<void> }> {
  if (kind === 'sqlite') return { databaseUrl: undefined, drop: async () => {} }
  const admin = adminUrl!
  const name = `mamkit_t_${randomBytes(6).toString('hex')}`
  const client = new pg.Client({ connectionString: admin })
  await client.connect()
  await client.query(`create database ${name}`)
  await client.end()
  const url = new URL(admin)
  url.pathname = `/${name}`
  return {
    databaseUrl: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: admin })
      await c.connect()
      await c.query(`drop database if exists ${name} with (force)`)
      await c.end()
    },
  }
}

export interface Reply<T = any> {
  status: number
  headers: Headers
  body: T
  text: string
  buffer: Buffer
}

export interface RequestOptions {
  token?: string
  /** JSON body */
  json?: unknown
  /** application/x-www-form-urlencoded body; nested keys as written (`template[name]`) */
  form?: Record<string, string | string[]>
  multipart?: FormData
  query?: Record<string, string>
  headers?: Record<string, string>
  /** a raw body with its own content-type header */
  raw?: string | Buffer
}

export interface TestUser {
  id: number
  username: string
  password: string
  token: string
}

export interface TestServer {
  base: string
  url: string
  runtime: MamRuntime
  dataDir: string
  db: DbKind
  admin: TestUser
  user: TestUser
  request<T = any>(method: string, pathname: string, options?: RequestOptions): Promise<Reply<T>>
  createUser(username: string, options?: { admin?: boolean; password?: string }): Promise<TestUser>
  em(): EntityManager
  close(): Promise<void>
}

export interface TestServerOptions {
  db?: DbKind
  /** the plugins to load (default: the built-in ones) */
  plugins?: PluginDefinition[]
  /** loaded beside `plugins`: the plugin under test */
  extraPlugins?: PluginDefinition[]
  config?: MamConfigInput
  runJobs?: boolean
  /** reuse a data dir / database (restart tests) */
  dataDir?: string
  databaseUrl?: string
}

export async function request(base: string, method: string, pathname: string, options: RequestOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token) headers.authorization = `Bearer ${options.token}`
  let body: BodyInit | undefined
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json'
    body = JSON.stringify(options.json)
  } else if (options.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded'
    const params = new URLSearchParams()
    for (const [k, v] of Object.entries(options.form)) for (const item of Array.isArray(v) ? v : [v]) params.append(k, item)
    body = params.toString()
  } else if (options.multipart) body = options.multipart
  else if (options.raw !== undefined) body = options.raw as BodyInit
  const qs = options.query ? `?${new URLSearchParams(options.query)}` : ''
  const res = await fetch(`${base}${pathname}${qs}`, { method, headers, body })
  const buffer = Buffer.from(await res.arrayBuffer())
  const text = buffer.toString('utf8')
  let parsed: unknown = undefined
  if (/json/.test(res.headers.get('content-type') ?? '')) parsed = JSON.parse(text)
  return { status: res.status, headers: res.headers, body: parsed, text, buffer }
}

/** A real server on an ephemeral port with a fresh data dir and database, an admin and a plain user. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const db = options.db ?? 'sqlite'
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(tmpdir(), 'mamkit-test-')))
  const scratch = options.databaseUrl !== undefined || options.dataDir ? { databaseUrl: options.databaseUrl, drop: async () => {} } : await scratchDatabase(db)
  const runtimeOptions: RuntimeOptions = {
    plugins: [...(options.plugins ?? builtinPlugins), ...(options.extraPlugins ?? [])],
    config: { logLevel: process.env.MAMKIT_TEST_LOG ?? 'silent', ...options.config, dataDir, databaseUrl: scratch.databaseUrl },
    runJobs: options.runJobs,
  }
  const runtime = await MamRuntime.create(runtimeOptions)
  const server = http.createServer(runtime.callback())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const url = `${base}/api/v1`
  const em = () => runtime.container.resolve<EntityManager>(coreServices.em.id).fork()

  const createTestUser = async (username: string, opts: { admin?: boolean; password?: string } = {}): Promise<TestUser> => {
    const password = opts.password ?? `pw-${username}-123`
    const e = em()
    const existing = await e.findOne('User', { username })
    const user = (existing as any) ?? (await createUser(e, { username, password, admin: opts.admin }))
    const { secret } = await createApiKey(e, user, 'test')
    return { id: user.id, username, password, token: secret }
  }
  const admin = await createTestUser('admin', { admin: true })
  const user = await createTestUser('editor')

  let closed = false
  return {
    base,
    url,
    runtime,
    dataDir,
    db,
    admin,
    user,
    request: (method, pathname, opts) => request(url, method, pathname, opts),
    createUser: createTestUser,
    em,
    async close() {
      if (closed) return
      closed = true
      await new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await runtime.close()
      await scratch.drop()
      if (!options.dataDir) await rm(dataDir, { recursive: true, force: true })
    },
  }
}

type Tap = typeof t
/** the assertions a top-level test and its subtests share */
export type Asserts = Pick<Tap, 'equal' | 'match' | 'type' | 'same' | 'ok'>

/**
 * Runs `fn` once per database (SQLite, and PostgreSQL when MAMKIT_TEST_DATABASE_URL is set), each
 * against its own server, data dir and database, closed when the subtest ends.
 */
export function onEachDatabase(tap: Tap, name: string, fn: (t: Tap, server: TestServer) => Promise<void>, options: Omit<TestServerOptions, 'db'> = {}) {
  for (const db of databaseKinds()) {
    tap.test(`${name} [${db}]`, async (sub) => {
      const server = await startTestServer({ ...options, db })
      sub.teardown(() => server.close())
      await fn(sub as unknown as Tap, server)
    })
  }
}

/** asserts an RFC 9457 problem body with the given status, and, when given, the offending parameters */
export function assertProblem(tap: Asserts, reply: { status: number; headers: Headers; body: any }, status: number, params?: string[]) {
  tap.equal(reply.status, status, `status ${status}`)
  tap.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/, 'problem content type')
  tap.equal(reply.body?.status, status, 'problem status')
  tap.type(reply.body?.detail, 'string', 'problem detail')
  tap.type(reply.body?.request_id, 'string', 'problem request id')
  if (params) tap.same((reply.body.errors ?? []).map((e: { param: string }) => e.param).sort(), [...params].sort(), `offending parameters: ${params.join(', ')}`)
}

/**
 * A request with a JSON body on any method. fetch refuses bodies on GET, but clients send them
 * (GET /assets/by_path with the path as a JSON string, GET /assets/links with `asset_ids`).
 */
export function requestWithBody(s: TestServer, method: string, pathname: string, options: { token?: string; json: unknown }): Promise<Reply> {
  const body = Buffer.from(JSON.stringify(options.json))
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': body.length }
  if (options.token) headers.authorization = `Bearer ${options.token}`
  return new Promise((resolve, reject) => {
    const req = http.request(`${s.url}${pathname}`, { method, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', reject)
      res.on('end', () => {
        const buffer = Buffer.concat(chunks)
        const text = buffer.toString('utf8')
        const h = new Headers()
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v)
        resolve({ status: res.statusCode!, headers: h, body: /json/.test(h.get('content-type') ?? '') ? JSON.parse(text) : undefined, text, buffer })
      })
    })
    req.on('error', reject)
    req.end(body)
  })
}
