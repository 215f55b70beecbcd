import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { assertProblem as assertProblemOn, databaseKinds, request, scratchDatabase, startTestServer, type Reply } from '../../core/testing/index.js'
import { createUser } from '../../core/auth/accounts.js'
import type { EntityManager } from '../../core/db/orm.js'
import { createMamServer, stripPrefix } from '../../host/index.js'
import * as koaExample from '../../examples/embed-koa/server.js'
import * as expressExample from '../../examples/embed-express/server.js'
import * as nodeHttpExample from '../../examples/embed-node-http/server.js'
import shotNotes, { TABLE as SHOT_NOTES_TABLE } from '../../examples/partner-plugin/plugin.js'

type Tap = typeof t

const assertProblem = (tap: object, reply: Reply, status: number, params?: string[]) => assertProblemOn(tap as Tap, reply, status, params)

const CLI = fileURLToPath(new URL('../../host/cli.js', import.meta.url))
const PLUGIN_MODULE = fileURLToPath(new URL('../../examples/partner-plugin/plugin.js', import.meta.url))

// every subtest starts real processes and servers (twice over with PostgreSQL); on a busy machine
// that outlasts the default per-file limit, so this file asks for more
t.setTimeout(900_000)

const embeddings = [
  { name: 'embed-koa', start: koaExample.start },
  { name: 'embed-express', start: expressExample.start },
  { name: 'embed-node-http', start: nodeHttpExample.start },
]

const refused = (url: string) =>
  fetch(url).then(
    () => false,
    () => true,
  )

for (const db of databaseKinds()) {
  for (const example of embeddings) {
    t.test(`${example.name} serves the host and mamkit below /mam [${db}]`, async (t) => {
      const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-example-'))
      const scratch = await scratchDatabase(db)
      t.teardown(async () => {
        await scratch.drop()
        await rm(dataDir, { recursive: true, force: true })
      })
      const options = { dataDir, databaseUrl: scratch.databaseUrl, logLevel: 'silent' }

      let early: Reply | undefined
      let hostEarly: Reply | undefined
      const running = await example.start({
        ...options,
        async onListening(url) {
          early = await request(url, 'GET', '/mam/api/v1/version')
          hostEarly = await request(url, 'GET', '/')
        },
      })
      let closed = false
      t.teardown(() => (closed ? undefined : running.close()))

      // before start() finished: the host answers, mamkit says 503 instead of hanging
      t.ok(early, 'a request reached the host before mamkit started')
      t.equal(early!.status, 503, 'mamkit answers 503 until it has started')
      t.match(early!.headers.get('content-type'), /application\/problem\+json/)
      t.equal(early!.headers.get('retry-after'), '1')
      t.match(early!.body, { status: 503, code: 'service_unavailable' })
      t.equal(hostEarly?.status, 200, 'the host route works while mamkit starts')

      // the host's own route
      const home = await request(running.url, 'GET', '/')
      t.equal(home.status, 200)
      t.same(home.body, { app: 'studio-portal', mam: '/mam/api/v1' })

      // mamkit below the prefix
      const mam = `${running.url}/mam/api/v1`
      const version = await request(mam, 'GET', '/version')
      t.equal(version.status, 200)
      t.type(version.body.hash.server, 'string')
      t.same(Object.keys(version.body.hash).sort(), ['api', 'release', 'server'], 'anonymous: the server and API versions only')
      t.equal((await request(mam, 'GET', '/version.json')).status, 200, '.json suffix below the prefix')
      t.equal((await request(running.url, 'GET', '/mam/api/v1/version?x=1')).status, 200, 'query string below the prefix')

      const em = running.mam.runtime!.container.resolve<EntityManager>('em').fork()
      await createUser(em, { username: 'editor', password: 'editor-password' })

      const login = await request(mam, 'POST', '/session', { form: { login: 'editor', password: 'editor-password' } })
      t.equal(login.status, 200, 'login with a form body')
      t.match(login.body, { authentication_token: /^mt_\d+_/, user: { username: 'editor' } })
      const token = login.body.authentication_token as string
      const jsonLogin = await request(mam, 'POST', '/session', { json: { login: 'editor', password: 'editor-password' } })
      t.equal(jsonLogin.status, 200, 'login with a JSON body: the host did not consume it')

      const templates = await request(mam, 'GET', '/templates', { token })
      t.equal(templates.status, 200)
      t.same(templates.body, { templates: [] })
      assertProblem(t, await request(mam, 'GET', '/templates'), 401)
      assertProblem(t, await request(mam, 'GET', '/no-such-route', { token }), 404)

      // a URL that only starts like the prefix is the host's, not mamkit's
      const lookalike = await request(running.url, 'GET', '/mammoth')
      t.equal(lookalike.status, 404)
      t.notMatch(lookalike.headers.get('content-type') ?? '', /problem\+json/, 'the host, not mamkit, answers /mammoth')

      // close(): the port is released and the database closed; a second start on the same data works
      await running.close()
      closed = true
      t.equal(running.mam.runtime, undefined, 'no runtime after close()')
      t.ok(await refused(`${running.url}/`), 'the host no longer accepts connections')

      const again = await example.start(options)
      t.teardown(() => again.close())
      const relogin = await request(`${again.url}/mam/api/v1`, 'POST', '/session', { json: { login: 'editor', password: 'editor-password' } })
      t.equal(relogin.status, 200, 'restarted on the same data: the user is still there')
      const still = await request(`${again.url}/mam/api/v1`, 'GET', '/templates', { token })
      t.equal(still.status, 200, 'and the earlier login token still works')
    })
  }
}

