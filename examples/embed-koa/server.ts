/**
 * An existing Koa application with routes of its own, serving mamkit below /mam:
 * `GET /mam/api/v1/version`, `POST /mam/api/v1/session`, … while `/` and `/health` stay the host's.
 *
 *   node dist/examples/embed-koa/server.js        # PORT (8080) and MAMKIT_DATA_DIR (./data) from the env
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import Koa from 'koa'
import Router from '@koa/router'
import { createMamServer, type MamServer } from '../../host/index.js'
import type { PluginDefinition } from '../../core/index.js'

export interface ExampleOptions {
  dataDir?: string
  databaseUrl?: string
  /** 0 (the default) picks a free port */
  port?: number
  host?: string
  logLevel?: string
  extraPlugins?: PluginDefinition[]
  /** called once the host listens and before mamkit has started: until then /mam answers 503 */
  onListening?(url: string): void | Promise<void>
}

export interface RunningExample {
  /** the host's base URL; mamkit is at `${url}/mam/api/v1` */
  url: string
  mam: MamServer
  close(): Promise<void>
}

export async function start(options: ExampleOptions = {}): Promise<RunningExample> {
  const mam = createMamServer({
    config: { dataDir: options.dataDir, databaseUrl: options.databaseUrl, logLevel: options.logLevel },
    extraPlugins: options.extraPlugins,
  })

  const app = new Koa()
  const router = new Router()
  router.get('/', (ctx) => {
    ctx.body = { app: 'studio-portal', mam: '/mam/api/v1' }
  })
  router.get('/health', (ctx) => {
    ctx.body = { ok: true, mam: mam.runtime ? 'running' : 'not running' }
  })
  // mount mamkit before any body parser of the host: mamkit reads request bodies itself
  app.use(mam.koa('/mam'))
  app.use(router.routes())
  app.use(router.allowedMethods())

  const server = http.createServer(app.callback())
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve)
  })
  const { address, port } = server.address() as AddressInfo
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`
  const stopListening = () => new Promise<void>((resolve) => server.close(() => resolve()))

  try {
    await options.onListening?.(url)
    await mam.start() // plugins, database, migrations, jobs
  } catch (err) {
    await stopListening()
    await mam.close()
    throw err
  }

  return {
    url,
    mam,
    async close() {
      await stopListening() // stop accepting; in-flight requests finish (idle keep-alives are dropped)
      await mam.close()
    },
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const running = await start({ port: Number(process.env.PORT ?? 8080), dataDir: process.env.MAMKIT_DATA_DIR ?? 'data' })
  console.log(`host on ${running.url}, mamkit on ${running.url}/mam/api/v1`)
  const stop = () => void running.close().then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}
