#!/usr/bin/env node
import path from 'node:path'
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import type { MamConfigInput } from '../core/config.js'
import type { PluginDefinition } from '../core/plugin/contract.js'
import type { EntityManager } from '../core/db/orm.js'
import type * as HostModule from './index.js'
import type * as PluginsModule from '../plugins/index.js'
import type * as RuntimeModule from '../core/runtime.js'
import type * as EntitiesModule from '../core/auth/entities.js'
import type * as AccountsModule from '../core/auth/accounts.js'

// The server modules (ORM, Koa, every plugin) take a while to load: loaded only once the command
// line is known to be good, so `--help` and usage errors answer at once.
let createMamServer: typeof HostModule.createMamServer
let createHttpServer: typeof HostModule.createHttpServer
let builtinPlugins: typeof PluginsModule.builtinPlugins
let MamRuntime: typeof RuntimeModule.MamRuntime
let closeServer: typeof RuntimeModule.closeServer
let describePlugins: typeof RuntimeModule.describePlugins
let API_PREFIX: string
let User: typeof EntitiesModule.User
let createApiKey: typeof AccountsModule.createApiKey
let createUser: typeof AccountsModule.createUser
let checkPassword: typeof AccountsModule.checkPassword
/** how long loading the server modules took (logged with the start-up time) */
let modulesMs = 0

async function loadServerModules() {
  const [host, plugins, runtime, httpApp, entities, accounts] = await Promise.all([
    import('./index.js'),
    import('../plugins/index.js'),
    import('../core/runtime.js'),
    import('../core/http/app.js'),
    import('../core/auth/entities.js'),
    import('../core/auth/accounts.js'),
  ])
  ;({ createMamServer, createHttpServer } = host)
  ;({ builtinPlugins } = plugins)
  ;({ MamRuntime, closeServer, describePlugins } = runtime)
  ;({ API_PREFIX } = httpApp)
  ;({ User } = entities)
  ;({ createApiKey, createUser, checkPassword } = accounts)
}

const COMMANDS = new Set(['serve', 'migrate', 'users create', 'api-keys create', 'routes', 'events'])
const REQUIRED: Record<string, Array<'username' | 'password' | 'user' | 'name'>> = {
  'users create': ['username', 'password'],
  'api-keys create': ['user', 'name'],
}

const USAGE = `mamkit <command> [options]

  serve [--port N] [--host H]               run the server (env MAMKIT_PORT, MAMKIT_HOST)
  migrate                                   apply pending database migrations
  users create --username U --password P [--admin]
  api-keys create --user U --name N         prints the key's secret once
  routes                                    every route: METHOD path plugin access
  events                                    the event catalogue: name plugin subject description

every command: [--config mamkit.json] [--data-dir DIR] [--database-url URL] [--plugin MODULE ...]
  (--config: a JSON file of settings, e.g. {"storages": {"media_1": "/mnt/media1"}, "plugins": {"assets": {"proxy": {...}}, "platform": {...}}};
   options on the command line win over it)
  (env MAMKIT_DATA_DIR, MAMKIT_DATABASE_URL, MAMKIT_PLUGINS=comma,separated)`

function fail(message: string): never {
  console.error(`mamkit: ${message}\n\n${USAGE}`)
  process.exit(2)
}

/** a refusal that is not about the command line: the reason alone */
function refuse(message: string): never {
  console.error(`mamkit: ${message}`)
  process.exit(2)
}

function parseCommandLine() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        config: { type: 'string' },
        'database-url': { type: 'string' },
        plugin: { type: 'string', multiple: true },
        username: { type: 'string' },
        password: { type: 'string' },
        admin: { type: 'boolean' },
        user: { type: 'string' },
        name: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    })
  } catch (err) {
    // unknown option, or an option without its value
    fail((err as Error).message)
  }
}

const { values, positionals } = parseCommandLine()

function portOf(value: string | undefined, source: string): number | undefined {
  if (value === undefined || value === '') return undefined
  const port = Number(value)
  if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`${source} must be a port number (0-65535), not "${value}"`)
  return port
}