t.test('embed-express: the host keeps its own body parser', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-example-'))
  const running = await expressExample.start({ dataDir, logLevel: 'silent' })
  t.teardown(async () => {
    await running.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  const echo = await request(running.url, 'POST', '/echo', { json: { hello: 'world' } })
  t.equal(echo.status, 200)
  t.same(echo.body, { echo: { hello: 'world' } })
})

t.test('prefix handling of the embedding adapters', async (t) => {
  t.equal(stripPrefix('/mam', '/mam/api/v1/version'), '/api/v1/version')
  t.equal(stripPrefix('/mam/', '/mam/api/v1/version'), '/api/v1/version', 'a trailing slash on the prefix is ignored')
  t.equal(stripPrefix('/mam', '/mam'), '/')
  t.equal(stripPrefix('/mam', '/mam?x=1'), '/?x=1')
  t.equal(stripPrefix('/mam', '/mammoth'), undefined)
  t.equal(stripPrefix('/mam', '/other/mam/x'), undefined)
  t.equal(stripPrefix('', '/api/v1/x'), '/api/v1/x')

  // mount(): next wins over fallback, fallback over a bare 404; close() before start() is harmless
  const mam = createMamServer()
  await mam.close()
  const calls: string[] = []
  const fakeRes = () => {
    const res: any = { headersSent: false, status: 0, writeHead: (s: number) => ((res.status = s), res), end: () => res }
    return res
  }
  const req = () => ({ url: '/elsewhere' }) as any
  mam.mount('/mam', () => calls.push('fallback'))(req(), fakeRes(), () => calls.push('next'))
  mam.mount('/mam', () => calls.push('fallback'))(req(), fakeRes())
  const bare = fakeRes()
  mam.mount('/mam')(req(), bare)
  t.same(calls, ['next', 'fallback'])
  t.equal(bare.status, 404)
  const stopped = fakeRes()
  mam.handler({ url: '/api/v1/version' } as any, stopped)
  t.equal(stopped.status, 503, 'a closed server answers 503')
})

async function checkShotNotes(tap: object, mam: string, adminToken: string, userToken?: string) {
  const t = tap as Tap
  const features = await request(mam, 'GET', '/features', { token: adminToken })
  t.equal(features.status, 200)
  const feature = features.body.features.find((f: { name: string }) => f.name === 'shot-notes')
  t.match(feature, { name: 'shot-notes', title: 'Shot notes', version: '1.0.0', active: true }, 'the plugin shows in GET /features')

  const created = await request(mam, 'POST', '/shot_notes', { form: { 'note[shot]': 'sc01_sh010', 'note[text]': 'grade is too warm' }, token: adminToken })
  t.equal(created.status, 201)
  t.match(created.body, { shot_note: { id: Number, shot: 'sc01_sh010', text: 'grade is too warm', created_at: String } })
  const id = created.body.shot_note.id

  const list = await request(mam, 'GET', '/shot_notes', { token: adminToken, query: { shot: 'sc01_sh010' } })
  t.equal(list.status, 200)
  t.same(list.body.shot_notes.map((n: { id: number }) => n.id), [id])
  t.same((await request(mam, 'GET', '/shot_notes', { token: adminToken, query: { shot: 'other' } })).body, { shot_notes: [] })
  t.equal((await request(mam, 'GET', `/shot_notes/${id}`, { token: adminToken })).body.shot_note.text, 'grade is too warm')
  assertProblem(t, await request(mam, 'GET', '/shot_notes/999999', { token: adminToken }), 404)
  assertProblem(t, await request(mam, 'GET', '/shot_notes'), 401)
  assertProblem(t, await request(mam, 'POST', '/shot_notes', { json: { note: { shot: 'x' } }, token: adminToken }), 422, ['note[text]'])
  if (userToken) {
    assertProblem(t, await request(mam, 'POST', '/shot_notes', { json: { note: { shot: 'x', text: 'y' } }, token: userToken }), 403)
    t.equal((await request(mam, 'GET', '/shot_notes', { token: userToken })).status, 200, 'reading needs no capability')
  }
}

for (const db of databaseKinds()) {
  t.test(`partner plugin via startTestServer({ extraPlugins }) [${db}]`, async (t) => {
    const s = await startTestServer({ db, extraPlugins: [shotNotes] })
    t.teardown(() => s.close())
    t.ok(await s.runtime.db.knex.schema.hasTable(SHOT_NOTES_TABLE), 'its migration created its table')
    const applied = await s.runtime.db.knex('mamkit_migrations').where({ plugin: 'shot-notes' }).pluck('name')
    t.same(applied, ['0001-shot-notes'])
    t.ok(s.runtime.loaded.capabilities.has('shot_notes.write'), 'its capability is known')
    await checkShotNotes(t, s.url, s.admin.token, s.user.token)

    // switched off: its routes answer 404, its table stays
    const off = await s.request('PUT', '/settings/deactivate_module', { json: { module: 'shot-notes' }, token: s.admin.token })
    t.equal(off.status, 200)
    assertProblem(t, await s.request('GET', '/shot_notes', { token: s.admin.token }), 404)
    t.ok(await s.runtime.db.knex.schema.hasTable(SHOT_NOTES_TABLE))
  })

  t.test(`partner plugin via the CLI --plugin flag [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-example-'))
    const scratch = await scratchDatabase(db)
    t.teardown(async () => {
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const common = ['--data-dir', dataDir, '--plugin', PLUGIN_MODULE, ...(scratch.databaseUrl ? ['--database-url', scratch.databaseUrl] : [])]

    const routes = await runCli(['routes', ...common], dataDir)
    t.equal(routes.code, 0, routes.stderr)
    const lines = routes.stdout.split('\n').map((l) => l.trim().replace(/\s+/g, ' '))
    t.ok(lines.includes('POST /api/v1/shot_notes shot-notes shot_notes.write'), 'routes lists the plugin route')
    t.ok(lines.includes('GET /api/v1/shot_notes/:id shot-notes authenticated'))

    const migrate = await runCli(['migrate', ...common], dataDir)
    t.equal(migrate.code, 0, migrate.stderr)

    const server = spawnCli(['serve', '--port', '0', ...common], dataDir, { MAMKIT_ADMIN_PASSWORD: 'admin-password' })
    t.teardown(() => stop(server))
    const url = await listeningUrl(server)
    const login = await request(url, 'POST', '/session', { json: { login: 'admin', password: 'admin-password' } })
    t.equal(login.status, 200)
    await checkShotNotes(t, url, login.body.authentication_token)
  })
}

// ---- the real CLI, as a child process ----

function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('MAMKIT_') || k === 'MAMKIT_TEST_DATABASE_URL') env[k] = v
  return { ...env, ...extra }
}

function spawnCli(args: string[], cwd: string, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { cwd, env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
}

function runCli(args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnCli(args, cwd, env)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** the API base URL from serve's "listening" log line */
function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = ''
    let stderr = ''
    child.stderr!.on('data', (d) => (stderr += d))
    child.stdout!.on('data', (d) => {
      buffered += d
      for (const line of buffered.split('\n')) {
        try {
          const entry = JSON.parse(line)
          if (typeof entry.url === 'string' && /listening/.test(entry.msg)) resolve(entry.url)
        } catch {
          // a partial line; wait for the rest
        }
      }
    })
    child.once('exit', (code) => reject(new Error(`mamkit serve exited (${code}) before listening: ${stderr}`)))
  })
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}
