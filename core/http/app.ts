import Koa from 'koa'
import { Lifetime, type AwilixContainer } from 'awilix'
import type { Logger } from 'pino'
import qs from 'qs'
import { ForeignKeyConstraintViolationException } from '@mikro-orm/core'
import type { MamConfig } from '../config.js'
import type { AuthService } from '../auth/service.js'
import type { FeatureService } from '../system/features.js'
import type { CompiledRoute } from '../plugin/loader.js'
import { unauthenticated } from '../errors.js'
import { sendProblem, toMamError } from './problem.js'
import { RouteTable } from './router.js'
import { requestIdOf } from './request-id.js'
import { bodyReader, hasBody } from './body.js'
import { coreCredentialResolver, type CredentialResolver } from './credentials.js'
import { dispatch, noAnswer, routeHandler, type RouteHandler, type Routed } from './dispatch.js'
import { hasUploads, removeUploads } from './uploads.js'
import { respondJson } from './respond.js'
import type { MamContext } from './context.js'
import type { RequestObservers } from './metrics.js'
import { coreServices } from '../plugin/services.js'

export interface HttpDeps {
  routes: CompiledRoute[]
  container: AwilixContainer
  auth: AuthService
  features: FeatureService
  config: MamConfig
  log: Logger
  /** the plugins' credential resolvers (`RegisterApi.credentials.add`), asked after the core's own */
  credentials?: readonly CredentialResolver[]
  /** told of every answered request (metrics, traffic counting) */
  observers?: RequestObservers
}

export const API_PREFIX = '/api/v1'
const OVERRIDABLE: Record<string, string> = { DELETE: 'DELETE', DESTROY: 'DELETE', PUT: 'PUT', PATCH: 'PATCH' }

/**
 * The request path of ARCHITECTURE.md §4 as one Koa middleware: request id and problem bodies
 * around everything (here), the route found by `router.ts` and run by `dispatch.ts` (module → body
 * → credentials → access → parameters → handler), and the upload clean-up and log line after it.
 * A request that needs nothing asynchronous (no body, cached credentials, a handler that answers
 * at once) runs without an `await`: with MikroORM's AsyncLocalStorage in use every promise costs a hook.
 */
export function buildHttpApp(deps: HttpDeps): Koa {
  // `compose` is a Koa 3 option its type declarations do not list yet
  const app: Koa = new MamApplication({ compose: composeSync } as { env?: string })
  app.silent = true
  extendContext(app, deps.container)
  app.context.observers = deps.observers
  const dispatchDeps = {
    features: deps.features,
    config: deps.config,
    credentials: [coreCredentialResolver(deps.auth), ...(deps.credentials ?? [])],
    readBody: bodyReader(deps.config),
  }
  const routes = new RouteTable<RouteHandler>(API_PREFIX)
  for (const route of deps.routes) routes.add(route.method, route.path, routeHandler(route, dispatchDeps))
  app.use(entry(deps, routes))
  return app
}

/**
 * Koa's Application with one shortcut in `handleRequest`: a request that the path answered at once
 * and wrote itself (`respondJson`: plain JSON, the common case) is done when the middleware
 * returns. Koa would first hang `onFinished(res, onerror)` on the socket and the response (ee-first:
 * four listeners, their closures, removed again at 'finish'), whose only use once the headers are
 * sent is to emit the app's 'error' event for a socket error (Koa's `ctx.onerror` does nothing
 * else then; this app is silent); Node's server handles socket errors itself. Everything else
 * (problems, files, streams, HEAD, a route that waits) takes Koa's own `handleRequest` and `respond`.
 */
class MamApplication extends Koa {
  // not in Koa's type declarations (an internal method that `callback()` calls per request)
  handleRequest(ctx: Koa.ParameterizedContext, fnMiddleware: (ctx: Koa.ParameterizedContext) => Promise<unknown>): Promise<void> {
    const res = ctx.res
    res.statusCode = 404
    const out = fnMiddleware(ctx) as unknown
    if (out === ANSWERED && ctx.respond === false && res.writableEnded) return DONE
    // Koa's own path for the rest; it sets the status to 404 before calling the middleware, which has run already
    const status = res.statusCode
    return (Koa.prototype as unknown as MamApplication).handleRequest.call(this, ctx, () => {
      res.statusCode = status
      return out as Promise<unknown>
    })
  }
}

