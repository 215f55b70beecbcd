import { randomUUID } from 'node:crypto'
import { createWriteStream, type WriteStream } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import { once } from 'node:events'
import type { IncomingMessage } from 'node:http'
import path from 'node:path'
import Koa from 'koa'
import { koaBody } from 'koa-body'
import type { AwilixContainer } from 'awilix'
import type { Logger } from 'pino'
import qs from 'qs'
import type { MamConfig } from '../config.js'
import type { AuthService } from '../auth/service.js'
import { can } from '../auth/principal.js'
import type { FeatureService } from '../system/features.js'
import type { CompiledRoute } from '../plugin/loader.js'
import { MamError, forbidden, unauthenticated } from '../errors.js'
import { validate } from './validation.js'
import { RESERVED_PARAMS, limitError, mergeInput, parseQuery, qsOptions } from './params.js'
import { sendProblem } from './problem.js'
import { ROUTER_METHODS, RouteTree } from './router.js'
import type { MamContext, UploadedFile } from './context.js'

export interface HttpDeps {
  routes: CompiledRoute[]
  container: AwilixContainer
  auth: AuthService
  features: FeatureService
  config: MamConfig
  log: Logger
}

export const API_PREFIX = '/api/v1'
const REQUEST_ID = /^[\w.:-]{1,100}$/
const BEARER = /^Bearer\s+(\S+)$/i
const JSON_TYPES = ['json', '+json']
const OVERRIDABLE: Record<string, string> = { DELETE: 'DELETE', DESTROY: 'DELETE', PUT: 'PUT', PATCH: 'PATCH' }

/** a route's whole handling after dispatch; undefined when it answered without waiting for anything */
type RouteHandler = (ctx: MamContext) => Promise<void> | undefined

/** what the log line and the router leave on the context */
interface Routed {
  _matchedRoute?: string
}

/**
 * The request path of ARCHITECTURE.md §4: request id and problem bodies around everything, then per
 * route: module switched on? → body → credentials (401) → access (403) → parameters (422) → handler.
 * Credentials are checked before parameters so that nobody learns a route's rules without signing in.
 *
 * One Koa middleware does it all. Routes are found in a tree over path segments (`router.ts`), and a
 * request that needs nothing asynchronous (no body, cached credentials, a handler that answers at
 * once) runs without an `await`: with MikroORM's AsyncLocalStorage in use every promise costs a hook.
 */
export function buildHttpApp(deps: HttpDeps): Koa {
  const app = new Koa()
  app.silent = true
  extendContext(app, deps.container)
  const parsers = bodyParsers(deps.config)
  const routes = new RouteTree<RouteHandler>(API_PREFIX)
  for (const route of deps.routes) routes.add(route.method, route.path, routeHandler(route, deps, parsers))
  app.use(entry(deps, routes))
  return app
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
        return this.scope.resolve('em')
      },
    },
    app_client: {
      get(this: any) {
        return (this._appClient ??= appClient(this))
      },
    },
  })
  Object.assign(app.context, {
    resolve(this: MamContext, name: string | { id: string }) {
      return this.scope.resolve(typeof name === 'string' ? name : name.id)
    },
    requireUser(this: MamContext) {
      if (!this.user) throw unauthenticated()
      return this.user
    },
  })
}

/**
 * Request ids: a random UUID per process whose last 12 hex digits count the requests, so an id
 * still has the UUID's form and is unique in this process (and, by the random part, across
 * processes) without drawing random bytes per request.
 */
let requestIdPrefix = randomUUID().slice(0, 24)
let requestCount = 0
export function nextRequestId(): string {
  if (requestCount > 0xffff_ffff_ffff) {
    requestIdPrefix = randomUUID().slice(0, 24)
    requestCount = 0
  }
  return requestIdPrefix + (requestCount++).toString(16).padStart(12, '0')
}

