import http from 'node:http'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import pg from 'pg'
import { MamRuntime, type RuntimeOptions } from '../../core/runtime.js'
import type { MamConfigInput } from '../../core/config.js'
import type { PluginDefinition } from '../../core/plugin/contract.js'
import { createApiKey, createUser } from '../../core/auth/accounts.js'
import type { EntityManager } from '../../core/db/orm.js'
import { builtinPlugins } from '../../plugins/index.js'

export type DbKind = 'sqlite' | 'postgresql'

/** SQLite always; PostgreSQL too when MAMKIT_TEST_DATABASE_URL points at a server (CI sets it). */
export function databaseKinds(): DbKind[] {
  return process.env.MAMKIT_TEST_DATABASE_URL ? ['sqlite', 'postgresql'] : ['sqlite']
}

/** A scratch database: a file in the data dir for SQLite, a fresh database on the PostgreSQL server. */
export async function scratchDatabase(kind: DbKind): Promise<{ databaseUrl?: string; drop(): Promise<void> }> {
  if (kind === 'sqlite') return { databaseUrl: undefined, drop: async () => {} }
  const admin = process.env.MAMKIT_TEST_DATABASE_URL!
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
  plugins?: PluginDefinition[]
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
  const em = () => runtime.container.resolve<EntityManager>('em').fork()

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
