import type Koa from 'koa'
import type { MamConfig } from '../config.js'
import type { FeatureService } from '../system/features.js'
import type { CompiledRoute } from '../plugin/loader.js'
import { MamError } from '../errors.js'
import { validate } from './validation.js'
import { RESERVED_PARAMS, mergeInput, parseQuery, qsOptions } from './params.js'
import { checkAccess } from './access.js'
import { JSON_TYPES, hasBody, type BodyReader } from './body.js'
import type { CredentialResolver } from './credentials.js'
import { ROUTER_METHODS, type RouteTable } from './router.js'
import { unwrapNames, wrapParams, wrapSpecOf, type WrapSpec } from './wrap.js'
import type { MamContext } from './context.js'
import { hasAnswer, setAnswer } from './respond.js'

/** a route's whole handling after dispatch; undefined when it answered without waiting for anything */
export type RouteHandler = (ctx: MamContext) => Promise<void> | undefined

/** what the log line and the router leave on the context */
export interface Routed {
  _matchedRoute?: string
}

export interface DispatchDeps {
  features: FeatureService
  config: MamConfig
  /** in the order they are asked: the core's first, then the plugins' */
  credentials: readonly CredentialResolver[]
  readBody: BodyReader
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'

/**
 * One route's request path after it was found (ARCHITECTURE.md §4): module switched on? → body →
 * credentials (401) → access (403) → parameters (422) → handler. Each stage runs synchronously
 * unless it has to wait (a body, a credential not in a cache, an async handler): with MikroORM's
 * AsyncLocalStorage in use every promise costs a hook.
 */
export function routeHandler(route: CompiledRoute, deps: DispatchDeps): RouteHandler {
  const { features, credentials, readBody } = deps
  const queryOptions = qsOptions(deps.config.limits)
  const wrap = route.wrap ? (wrapSpecOf(route.input, route.wrap) as WrapSpec) : undefined

  const withBody = async (ctx: MamContext) => authenticated(ctx, await readBody(ctx, route))

  /** the first resolver that finds a credential decides: from its cache without a promise, else from its store */
  const authenticated = (ctx: MamContext, body: unknown): Promise<void> | undefined => {
    const query = parseQuery(ctx.querystring, queryOptions)
    for (let i = 0; i < credentials.length; i++) {
      const resolver = credentials[i]
      const raw = resolver.extract(ctx, query, body)
      if (raw === undefined) continue
      const cached = resolver.cached?.(raw, ctx)
      if (cached === undefined)
        return resolver.resolve(raw, ctx).then((user) => {
          ctx.user = user ?? undefined
          return answer(ctx, true, query, body)
        })
      ctx.user = cached
      return answer(ctx, true, query, body)
    }
    return answer(ctx, ctx.req.headers.authorization !== undefined, query, body)
  }

  const answer = (ctx: MamContext, credentialSent: boolean, query: Record<string, unknown>, body: unknown): Promise<void> | undefined => {
    checkAccess(route, ctx.user, credentialSent)
    // the router's own object, fresh per request: validated (coerced) in place
    if (route.compiledParams) validate(route.compiledParams, ctx.params, false)
    const input = mergeInput(query, body, ctx.params, route.bodyKey, route.input as { properties?: Record<string, unknown> } | undefined)
    // a credential in the query string (?auth_token=) does not make a JSON body's values strings
    ctx.typedInput = ctx.req.headers['content-type'] !== undefined && Boolean(ctx.is(JSON_TYPES)) && Object.keys(query).every((k) => RESERVED_PARAMS.includes(k))
    if (!wrap || !wrapParams(input, wrap)) return run(ctx, input)
    try {
      return run(ctx, input)?.catch((err) => {
        throw unwrapNames(err, wrap)
      })
    } catch (err) {
      throw unwrapNames(err, wrap)
    }
  }

  const run = (ctx: MamContext, input: Record<string, unknown>): Promise<void> | undefined => {
    if (route.compiledInput) validate(route.compiledInput, input, ctx.typedInput)
    ctx.input = input
    const result = route.handler(ctx)
    if (isThenable(result))
      return Promise.resolve(result).then((value) => {
        if (value !== undefined) setAnswer(ctx as unknown as Koa.Context, value)
      })
    if (result !== undefined) setAnswer(ctx as unknown as Koa.Context, result)
    return undefined
  }

  return (ctx) => {
    if (!features.isActive(route.plugin))
      throw new MamError('module_inactive', `The module "${route.plugin}" is not active; an administrator can switch it on with PUT /api/v1/settings/activate_module`)
    return hasBody(ctx.req) ? withBody(ctx) : authenticated(ctx, undefined)
  }
}

/** finds the route of the request and runs it; a miss answers 404, 405 or 501 */
export function dispatch(ctx: MamContext, routes: RouteTable<RouteHandler>, pathname: string): Promise<void> | undefined {
  const match = routes.find(ctx.method, pathname)
  if (!match) return routeMiss(ctx, routes, pathname)
  ;(ctx as Routed)._matchedRoute = match.pattern
  ctx.params = match.params
  return match.value(ctx)
}

/** no route for this method: unknown method (501), known path with other methods (405; OPTIONS: 200 with Allow), unknown path (404) */
function routeMiss(ctx: MamContext, routes: RouteTable<RouteHandler>, pathname: string): undefined {
  const method = ctx.method
  const allowed = routes.allowed(pathname).join(', ')
  if (!ROUTER_METHODS.has(method)) {
    ctx.set('Allow', allowed)
    throw new MamError('not_implemented', `The method ${method} is not supported`)
  }
  if (!allowed) throw new MamError('not_found', `No route for ${method} ${pathname}`)
  ctx.set('Allow', allowed)
  if (method === 'OPTIONS') {
    ctx.status = 200
    ctx.body = ''
    return undefined
  }
  throw new MamError('method_not_allowed', `${method} ${pathname} is not allowed; allowed: ${allowed}`)
}

/** a route that left no body: as if no route had answered */
export function noAnswer(ctx: Koa.Context): void {
  if (hasAnswer(ctx)) return
  const where = `${ctx.method} ${ctx.path}`
  if (ctx.status === 404) throw new MamError('not_found', `No route for ${where}`)
  if (ctx.status === 405) throw new MamError('method_not_allowed', `${where} is not allowed; allowed: ${ctx.response.get('Allow')}`)
  if (ctx.status === 501) throw new MamError('not_implemented', `The method ${ctx.method} is not supported`)
}
