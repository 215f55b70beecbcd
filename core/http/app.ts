import { randomUUID } from 'node:crypto'
import { createWriteStream, type WriteStream } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import { once } from 'node:events'
import path from 'node:path'
import Koa from 'koa'
import Router from '@koa/router'
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
const JSON_TYPES = ['json', '+json']
const OVERRIDABLE: Record<string, string> = { DELETE: 'DELETE', DESTROY: 'DELETE', PUT: 'PUT', PATCH: 'PATCH' }

/**
 * The request path of ARCHITECTURE.md §4: request id and problem bodies around everything, then per
 * route: module switched on? → body → credentials (401) → access (403) → parameters (422) → handler.
 * Credentials are checked before parameters so that nobody learns a route's rules without signing in.
 */
export function buildHttpApp(deps: HttpDeps): Koa {
  const app = new Koa()
  app.silent = true
  extendContext(app, deps.container)
  const router = new Router({ prefix: API_PREFIX })
  const parsers = bodyParsers(deps.config)
  for (const route of deps.routes) router.register(route.path, [route.method], routeHandler(route, deps, parsers) as any)
  app.use(entry(deps))
  app.use(router.routes())
  // not thrown: the router sets Allow only when it answers itself; `entry` turns the status into a problem
  app.use(router.allowedMethods())
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
    resolve(this: MamContext, name: string) {
      return this.scope.resolve(name)
    },
    requireUser(this: MamContext) {
      if (!this.user) throw unauthenticated()
      return this.user
    },
  })
}

function entry(deps: HttpDeps): Koa.Middleware {
  const { log } = deps
  return async (ctx, next) => {
    const started = performance.now()
    const incoming = ctx.get('x-request-id')
    const requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID()
    const c = ctx as unknown as MamContext
    c.requestId = requestId
    c.files = []
    ctx.set('X-Request-Id', requestId)
    if (ctx.path.endsWith('.json')) ctx.path = ctx.path.slice(0, -5)
    if (ctx.method === 'POST') {
      // DESTROY cannot pass Node's HTTP parser; clients tunnel it (and others) through POST
      const override = (ctx.get('x-http-method-override') || methodParam(ctx.querystring)).toUpperCase()
      if (OVERRIDABLE[override]) ctx.method = OVERRIDABLE[override]
    }
    try {
      await next()
      if (ctx.body === undefined) routerMiss(ctx)
    } catch (err) {
      sendProblem(ctx, err, requestId, log)
    } finally {
      await removeUploads(c)
      const ms = Math.round((performance.now() - started) * 10) / 10
      // the route pattern, not the path: paths can carry secrets (DELETE /proof_keys/:code_verifier)
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? ctx.path
      log.info({ req_id: requestId, method: ctx.method, route, status: ctx.status, ms, user: c.user?.userId }, 'request')
    }
  }
}

/** no route answered: unknown path (404), known path with another method (405), unknown method (501) */
function routerMiss(ctx: Koa.Context) {
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

const hasBody = (ctx: Koa.Context) => ctx.request.length > 0 || ctx.get('transfer-encoding') !== ''

function routeHandler(route: CompiledRoute, deps: HttpDeps, parsers: BodyParsers) {
  const { features, auth, config } = deps
  const queryOptions = qsOptions(config.limits)
  const noop = async () => {}
  return async (ctx: MamContext) => {
    if (!features.isActive(route.plugin))
      throw new MamError('module_inactive', `The module "${route.plugin}" is not active; an administrator can switch it on with PUT /api/v1/settings/activate_module`)

    let body: unknown
    if (hasBody(ctx)) {
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
    }
    const query = parseQuery(ctx.querystring, queryOptions)

    const credential = credentialOf(ctx, query, body)
    if (credential) ctx.user = (await auth.authenticate(credential)) ?? undefined
    if (route.access !== 'public') {
      if (!ctx.user) throw unauthenticated(credential ? 'The credentials are invalid, expired or revoked' : undefined)
      if (route.access === 'admin' ? !ctx.user.isAdmin : route.access !== 'authenticated' && !can(ctx.user, route.access))
        throw forbidden(route.access === 'admin' ? 'This action needs administrative privileges' : `This action needs the "${route.access}" capability`)
    }

    const pathParams = { ...ctx.params }
    if (route.compiledParams) validate(route.compiledParams, pathParams, false)
    ctx.params = pathParams
    const input = mergeInput(query, body, pathParams, route.bodyKey)
    // a credential in the query string (?auth_token=) does not make a JSON body's values strings
    ctx.typedInput = Boolean(ctx.is(JSON_TYPES)) && Object.keys(query).every((k) => RESERVED_PARAMS.includes(k))
    if (route.compiledInput) validate(route.compiledInput, input, ctx.typedInput)
    ctx.input = input

    const result = await route.handler(ctx)
    if (result !== undefined) ctx.body = result
  }
}

function credentialOf(ctx: MamContext, query: Record<string, unknown>, body: any): string | undefined {
  const header = ctx.get('authorization')
  if (header) {
    const m = /^Bearer\s+(\S+)$/i.exec(header)
    if (m) return m[1]
  }
  const cookie = ctx.cookies.get('_auth_token')
  if (cookie) return cookie
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