const DONE: Promise<void> = Promise.resolve()

/**
 * Koa answers after `composed(ctx).then(respond).catch(onerror)`. Its own composition makes that
 * three promises and a microtask per request, and with MikroORM's AsyncLocalStorage on (after the
 * first flush or transaction, in every server) each promise runs an async hook. The request path is
 * one middleware (`entry`) that returns undefined when it answered without waiting: Koa is then
 * handed a settled thenable, and responds at once. A middleware that returns a promise gets Koa's
 * usual chain.
 */
function composeSync(middleware: Koa.Middleware[]): (ctx: Koa.Context) => Promise<unknown> | SettledThenable {
  if (middleware.length !== 1) throw new Error('the request path is one middleware')
  const [only] = middleware
  return (ctx) => {
    try {
      return (only(ctx, noNext) as Promise<unknown> | undefined) ?? ANSWERED
    } catch (err) {
      return failed(err)
    }
  }
}

const noNext = () => Promise.resolve()

/** `then`/`catch` as a fulfilled promise's, run at once (what Koa calls: `.then(respond).catch(onerror)`) */
interface SettledThenable {
  then(onFulfilled?: () => unknown, onRejected?: (err: unknown) => unknown): SettledThenable
  catch(onRejected: (err: unknown) => unknown): SettledThenable
}

const ANSWERED: SettledThenable = {
  then: (onFulfilled) => (onFulfilled ? settledBy(onFulfilled) : ANSWERED),
  catch: () => ANSWERED,
}

const failed = (err: unknown): SettledThenable => {
  const rejected: SettledThenable = {
    then: (_, onRejected) => (onRejected ? settledBy(() => onRejected(err)) : rejected),
    catch: (onRejected) => settledBy(() => onRejected(err)),
  }
  return rejected
}

const settledBy = (fn: () => unknown): SettledThenable => {
  try {
    fn()
    return ANSWERED
  } catch (err) {
    return failed(err)
  }
}

function extendContext(app: Koa, container: AwilixContainer) {
  Object.defineProperties(app.context, {
    scope: {
      get(this: any) {
        return (this._scope ??= container.createScope())
      },
    },
    em: {
      get(this: any) {
        return this.scope.resolve(coreServices.em.id)
      },
    },
    app_client: {
      get(this: any) {
        return (this._appClient ??= appClient(this))
      },
    },
  })
  // singletons and values are the root container's in a scope too: resolved from it, a request that
  // needs nothing request-scoped (a GET reading plain rows, no `em`) makes no scope (~2 µs and a Proxy)
  const inRoot = (key: string) => {
    const registration = container.getRegistration(key) as { lifetime?: string } | null
    return registration !== null && (registration.lifetime === undefined || registration.lifetime === Lifetime.SINGLETON)
  }
  Object.assign(app.context, {
    resolve(this: MamContext & { _scope?: AwilixContainer }, name: string | { id: string }) {
      const key = typeof name === 'string' ? name : name.id
      if (this._scope === undefined && inRoot(key)) return container.resolve(key)
      return this.scope.resolve(key)
    },
    requireUser(this: MamContext) {
      if (!this.user) throw unauthenticated()
      return this.user
    },
  })
}