/** the --config file: MamConfigInput as JSON (dataDir, databaseUrl, port, host, logLevel, limits, jobs, http, auth, storages, plugins) */
function configFile(): MamConfigInput {
  const file = values.config
  if (!file) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    fail(`--config ${file}: ${(err as Error).message}`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) fail(`--config ${file}: the file holds a JSON object`)
  const known = new Set(['dataDir', 'databaseUrl', 'port', 'host', 'logLevel', 'limits', 'jobs', 'http', 'auth', 'storages', 'plugins'])
  const unknown = Object.keys(parsed).filter((k) => !known.has(k))
  if (unknown.length) fail(`--config ${file}: unknown keys ${unknown.join(', ')} (known: ${[...known].join(', ')})`)
  const input = parsed as MamConfigInput
  // relative folders are relative to the file, not to where the command runs
  if (typeof input.dataDir === 'string') input.dataDir = path.resolve(path.dirname(file), input.dataDir)
  // (resolveConfig checks the storages; a value that is no folder is left for it to name)
  if (input.storages && typeof input.storages === 'object')
    for (const [name, folder] of Object.entries(input.storages)) if (typeof folder === 'string' && folder.trim()) input.storages[name] = path.resolve(path.dirname(file), folder.trim())
  return input
}

const fromFile = configFile()
const config: MamConfigInput = {
  ...fromFile,
  dataDir: values['data-dir'] ?? fromFile.dataDir,
  databaseUrl: values['database-url'] ?? fromFile.databaseUrl,
  port: portOf(values.port, '--port') ?? portOf(process.env.MAMKIT_PORT, 'MAMKIT_PORT') ?? fromFile.port,
  host: values.host ?? fromFile.host,
}

/** partner plugins: modules whose default export is a plugin definition */
async function extraPlugins(): Promise<PluginDefinition[]> {
  const specs = [...(values.plugin ?? []), ...(process.env.MAMKIT_PLUGINS?.split(',').filter(Boolean) ?? [])]
  return Promise.all(
    specs.map(async (spec) => {
      const target = spec.startsWith('.') || path.isAbsolute(spec) ? pathToFileURL(path.resolve(spec)).href : spec
      const mod = await import(target)
      return (mod.default ?? mod.plugin) as PluginDefinition
    }),
  )
}

function need(name: 'username' | 'password' | 'user' | 'name'): string {
  const v = values[name]
  if (!v) fail(`--${name} is required`)
  return v as string
}

async function withRuntime<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
  const runtime = await MamRuntime.create({ config: { ...config, logLevel: 'warn' }, plugins: [...builtinPlugins, ...(await extraPlugins())], runJobs: false })
  try {
    return await work(runtime.container.resolve<EntityManager>('em').fork())
  } finally {
    await runtime.close()
  }
}

/** the first administrator's password, checked before anything is opened or migrated */
function checkAdminPassword() {
  const password = process.env.MAMKIT_ADMIN_PASSWORD
  if (!password) return
  try {
    checkPassword(password, 'MAMKIT_ADMIN_PASSWORD')
  } catch (err) {
    refuse((err as Error).message)
  }
}

/** a server nobody can log in to says so, and how to change that */
async function warnWithoutUsers(runtime: RuntimeModule.MamRuntime) {
  const row = await runtime.db.knex('users').count({ n: '*' }).first()
  if (Number(row?.n ?? 0) > 0) return
  const where = [values['data-dir'] ? ` --data-dir ${values['data-dir']}` : '', values['database-url'] ? ' --database-url …' : ''].join('')
  console.error(
    `mamkit: the database has no users, so nobody can log in. Create an administrator (also while the server runs):\n` +
      `  mamkit users create --username admin --password '<at least 8 characters>' --admin${where}\n` +
      `or start the server once with MAMKIT_ADMIN_PASSWORD set, which creates "admin" on an empty database.`,
  )
}

