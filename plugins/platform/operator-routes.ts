import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'
import { Type } from 'typebox'
import { coreServices, openApiDocument, MamError, forbidden, notFound, OneOf, type RegisterApi, type MamContext } from '../../core/index.js'
import { createHash, timingSafeEqual } from 'node:crypto'
import { platformServices } from './refs.js'

const require = createRequire(import.meta.url)
/** the package whose files the docs page serves (an optional dependency) */
const SWAGGER_UI_PACKAGE = 'swagger-ui-dist/package.json'
/** the docs page's files, served from the installed swagger-ui-dist package (no network needed) */
const DOCS_FILES: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

const Alive = Type.Object({ status: Type.Literal('ok') })
const DocsFileParams = Type.Object({ file: Type.String({ maxLength: 100 }) })
const Check = Type.Object({ ok: Type.Boolean(), detail: Type.Optional(Type.String()) })
const Readiness = Type.Object({ status: OneOf(['ready', 'not_ready']), checks: Type.Record(Type.String(), Check) })

/**
 * Operator endpoints: GET /healthz (the process answers), GET /readyz (database, migrations, job
 * runner, storages), GET /openapi.json (generated from the route table) and the docs page /docs.
 * Public, and they say nothing about paths, addresses or secrets.
 */
export function registerOperatorRoutes(api: RegisterApi) {
  const { routes } = api
  const health = api.use(coreServices.health)
  const routeTable = api.use(coreServices.routes)
  const plugins = api.use(coreServices.plugins)
  const metrics = api.use(platformServices.metrics)
  let document: string | undefined
  const files = new Map<string, Buffer>()

  routes.get('/healthz', { access: 'public', summary: 'liveness: the process answers', response: Alive }, (ctx) => {
    ctx.set('Cache-Control', 'no-store')
    return { status: 'ok' }
  })

  routes.get(
    '/readyz',
    {
      access: 'public',
      summary: 'readiness: database reachable, migrations applied, job runner alive, storages mounted (503 otherwise)',
      response: Readiness,
    },
    async (ctx) => {
      const { ready, checks } = await health().ready()
      ctx.set('Cache-Control', 'no-store')
      ctx.status = ready ? 200 : 503
      if (!ready) ctx.set('Retry-After', '5')
      return { status: ready ? 'ready' : 'not_ready', checks }
    },
  )

  routes.get('/metrics', { access: 'public', summary: 'Prometheus metrics; from this machine, with the metrics token, or for administrators (settings platform.metrics)' }, async (ctx) => {
    if (!metricsAllowed(ctx, api.settings().metrics)) throw forbidden('Metrics are served to this machine, to the metrics token (Authorization: Bearer) and to administrators (settings platform.metrics)')
    ctx.type = metrics().registry.contentType
    ctx.set('Cache-Control', 'no-store')
    ctx.body = await metrics().text()
  })

  // GET /api/v1/openapi.json: the `.json` suffix is stripped before routing, like on every path
  routes.get('/openapi', { access: 'public', summary: 'the OpenAPI 3.1 description of this API, generated from the route table' }, (ctx) => {
    // the route table is fixed once the plugins are loaded: generated and serialised once (~10 ms), sent as it is
    document ??= JSON.stringify(openApiDocument(routeTable(), plugins()))
    ctx.type = 'application/json'
    ctx.body = document
  })

  routes.get('/docs', { access: 'public', summary: 'the API documentation page (Swagger UI, served by this server)' }, (ctx) => {
    // relative links: the page works below any prefix the server is mounted at
    const own = ctx.originalUrl.split('?')[0]
    const base = own.endsWith('/') ? '' : 'docs/'
    const spec = own.endsWith('/') ? '../openapi.json' : 'openapi.json'
    ctx.type = 'html'
    ctx.set('Cache-Control', 'no-cache')
    ctx.body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mamkit API</title>
<link rel="stylesheet" href="${base}swagger-ui.css"><link rel="icon" href="${base}favicon-32x32.png"></head>
<body><div id="docs"></div>
<script src="${base}swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: ${JSON.stringify(spec)}, dom_id: '#docs', deepLinking: true })</script>
</body></html>`
  })

  routes.get('/docs/:file', { access: 'public', params: DocsFileParams, summary: 'a file of the docs page' }, async (ctx) => {
    const type = DOCS_FILES[ctx.params.file]
    if (!type) throw notFound('docs file', ctx.params.file)
    let body = files.get(ctx.params.file)
    if (!body) {
      try {
        body = await readFile(path.join(path.dirname(require.resolve(SWAGGER_UI_PACKAGE)), ctx.params.file))
      } catch {
        throw new MamError('service_unavailable', 'The docs page needs the swagger-ui-dist package, which is not installed')
      }
      files.set(ctx.params.file, body)
    }
    ctx.type = type
    ctx.set('Cache-Control', 'public, max-age=86400')
    ctx.body = body
  })
}

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1'])
const digest = (s: string) => createHash('sha256').update(s).digest()

/** the connection's own address (never X-Forwarded-For: a proxy in front would make everyone local) */
function metricsAllowed(ctx: MamContext, setting: { loopback: boolean; token: string }): boolean {
  if (ctx.user?.isAdmin) return true
  if (setting.loopback && LOOPBACK.has(ctx.req.socket.remoteAddress ?? '')) return true
  const sent = /^Bearer\s+(.+)$/i.exec(ctx.get('authorization'))?.[1]
  return setting.token !== '' && sent !== undefined && timingSafeEqual(digest(sent), digest(setting.token))
}