function entry(deps: HttpDeps, routes: RouteTree<RouteHandler>): Koa.Middleware {
  const { log } = deps
  return (ctx) => {
    const logged = log.isLevelEnabled('info')
    const started = logged ? performance.now() : 0
    const c = ctx as unknown as MamContext
    const incoming = ctx.req.headers['x-request-id']
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : nextRequestId()
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
      sendProblem(ctx, err, requestId, log)
    }
    if (pending) return settle(c, pending, log, logged, started)
    return finish(c, log, logged, started)
  }
}

/** the rest of `entry` for a route that answers later */
async function settle(ctx: MamContext, pending: Promise<void>, log: Logger, logged: boolean, started: number) {
  try {
    await pending
    noAnswer(ctx as unknown as Koa.Context)
  } catch (err) {
    sendProblem(ctx as unknown as Koa.Context, err, ctx.requestId, log)
  } finally {
    await finish(ctx, log, logged, started)
  }
}

/** removes what an upload left (only then a promise), and logs the request */
function finish(ctx: MamContext, log: Logger, logged: boolean, started: number): Promise<void> | undefined {
  if (ctx.files.length > 0 || writingUploads.has(ctx)) return removeUploads(ctx).then(() => logRequest(ctx, log, logged, started))
  logRequest(ctx, log, logged, started)
  return undefined
}

function logRequest(ctx: MamContext, log: Logger, logged: boolean, started: number) {
  if (!logged) return
  const ms = Math.round((performance.now() - started) * 10) / 10
  // the route pattern, not the path: paths can carry secrets (DELETE /proof_keys/:code_verifier)
  const route = (ctx as Routed)._matchedRoute ?? ctx.path
  log.info({ req_id: ctx.requestId, method: ctx.method, route, status: ctx.status, ms, user: ctx.user?.userId }, 'request')
}

function dispatch(ctx: MamContext, routes: RouteTree<RouteHandler>, pathname: string): Promise<void> | undefined {
  const match = routes.find(ctx.method, pathname)
  if (!match) return routeMiss(ctx, routes, pathname)
  ;(ctx as Routed)._matchedRoute = match.pattern
  ctx.params = match.params
  return match.value(ctx)
}