async function serve() {
  checkAdminPassword()
  const mam = createMamServer({ config, extraPlugins: await extraPlugins() })
  const runtime = await mam.start()
  await warnWithoutUsers(runtime)
  const server = createHttpServer(mam.handler, runtime.config.http)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(runtime.config.port, runtime.config.host, resolve)
  })
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : runtime.config.port
  // startupMs: from the process's start, module loading included (what a restart costs)
  runtime.log.info({ url: `http://${runtime.config.host}:${port}${API_PREFIX}`, startupMs: Math.round(process.uptime() * 1000), modulesMs }, `mamkit listening on http://${runtime.config.host}:${port}${API_PREFIX}`)
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    runtime.log.info({ signal }, 'stopping: finishing requests and handing back running jobs')
    let open = 'HTTP connections'
    // past the deadline the process ends anyway: jobs not handed back are retried once their leases lapse
    const deadline = setTimeout(() => {
      const line = `mamkit: shutdown took longer than ${runtime.config.http.shutdownTimeoutMs} ms; still open: ${open}; exiting`
      runtime.log.error({ open }, line)
      if (!process.stderr.destroyed) process.stderr.write(`${line}\n`)
      process.exit(1)
    }, runtime.config.http.shutdownTimeoutMs)
    try {
      await closeServer(server)
      open = 'running jobs and the database'
      await mam.close()
    } catch (err) {
      runtime.log.error({ err }, 'stopping failed')
      process.exit(1)
    }
    clearTimeout(deadline)
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}

async function main() {
  const [command, sub] = positionals
  if (values.help) {
    console.log(USAGE)
    return
  }
  if (!command) fail('a command is required')
  const name = `${command} ${sub ?? ''}`.trim()
  if (!COMMANDS.has(name)) fail(`unknown command "${positionals.join(' ')}"`)
  // required options are checked before anything is loaded or opened
  for (const option of REQUIRED[name] ?? []) need(option)
  const loading = performance.now()
  await loadServerModules()
  modulesMs = Math.round(performance.now() - loading)
  switch (name) {
    case 'serve':
      return serve()
    case 'migrate': {
      await withRuntime(async () => undefined)
      console.log('migrations are up to date')
      return
    }
    case 'users create': {
      const input = { username: need('username'), password: need('password'), admin: values.admin }
      const user = await withRuntime((em) => createUser(em, input))
      console.log(`created user ${user.username} (id ${user.id}${values.admin ? ', administrator' : ''})`)
      return
    }
    case 'api-keys create': {
      const [username, keyName] = [need('user'), need('name')]
      const secret = await withRuntime(async (em) => {
        const user = await em.findOne(User, { username })
        if (!user) throw Object.assign(new Error(`no user "${username}"`), { code: 'not_found' })
        return (await createApiKey(em, user, keyName)).secret
      })
      console.log(secret)
      return
    }
    case 'routes': {
      const { loaded } = await describePlugins({ config, plugins: [...builtinPlugins, ...(await extraPlugins())] })
      for (const r of loaded.routes) console.log(`${r.method.padEnd(6)} ${API_PREFIX}${r.path} ${r.plugin} ${r.access}`)
      return
    }
    case 'events': {
      const { loaded } = await describePlugins({ config, plugins: [...builtinPlugins, ...(await extraPlugins())] })
      const events = loaded.plugins.flatMap((p) => p.events ?? []).sort((a, b) => a.name.localeCompare(b.name))
      const width = Math.max(...events.map((e) => e.name.length))
      for (const e of events) console.log(`${e.name.padEnd(width)}  ${e.plugin.padEnd(13)} ${e.subject.padEnd(8)} ${e.description}`)
      return
    }
    default:
      fail(`unknown command "${positionals.join(' ')}"`)
  }
}

main().catch((err) => {
  if (err?.code === 'conflict' || err?.code === 'invalid_parameters' || err?.code === 'not_found') fail(err.message)
  console.error(err?.stack ?? err)
  process.exit(1)
})
