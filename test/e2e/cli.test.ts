import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import net from 'node:net'
import pg from 'pg'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { databaseKinds, request, scratchDatabase, type DbKind } from '../../core/testing/index.js'

/** the compiled CLI, exactly what the `mamkit` bin runs */
const CLI = fileURLToPath(new URL('../../host/cli.js', import.meta.url))

// every subtest starts real processes and servers (twice over with PostgreSQL); on a busy machine
// that outlasts the default per-file limit, so this file asks for more
t.setTimeout(900_000)

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** the caller's MAMKIT_* settings must not leak into the commands under test */
function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('MAMKIT_')) env[k] = v
  return { ...env, ...extra }
}

function spawnCli(args: string[], cwd: string, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { cwd, env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
}

function collect(child: ChildProcess): Promise<Run> {
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
}

const mamkit = (args: string[], cwd: string, env: Record<string, string> = {}) => collect(spawnCli(args, cwd, env))

/** a port nobody listens on right now */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })
}

interface Serving {
  child: ChildProcess
  /** the API base URL from the "listening" log line */
  url: string
  /** every log line so far, parsed */
  logs: Array<Record<string, any>>
  /** SIGTERM, then the exit */
  stop(): Promise<Run>
}

/** `mamkit serve …`, resolved once it logs that it listens */
async function serve(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Serving> {
  const child = spawnCli(['serve', ...args], cwd, env)
  const done = collect(child)
  const logs: Array<Record<string, any>> = []
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = ''
    child.stdout!.on('data', (d) => {
      buffered += d
      const lines = buffered.split('\n')
      buffered = lines.pop()!
      for (const line of lines) {
        let entry: Record<string, any>
        try {
          entry = JSON.parse(line)
        } catch {
          continue // not a log line
        }
        logs.push(entry)
        if (typeof entry.url === 'string' && /listening/.test(entry.msg)) resolve(entry.url)
      }
    })
    void done.then((r) => reject(new Error(`mamkit serve exited (${r.code ?? r.signal}) before listening:\n${r.stderr}${r.stdout}`)))
  })
  let stopped: Promise<Run> | undefined
  return {
    child,
    url,
    logs,
    stop() {
      if (!stopped) {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
        stopped = done
      }
      return stopped
    },
  }
}

async function login(url: string, username: string, password: string) {
  return request(url, 'POST', '/session', { form: { login: username, password } })
}