function entry(deps: HttpDeps, routes: RouteTable<RouteHandler>): Koa.Middleware {
  const { log, auth, observers } = deps
  return (ctx) => {
    // timed when the log or an observer wants it
    const logged = log.isLevelEnabled('info') || observers?.any === true
    const started = logged ? performance.now() : 0
    const c = ctx as unknown as MamContext
    const requestId = requestIdOf(ctx.req)
    c.requestId = requestId
    c.files = []
    ctx.set('X-Request-Id', requestId)
    let pathname = ctx.path
    if (pathname.endsWith('.json')) ctx.path = pathname = pathname.slice(0, -5)
    if (ctx.method === 'POST') {
      // DESTROY cannot pass Node's HTTP parser; clients tunnel it (and others) through POST
      const override = (ctx.get('x-http-method-override') || methodParam(ctx.querystring)).toUpperCase()
      if (OVERRIDABLE[override]) ctx.method = OVERRIDABLE[override]
    }
    let pending: Promise<void> | undefined
    try {
      pending = dispatch(c, routes, pathname)
      if (!pending) noAnswer(ctx)
    } catch (err) {
      if (mayBeGonePrincipal(c, err)) pending = Promise.reject(err)
      else sendProblem(ctx, err, requestId, log)
    }
    if (pending) return settle(c, pending, auth, log, logged, started)
    const cleaned = finish(c, log, logged, started)
    if (cleaned) return cleaned.then(() => respondJson(ctx))
    respondJson(ctx)
    return undefined
  }
}

/** the rest of `entry` for a route that answers later */
async function settle(ctx: MamContext, pending: Promise<void>, auth: AuthService, log: Logger, logged: boolean, started: number) {
  try {
    await pending
    noAnswer(ctx as unknown as Koa.Context)
  } catch (err) {
    sendProblem(ctx as unknown as Koa.Context, await principalProblem(ctx, err, auth), ctx.requestId, log)
  } finally {
    await finish(ctx, log, logged, started)
  }
  respondJson(ctx as unknown as Koa.Context)
}

/**
 * A request that failed inside its handler may have run on a cached principal whose user, key or
 * token was deleted meanwhile (by another process, before its notice arrived): the handler then
 * finds no user (a 500) or cannot refer to it (a foreign key). Such a request is a 401, not a server error.
 */
function mayBeGonePrincipal(ctx: MamContext, err: unknown): boolean {
  return ctx.user !== undefined && (err instanceof ForeignKeyConstraintViolationException || toMamError(err).code === 'internal')
}

async function principalProblem(ctx: MamContext, err: unknown, auth: AuthService): Promise<unknown> {
  if (!mayBeGonePrincipal(ctx, err)) return err
  const gone = await auth.isGone(ctx.user!).catch(() => false)
  return gone ? unauthenticated('The signed-in user or the credential no longer exists') : err
}

/** removes what an upload left (only then a promise), and logs the request; the answer is sent after this (`respondJson`, or Koa) */
function finish(ctx: MamContext, log: Logger, logged: boolean, started: number): Promise<void> | undefined {
  // an error answered before the body was read: the rest of it is not waited for
  if (ctx.status >= 400 && hasBody(ctx.req) && !ctx.req.complete) ctx.set('Connection', 'close')
  if (hasUploads(ctx)) return removeUploads(ctx).then(() => logRequest(ctx, log, logged, started))
  logRequest(ctx, log, logged, started)
  return undefined
}

function logRequest(ctx: MamContext, log: Logger, logged: boolean, started: number) {
  if (!logged) return
  const ms = Math.round((performance.now() - started) * 10) / 10
  // the route pattern, not the path: paths can carry secrets (DELETE /proof_keys/:code_verifier)
  const matched = (ctx as Routed)._matchedRoute
  ;(ctx as { observers?: RequestObservers }).observers?.notify({ method: ctx.method, route: matched, status: ctx.status, ms, ctx })
  const route = matched ?? ctx.path
  if (log.isLevelEnabled('info')) log.info({ req_id: ctx.requestId, method: ctx.method, route, status: ctx.status, ms, user: ctx.user?.userId }, 'request')
}

/** the desktop application's headers (spec §5); header values are capped, never trusted as paths */
function appClient(ctx: Koa.Context) {
  const edit = ctx.get('x-app-edit').slice(0, 200)
  const uidGids = ctx.get('x-app-uidgids').slice(0, 200)
  return { isApp: ctx.get('x-app-client') !== '', edit: edit || undefined, uidGids: uidGids || undefined }
}

const methodParam = (querystring: string) => (querystring.includes('_method=') ? String(qs.parse(querystring)._method ?? '') : '')
