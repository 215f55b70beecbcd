/**
 * An Express 5 application serving mamkit below /mam. Express strips the mount path, so
 * `mam.handler` sees `/api/v1/...` URLs.
 *
 *   node dist/examples/embed-express/server.js    # PORT (8080) and MAMKIT_DATA_DIR (./data) from the env
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import express from 'express'
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

  const app = express()
  // mamkit first: a body parser mounted before it would consume the request bodies mamkit reads
  app.use('/mam', mam.handler)
  app.use(express.json())
  app.get('/', (_req, res) => {
    res.json({ app: 'studio-portal', mam: '/mam/api/v1' })
  })
  app.post('/echo', (req, res) => {
    res.json({ echo: req.body })
  })

  const server = http.createServer(app)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve)
  })
  const { address, port } = server.address() as AddressInfo
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`
  const stopListening = () => new Promise<void>((resolve) => server.close(() => resolve()))

  try {
    await options.onListening?.(url)
    await mam.start()
  } catch (err) {
    await stopListening()
    await mam.close()
    throw err
  }

  return {
    url,
    mam,
    async close() {
      await stopListening()
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
