#!/usr/bin/env node
import http from 'node:http'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { createMamServer } from './index.js'
import { builtinPlugins } from '../plugins/index.js'
import { MamRuntime, closeServer, describePlugins } from '../core/runtime.js'
import type { MamConfigInput } from '../core/config.js'
import type { PluginDefinition } from '../core/plugin/contract.js'
import { API_PREFIX } from '../core/http/app.js'
import { User } from '../core/auth/entities.js'
import { createApiKey, createUser } from '../core/auth/accounts.js'
import type { EntityManager } from '../core/db/orm.js'

const USAGE = `mamkit <command> [options]

  serve [--port N] [--host H]               run the server (env MAMKIT_PORT, MAMKIT_HOST)
  migrate                                   apply pending database migrations
  users create --username U --password P [--admin]
  api-keys create --user U --name N         prints the key's secret once
  routes                                    every route: METHOD path plugin access

every command: [--data-dir DIR] [--database-url URL] [--plugin MODULE ...]
  (env MAMKIT_DATA_DIR, MAMKIT_DATABASE_URL, MAMKIT_PLUGINS=comma,separated)`

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    'data-dir': { type: 'string' },
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

const config: MamConfigInput = {
  dataDir: values['data-dir'],
  databaseUrl: values['database-url'],
  port: values.port ? Number(values.port) : undefined,
  host: values.host,
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

function fail(message: string): never {
  console.error(`mamkit: ${message}\n\n${USAGE}`)
  process.exit(2)
}

async function withRuntime<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
  const runtime = await MamRuntime.create({ config: { ...config, logLevel: 'warn' }, plugins: [...builtinPlugins, ...(await extraPlugins())], runJobs: false })
  try {
    return await work(runtime.container.resolve<EntityManager>('em').fork())
  } finally {
    await runtime.close()
  }
}

async function serve() {
  const mam = createMamServer({ config, extraPlugins: await extraPlugins() })
  const runtime = await mam.start()
  const server = http.createServer(mam.handler)
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(runtime.config.port, runtime.config.host, resolve)
  })
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : runtime.config.port
  runtime.log.info({ url: `http://${runtime.config.host}:${port}${API_PREFIX}` }, `mamkit listening on http://${runtime.config.host}:${port}${API_PREFIX}`)
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    runtime.log.info({ signal }, 'stopping: finishing requests and handing back running jobs')
    await closeServer(server)
    await mam.close()
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}

async function main() {
  const [command, sub] = positionals
  if (values.help || !command) {
    console.log(USAGE)
    return
  }
  switch (`${command} ${sub ?? ''}`.trim()) {
    case 'serve':
      return serve()
    case 'migrate': {
      await withRuntime(async () => undefined)
      console.log('migrations are up to date')
      return
    }
    case 'users create': {
      const user = await withRuntime((em) => createUser(em, { username: need('username'), password: need('password'), admin: values.admin }))
      console.log(`created user ${user.username} (id ${user.id}${values.admin ? ', administrator' : ''})`)
      return
    }
    case 'api-keys create': {
      const secret = await withRuntime(async (em) => {
        const user = await em.findOne(User, { username: need('user') })
        if (!user) fail(`no user "${values.user}"`)
        return (await createApiKey(em, user, need('name'))).secret
      })
      console.log(secret)
      return
    }
    case 'routes': {
      const { loaded } = await describePlugins({ config, plugins: [...builtinPlugins, ...(await extraPlugins())] })
      for (const r of loaded.routes) console.log(`${r.method.padEnd(6)} ${API_PREFIX}${r.path} ${r.plugin} ${r.access}`)
      return
    }
    default:
      fail(`unknown command "${positionals.join(' ')}"`)
  }
}

main().catch((err) => {
  if (err?.code === 'conflict' || err?.code === 'invalid_parameters') fail(err.message)
  console.error(err?.stack ?? err)
  process.exit(1)
})