async function tempDir(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-cli-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

async function scratch(t: { teardown(fn: () => unknown): void }, db: DbKind) {
  const s = await scratchDatabase(db)
  t.teardown(() => s.drop())
  return s.databaseUrl
}

for (const db of databaseKinds()) {
  t.test(`migrate, users, api keys, and commands beside a running server [${db}]`, async (t) => {
    const cwd = await tempDir(t)
    const dataDir = path.join(cwd, 'data')
    const databaseUrl = await scratch(t, db)
    const where = ['--data-dir', dataDir, ...(databaseUrl ? ['--database-url', databaseUrl] : [])]

    const migrate = await mamkit(['migrate', ...where], cwd)
    t.equal(migrate.code, 0, migrate.stderr)
    t.match(migrate.stdout, /migrations are up to date/)

    const alice = await mamkit(['users', 'create', '--username', 'alice', '--password', 'alice-password', '--admin', ...where], cwd)
    t.equal(alice.code, 0, alice.stderr)
    t.match(alice.stdout, /created user alice \(id \d+, administrator\)/)

    const taken = await mamkit(['users', 'create', '--username', 'alice', '--password', 'other-password', ...where], cwd)
    t.equal(taken.code, 2, 'a taken username is a usage error')
    t.match(taken.stderr, /alice.*taken/)

    const key = await mamkit(['api-keys', 'create', '--user', 'alice', '--name', 'laptop', ...where], cwd)
    t.equal(key.code, 0, key.stderr)
    const secret = key.stdout.trim()
    t.match(secret, /^mk_\d+_[A-Za-z0-9_-]{43}$/, 'prints only the secret')
    const nobody = await mamkit(['api-keys', 'create', '--user', 'nobody', '--name', 'x', ...where], cwd)
    t.equal(nobody.code, 2)
    t.match(nobody.stderr, /no user "nobody"/)

    // serve configured from the environment; alice exists, so MAMKIT_ADMIN_PASSWORD creates nobody
    const port = await freePort()
    const env: Record<string, string> = { MAMKIT_DATA_DIR: dataDir, MAMKIT_PORT: String(port), MAMKIT_ADMIN_PASSWORD: 'admin-password' }
    if (databaseUrl) env.MAMKIT_DATABASE_URL = databaseUrl
    const server = await serve([], cwd, env)
    t.teardown(() => server.stop())
    t.equal(server.url, `http://127.0.0.1:${port}/api/v1`, 'MAMKIT_PORT is used and the URL is logged')
    t.equal(server.logs.filter((l) => /listening/.test(l.msg)).length, 1, 'logs the URL once')
    t.equal((await login(server.url, 'admin', 'admin-password')).status, 401, 'no "admin" on a database that has users')

    const aliceLogin = await login(server.url, 'alice', 'alice-password')
    t.equal(aliceLogin.status, 200, 'the user created by the CLI logs in')
    t.match(aliceLogin.body, { user: { username: 'alice', role: 'Administrator' } })
    const templates = await request(server.url, 'GET', '/templates', { token: secret })
    t.equal(templates.status, 200, 'the API key printed by the CLI authenticates')
    t.same(templates.body, { templates: [] })
    t.equal((await request(server.url, 'GET', '/templates', { token: secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A') })).status, 401)

    // commands on the same data while the server runs
    const bob = await mamkit(['users', 'create', '--username', 'bob', '--password', 'bob-password', ...where], cwd)
    t.equal(bob.code, 0, bob.stderr)
    const bobLogin = await login(server.url, 'bob', 'bob-password')
    t.equal(bobLogin.status, 200, 'a user created beside the running server logs in through it')
    t.match(bobLogin.body, { user: { username: 'bob', role: 'User' } })
    const bobKey = await mamkit(['api-keys', 'create', '--user', 'bob', '--name', 'ci', ...where], cwd)
    t.equal(bobKey.code, 0, bobKey.stderr)
    const me = await request(server.url, 'GET', '/session', { token: bobKey.stdout.trim() })
    t.equal(me.status, 200)
    t.equal(me.body?.user?.username, 'bob')
    t.equal((await mamkit(['migrate', ...where], cwd)).code, 0, 'migrate beside the running server')
    t.equal((await request(server.url, 'GET', '/version')).status, 200, 'the server still answers')

    const exit = await server.stop()
    t.equal(exit.code, 0, `SIGTERM exits 0 ${exit.stderr}`)
  })

  t.test(`serve on an empty database: MAMKIT_ADMIN_PASSWORD creates "admin" [${db}]`, async (t) => {
    const cwd = await tempDir(t)
    const dataDir = path.join(cwd, 'fresh')
    const databaseUrl = await scratch(t, db)
    const port = await freePort()
    const args = ['--data-dir', dataDir, '--port', String(port), '--host', '127.0.0.1', ...(databaseUrl ? ['--database-url', databaseUrl] : [])]
    const server = await serve(args, cwd, { MAMKIT_ADMIN_PASSWORD: 'change-me-now' })
    t.teardown(() => server.stop())
    t.equal(server.url, `http://127.0.0.1:${port}/api/v1`)
    t.ok(server.logs.some((l) => /migrations applied/.test(l.msg)), 'pending migrations run at start')

    const admin = await login(server.url, 'admin', 'change-me-now')
    t.equal(admin.status, 200)
    t.match(admin.body, { user: { username: 'admin', role: 'Administrator' } })
    const token = admin.body.authentication_token
    t.equal((await request(server.url, 'GET', '/templates', { token })).status, 200)
    const created = await request(server.url, 'POST', '/templates', { token, form: { 'template[name]': 'Feature film', 'template[template_type]': 'generic' } })
    t.equal(created.status, 201, created.text)

    const exit = await server.stop()
    t.equal(exit.code, 0, `SIGTERM exits 0 ${exit.stderr}`)

    // the data outlives the process
    const again = await serve(args, cwd)
    t.teardown(() => again.stop())
    const relogin = await login(again.url, 'admin', 'change-me-now')
    t.equal(relogin.status, 200)
    const list = await request(again.url, 'GET', '/templates', { token: relogin.body.authentication_token })
    t.same(list.body.templates.map((x: { name: string }) => x.name), ['Feature film'])
    t.equal((await again.stop()).code, 0)
  })

  t.test(`serve without users says how to create an admin; a short admin password stops it before anything runs [${db}]`, async (t) => {
    const cwd = await tempDir(t)
    const dataDir = path.join(cwd, 'data')
    const databaseUrl = await scratch(t, db)
    const port = await freePort()
    const args = ['--data-dir', dataDir, '--port', String(port), '--host', '127.0.0.1', ...(databaseUrl ? ['--database-url', databaseUrl] : [])]

    const short = await mamkit(['serve', ...args], cwd, { MAMKIT_ADMIN_PASSWORD: 'short' })
    t.equal(short.code, 2)
    t.equal(short.stderr.trim(), 'mamkit: MAMKIT_ADMIN_PASSWORD must be at least 8 characters', 'the reason alone, without the usage')
    t.notMatch(short.stdout, /migrations applied/)
    if (databaseUrl) {
      const c = new pg.Client({ connectionString: databaseUrl })
      await c.connect()
      const { rows } = await c.query(`select count(*)::int as n from information_schema.tables where table_schema = 'public'`)
      await c.end()
      t.equal(rows[0].n, 0, 'no migration ran')
    } else {
      t.notOk(existsSync(path.join(dataDir, 'mamkit.sqlite')), 'no database was even opened')
    }

    const server = await serve(args, cwd, { MAMKIT_HEADERS_TIMEOUT_MS: '500' })
    // the server's own header timeout: a client that never finishes its headers is cut off
    const started = Date.now()
    const closedAfter = await new Promise<number>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write('GET /api/v1/version HTTP/1.1\r\nHost: x\r\n'))
      socket.on('error', reject)
      socket.on('data', () => {})
      socket.on('close', () => resolve(Date.now() - started))
    })
    t.ok(closedAfter >= 400 && closedAfter < 5000, `slow headers: closed after ${closedAfter} ms (MAMKIT_HEADERS_TIMEOUT_MS=500)`)
    const exit = await server.stop()
    t.equal(exit.code, 0)
    t.match(exit.stderr, /no users, so nobody can log in/)
    t.match(exit.stderr, /mamkit users create --username admin --password '.*' --admin --data-dir /)
    t.match(exit.stderr, /MAMKIT_ADMIN_PASSWORD/)
  })
}

t.test('routes: one line per route, METHOD path plugin access', async (t) => {
  const cwd = await tempDir(t)
  const run = await mamkit(['routes', '--data-dir', path.join(cwd, 'data')], cwd)
  t.equal(run.code, 0, run.stderr)
  const lines = run.stdout
    .split('\n')
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .filter(Boolean)
  t.ok(lines.length > 10, 'lists the routes')
  for (const line of lines) t.match(line, /^(GET|POST|PUT|PATCH|DELETE) \/api\/v1\/[\w/:.-]* [a-z][a-z0-9-]* [\w.]+$/, line)
  t.equal(new Set(lines).size, lines.length, 'each route once')
  for (const expected of [
    'GET /api/v1/templates templates authenticated',
    'GET /api/v1/templates/:id templates authenticated',
    'POST /api/v1/templates templates templates.manage',
    'POST /api/v1/session core public',
    'GET /api/v1/version core public',
    'PUT /api/v1/settings/activate_module core admin',
  ])
    t.ok(lines.includes(expected), expected)
})

t.test('the mamkit bin is the compiled CLI with a node shebang', async (t) => {
  const root = fileURLToPath(new URL('../../../', import.meta.url))
  const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'))
  t.equal(path.resolve(root, pkg.bin.mamkit), CLI, 'package.json bin.mamkit is dist/host/cli.js')
  const source = await readFile(CLI, 'utf8')
  t.ok(source.startsWith('#!/usr/bin/env node\n'), 'starts with #!/usr/bin/env node')
})

t.test('help and bad usage', async (t) => {
  const cwd = await tempDir(t)
  const dataDir = ['--data-dir', path.join(cwd, 'data')]

  const help = await mamkit(['--help'], cwd)
  t.equal(help.code, 0)
  t.match(help.stdout, /mamkit <command>/)
  t.match(help.stdout, /serve/)

  const cases: Array<[string[], RegExp]> = [
    [[], /a command is required/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['users'], /unknown command "users"/],
    [['serve', '--bogus'], /Unknown option '--bogus'/],
    [['serve', '--port'], /--port/],
    [['serve', '--port', 'eighty', ...dataDir], /--port must be a port number/],
    [['serve', '--port', '70000', ...dataDir], /--port must be a port number/],
    [['users', 'create', '--username', 'eve', ...dataDir], /--password is required/],
    [['users', 'create', '--password', 'long-enough', ...dataDir], /--username is required/],
    [['users', 'create', '--username', 'has space', '--password', 'long-enough', ...dataDir], /username must be/],
    [['api-keys', 'create', '--user', 'eve', ...dataDir], /--name is required/],
  ]
  for (const [args, message] of cases) {
    const run = await mamkit(args, cwd)
    t.equal(run.code, 2, `mamkit ${args.join(' ')} exits 2`)
    t.match(run.stderr, message, `mamkit ${args.join(' ')}: ${message}`)
    t.match(run.stderr, /mamkit <command>/, 'with the usage')
    t.equal(run.stdout, '', 'nothing on stdout')
  }

  const env = await mamkit(['serve', ...dataDir], cwd, { MAMKIT_PORT: 'nope' })
  t.equal(env.code, 2)
  t.match(env.stderr, /MAMKIT_PORT must be a port number/)
})
