import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type Koa from 'koa'
import { MamRuntime, type RuntimeOptions } from '../core/runtime.js'
import type { MamConfig } from '../core/config.js'
import type { PluginDefinition } from '../core/plugin/contract.js'
import { builtinPlugins } from '../plugins/index.js'

export interface MamServerOptions extends Omit<RuntimeOptions, 'plugins'> {
  /** replaces the built-in plugin list (default: all built-in plugins) */
  plugins?: PluginDefinition[]
  /** partner plugins added to the built-in ones */
  extraPlugins?: PluginDefinition[]
}

/** a Node request listener; Express and Connect pass `next` as well */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

export interface MamServer {
  /** Node request listener for URLs that start with /api/v1 (Express strips its mount path itself) */
  handler: NodeHandler
  /**
   * The same, for a host that passes full URLs (node:http): strips `prefix` first. Other URLs go to
   * `next` (Connect style), else to `fallback` (the host's own listener), else get a 404.
   */
  mount(prefix: string, fallback?: (req: IncomingMessage, res: ServerResponse) => void): NodeHandler
  /** Koa middleware serving everything below `prefix`; other requests go on down the host's chain */
  koa(prefix: string): Koa.Middleware
  /** loads plugins, opens and migrates the database, starts jobs; safe to call more than once */
  start(): Promise<MamRuntime>
  /** stops jobs and closes the database; requests that arrive afterwards get 503 */
  close(): Promise<void>
  readonly runtime: MamRuntime | undefined
}

const unavailable = (res: ServerResponse, detail: string) => {
  if (res.headersSent) return void res.end()
  res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' })
  res.end(JSON.stringify({ type: 'https://mamkit.dev/problems/service-unavailable', title: 'Service unavailable', status: 503, detail, code: 'service_unavailable' }))
}

/**
 * A node:http server with mamkit's timeouts (`config.http`), as `mamkit serve` runs it: headers
 * must arrive within `headersTimeoutMs`, idle keep-alive connections close after
 * `keepAliveTimeoutMs`. Node's own request timeout is off: it would cut uploads that are still
 * moving bytes; the request path keeps the body deadline itself (`requestTimeoutMs`, 408).
 * Hosts that bring their own server should set the same.
 */
export function createHttpServer(listener: NodeHandler, timeouts: MamConfig['http']): http.Server {
  return http.createServer(
    {
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: 0,
      keepAliveTimeout: timeouts.keepAliveTimeoutMs,
      // how often Node looks for connections past headersTimeout (its default, 30 s, would stretch a 15 s limit to 45)
      connectionsCheckingInterval: Math.max(100, Math.min(1000, timeouts.headersTimeoutMs / 4)),
    },
    listener,
  )
}

/**
 * `/mam/api/v1/x?y` below `/mam` is `/api/v1/x?y`; undefined when the URL is not below the prefix.
 * `/mam` alone and `/mam?q` become `/` and `/?q`; `/mammoth` is not below `/mam`.
 */
export function stripPrefix(prefix: string, url: string | undefined): string | undefined {
  const p = prefix.replace(/\/+$/, '')
  if (!url) return undefined
  if (!p) return url
  if (!url.startsWith(p)) return undefined
  const rest = url.slice(p.length)
  if (rest === '') return '/'
  if (rest[0] === '/') return rest
  if (rest[0] === '?') return '/' + rest
  return undefined
}

/**
 * mamkit for an existing Node host: mount the handler, then `await start()`. Requests that arrive
 * before start() finished (or after close()) get a 503 problem body instead of hanging.
 */
export function createMamServer(options: MamServerOptions = {}): MamServer {
  let runtime: MamRuntime | undefined
  let listener: ReturnType<MamRuntime['callback']> | undefined
  let starting: Promise<MamRuntime> | undefined
  let closed = false

  const handler: NodeHandler = (req, res) => {
    if (listener) return void listener(req, res)
    unavailable(res, closed ? 'mamkit has stopped' : 'mamkit is starting')
  }

  return {
    handler,
    mount(prefix, fallback) {
      return (req, res, next) => {
        const rest = stripPrefix(prefix, req.url)
        if (rest === undefined) {
          if (next) return next()
          if (fallback) return fallback(req, res)
          res.writeHead(404).end()
          return
        }
        req.url = rest
        handler(req, res)
      }
    },
    koa(prefix) {
      return async (ctx, next) => {
        const rest = stripPrefix(prefix, ctx.req.url)
        if (rest === undefined) return next()
        // mamkit answers on the raw request and response; Koa must not touch them afterwards
        ctx.respond = false
        ctx.req.url = rest
        await new Promise<void>((resolve) => {
          ctx.res.once('close', resolve)
          handler(ctx.req, ctx.res)
        })
      }
    },
    start() {
      closed = false
      starting ??= MamRuntime.create({
        ...options,
        plugins: [...(options.plugins ?? builtinPlugins), ...(options.extraPlugins ?? [])],
      }).then(
        (r) => {
          runtime = r
          listener = r.callback()
          return r
        },
        (err) => {
          starting = undefined // a later start() may try again
          throw err
        },
      )
      return starting
    },
    async close() {
      closed = true
      listener = undefined
      await (starting ?? Promise.resolve()).catch(() => {})
      // start() may have finished while we waited: keep requests away from the closing runtime
      listener = undefined
      const r = runtime
      runtime = undefined
      starting = undefined
      await r?.close()
    },
    get runtime() {
      return runtime
    },
  }
}

export { builtinPlugins }
export type { MamRuntime }
