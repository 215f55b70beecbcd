import type { IncomingMessage, ServerResponse } from 'node:http'
import type Koa from 'koa'
import { MamRuntime, type RuntimeOptions } from '../core/runtime.js'
import type { PluginDefinition } from '../core/plugin/contract.js'
import { builtinPlugins } from '../plugins/index.js'

export interface MamServerOptions extends Omit<RuntimeOptions, 'plugins'> {
  /** replaces the built-in plugin list (default: all built-in plugins) */
  plugins?: PluginDefinition[]
  /** partner plugins added to the built-in ones */
  extraPlugins?: PluginDefinition[]
}

type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

export interface MamServer {
  /** Node request listener for URLs that start with /api/v1 (Express strips its mount path itself) */
  handler: NodeHandler
  /** the same, for a host that passes full URLs: strips `prefix` first, calls `next` (or 404s) for others */
  mount(prefix: string): NodeHandler
  /** Koa middleware serving everything below `prefix` */
  koa(prefix: string): Koa.Middleware
  start(): Promise<MamRuntime>
  close(): Promise<void>
  readonly runtime: MamRuntime | undefined
}

/**
 * mamkit for an existing Node host: mount the handler, then `await start()`. Requests that arrive
 * before start() finished get a 503 problem body instead of hanging.
 */
export function createMamServer(options: MamServerOptions = {}): MamServer {
  let runtime: MamRuntime | undefined
  let listener: ReturnType<MamRuntime['callback']> | undefined
  let starting: Promise<MamRuntime> | undefined

  const handler: NodeHandler = (req, res) => {
    if (listener) return void listener(req, res)
    res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' })
    res.end(JSON.stringify({ type: 'https://mamkit.dev/problems/service-unavailable', title: 'Service unavailable', status: 503, detail: 'mamkit is starting', code: 'service_unavailable' }))
  }
  const strip = (prefix: string, url: string | undefined) => {
    const p = prefix.replace(/\/+$/, '')
    if (!url || !(url === p || url.startsWith(p + '/') || url.startsWith(p + '?'))) return undefined
    return url.slice(p.length) || '/'
  }

  return {
    handler,
    mount(prefix) {
      return (req, res, next) => {
        const rest = strip(prefix, req.url)
        if (rest === undefined) {
          if (next) return next()
          res.writeHead(404).end()
          return
        }
        req.url = rest
        handler(req, res)
      }
    },
    koa(prefix) {
      return async (ctx, next) => {
        const rest = strip(prefix, ctx.req.url)
        if (rest === undefined) return next()
        ctx.respond = false
        ctx.req.url = rest
        await new Promise<void>((resolve) => {
          ctx.res.once('close', resolve)
          handler(ctx.req, ctx.res)
        })
      }
    },
    async start() {
      starting ??= MamRuntime.create({
        ...options,
        plugins: [...(options.plugins ?? builtinPlugins), ...(options.extraPlugins ?? [])],
      }).then((r) => {
        runtime = r
        listener = r.callback()
        return r
      })
      return starting
    },
    async close() {
      listener = undefined
      await (starting ?? Promise.resolve()).catch(() => {})
      await runtime?.close()
      runtime = undefined
      starting = undefined
    },
    get runtime() {
      return runtime
    },
  }
}

export { builtinPlugins }
export type { MamRuntime }