/** no route for this method: unknown method (501), known path with other methods (405; OPTIONS: 200 with Allow), unknown path (404) */
function routeMiss(ctx: MamContext, routes: RouteTree<RouteHandler>, pathname: string): undefined {
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
function noAnswer(ctx: Koa.Context) {
  if (ctx.body !== undefined) return
  const where = `${ctx.method} ${ctx.path}`
  if (ctx.status === 404) throw new MamError('not_found', `No route for ${where}`)
  if (ctx.status === 405) throw new MamError('method_not_allowed', `${where} is not allowed; allowed: ${ctx.response.get('Allow')}`)
  if (ctx.status === 501) throw new MamError('not_implemented', `The method ${ctx.method} is not supported`)
}

/** the desktop application's headers (spec §5); header values are capped, never trusted as paths */
function appClient(ctx: Koa.Context) {
  const edit = ctx.get('x-app-edit').slice(0, 200)
  const uidGids = ctx.get('x-app-uidgids').slice(0, 200)
  return { isApp: ctx.get('x-app-client') !== '', edit: edit || undefined, uidGids: uidGids || undefined }
}

const methodParam = (querystring: string) => (querystring.includes('_method=') ? String(qs.parse(querystring)._method ?? '') : '')

interface BodyParsers {
  plain: Koa.Middleware
  /** built per request: the temp files it writes are tracked in `writing` */
  multipart(route: CompiledRoute, writing: WriteStream[]): Koa.Middleware
}

function bodyParsers(config: MamConfig): BodyParsers {
  const common = {
    json: true,
    jsonTypes: JSON_TYPES,
    urlencoded: true,
    text: false,
    // clients send JSON scalars (a path as a JSON string) and JSON bodies on GET and DELETE
    jsonStrict: false,
    jsonLimit: config.limits.jsonBytes,
    formLimit: config.limits.formBytes,
    parsedMethods: ['POST', 'PUT', 'PATCH', 'GET', 'DELETE'] as any,
    queryString: qsOptions(config.limits),
    onError(err: Error) {
      throw err instanceof RangeError ? limitError(err) : err
    },
  }
  const uploadDir = path.join(config.dataDir, 'tmp', 'uploads')
  return {
    plain: koaBody({ ...common, multipart: false }),
    multipart: (route, writing) =>
      koaBody({
        ...common,
        multipart: true,
        formidable: {
          uploadDir,
          maxFileSize: route.multipart!.maxFileSize,
          maxTotalFileSize: route.multipart!.maxFileSize * (route.multipart!.maxFiles ?? 1),
          maxFiles: route.multipart!.maxFiles ?? 1,
          // text fields are held in memory: the form limit, not formidable's 20 MB
          maxFieldsSize: config.limits.formBytes,
          keepExtensions: false,
          // an empty file is a legitimate upload
          allowEmptyFiles: true,
          minFileSize: 0,
          createDirsFromUploads: false,
          filename: () => randomUUID(),
          // formidable opens a file it has already refused (maxFiles) and unlinks refused ones before they are
          // open; owning the streams lets the request close and remove every one of them (`removeUploads`)
          fileWriteStreamHandler: (file: { filepath: string }) => {
            const stream = createWriteStream(file.filepath, { flags: 'wx' })
            writing.push(stream)
            return stream
          },
        } as any,
      }),
  }
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  if (length !== undefined && ~~length > 0) return true
  const te = req.headers['transfer-encoding']
  return te !== undefined && te !== ''
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'

function routeHandler(route: CompiledRoute, deps: HttpDeps, parsers: BodyParsers): RouteHandler {
  const { features, auth, config } = deps
  const queryOptions = qsOptions(config.limits)
  const noop = async () => {}

  const withBody = async (ctx: MamContext) => {
    let body: unknown
    if (ctx.is('multipart')) {
      if (!route.multipart) throw new MamError('unsupported_media_type', 'This route does not take multipart uploads')
      await ensureDir(path.join(config.dataDir, 'tmp', 'uploads'))
      await parsers.multipart(route, uploadStreams(ctx))(ctx as any, noop)
      ctx.files = collectFiles((ctx.request as any).files)
      body = renest((ctx.request as any).body, queryOptions)
    } else if (ctx.is([...JSON_TYPES, 'urlencoded'])) {
      await parsers.plain(ctx as any, noop)
      body = (ctx.request as any).body
    } else if (ctx.request.type !== '' || ctx.request.length > 0) {
      // a body nobody would read (text/plain from a fetch without a content type): say so instead of
      // ignoring it; a chunked body without any type may well be empty and is left alone
      throw new MamError('unsupported_media_type', 'Send the body as JSON, a form (urlencoded) or multipart/form-data')
    }
    return authenticated(ctx, body)
  }

  /** credentials: from the cache without a promise, else from the database */
  const authenticated = (ctx: MamContext, body: unknown): Promise<void> | undefined => {
    const query = parseQuery(ctx.querystring, queryOptions)
    const credential = credentialOf(ctx, query, body)
    if (credential) {
      const cached = auth.authenticateCached(credential)
      if (cached === undefined)
        return auth.authenticate(credential).then((user) => {
          ctx.user = user ?? undefined
          return answer(ctx, credential, query, body)
        })
      ctx.user = cached
    }
    return answer(ctx, credential, query, body)
  }

  const answer = (ctx: MamContext, credential: string | undefined, query: Record<string, unknown>, body: unknown): Promise<void> | undefined => {
    if (route.access !== 'public') {
      if (!ctx.user) throw unauthenticated(credential ? 'The credentials are invalid, expired or revoked' : undefined)
      if (route.access === 'admin' ? !ctx.user.isAdmin : route.access !== 'authenticated' && !can(ctx.user, route.access))
        throw forbidden(route.access === 'admin' ? 'This action needs administrative privileges' : `This action needs the "${route.access}" capability`)
    }

    // the router's own object, fresh per request: validated (coerced) in place
    const pathParams = ctx.params
    if (route.compiledParams) validate(route.compiledParams, pathParams, false)
    const input = mergeInput(query, body, pathParams, route.bodyKey)
    // a credential in the query string (?auth_token=) does not make a JSON body's values strings
    ctx.typedInput = ctx.req.headers['content-type'] !== undefined && Boolean(ctx.is(JSON_TYPES)) && Object.keys(query).every((k) => RESERVED_PARAMS.includes(k))
    if (route.compiledInput) validate(route.compiledInput, input, ctx.typedInput)
    ctx.input = input

    const result = route.handler(ctx)
    if (isThenable(result))
      return Promise.resolve(result).then((value) => {
        if (value !== undefined) ctx.body = value
      })
    if (result !== undefined) ctx.body = result
    return undefined
  }

  return (ctx) => {
    if (!features.isActive(route.plugin))
      throw new MamError('module_inactive', `The module "${route.plugin}" is not active; an administrator can switch it on with PUT /api/v1/settings/activate_module`)
    return hasBody(ctx.req) ? withBody(ctx) : authenticated(ctx, undefined)
  }
}

function credentialOf(ctx: MamContext, query: Record<string, unknown>, body: any): string | undefined {
  const headers = ctx.req.headers
  if (headers.authorization) {
    const m = BEARER.exec(headers.authorization)
    if (m) return m[1]
  }
  if (headers.cookie) {
    const cookie = ctx.cookies.get('_auth_token')
    if (cookie) return cookie
  }
  const param = query.auth_token ?? (body && typeof body === 'object' ? body.auth_token : undefined)
  return typeof param === 'string' ? param : undefined
}

function collectFiles(files: Record<string, any> | undefined): UploadedFile[] {
  const out: UploadedFile[] = []
  for (const [field, value] of Object.entries(files ?? {})) {
    for (const f of Array.isArray(value) ? value : [value]) {
      out.push({ field, originalName: f.originalFilename ?? 'upload', tempPath: f.filepath, size: f.size, mimeType: f.mimetype ?? null })
    }
  }
  return out
}

/** multipart fields arrive flat (`template[name]`); nest them like a form body */
function renest(fields: Record<string, unknown> | undefined, options: qs.IParseOptions) {
  if (!fields) return {}
  const flat = new URLSearchParams()
  for (const [k, v] of Object.entries(fields)) for (const item of Array.isArray(v) ? v : [v]) flat.append(k, String(item))
  return parseQuery(flat.toString(), options)
}

const writingUploads = new WeakMap<object, WriteStream[]>()

function uploadStreams(ctx: MamContext): WriteStream[] {
  const streams: WriteStream[] = []
  writingUploads.set(ctx, streams)
  return streams
}

/** Temp files of an upload: closed (a refused upload leaves streams open) and removed once the request ends. */
async function removeUploads(ctx: MamContext) {
  const streams = writingUploads.get(ctx) ?? []
  await Promise.all(streams.filter((s) => !s.closed).map((s) => closeStream(s)))
  const paths = new Set([...streams.map((s) => String(s.path)), ...ctx.files.map((f) => f.tempPath)])
  await Promise.all([...paths].map((p) => rm(p, { force: true })))
}

function closeStream(stream: WriteStream): Promise<unknown> {
  const closed = once(stream, 'close').catch(() => {})
  stream.destroy()
  return closed
}

const madeDirs = new Set<string>()
async function ensureDir(dir: string) {
  if (madeDirs.has(dir)) return
  await mkdir(dir, { recursive: true })
  madeDirs.add(dir)
}
