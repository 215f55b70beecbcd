import t from 'tap'
import { rm } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { onEachDatabase, assertProblem } from '../../../core/testing/index.js'

onEachDatabase(t, 'healthz and readyz answer without credentials and without secrets', async (t, s) => {
  const live = await s.request('GET', '/healthz')
  t.equal(live.status, 200)
  t.same(live.body, { status: 'ok' })
  const ready = await s.request('GET', '/readyz')
  t.equal(ready.status, 200, ready.text)
  t.same(ready.body.status, 'ready')
  t.same(Object.keys(ready.body.checks).sort(), ['database', 'jobs', 'migrations', 'storages'])
  t.ok(Object.values(ready.body.checks).every((c: any) => c.ok === true))
  t.notOk(ready.text.includes(s.dataDir), 'no paths')

  // a storage whose root is gone (an unmounted share) makes the process not ready
  const storages = s.runtime.container.resolve<any>('core.storages')
  const root = storages.get('default').root
  await rm(root, { recursive: true, force: true })
  const notReady = await s.request('GET', '/readyz')
  t.equal(notReady.status, 503)
  t.equal(notReady.headers.get('retry-after'), '5')
  t.match(notReady.body, { status: 'not_ready', checks: { storages: { ok: false, detail: 'not mounted: default' }, database: { ok: true } } })
  t.notOk(notReady.text.includes(root), 'the missing root is named, not its path')

  // a migration not yet applied (a newer version started against an old database)
  const forgotten = await s.runtime.db.knex('mamkit_migrations').where({ plugin: 'platform' }).delete()
  const pending = await s.request('GET', '/readyz')
  t.match(pending.body.checks.migrations, { ok: false, detail: `${forgotten} pending (run mamkit migrate)` })
  t.equal((await s.request('GET', '/healthz')).status, 200, 'alive all the same')
})

onEachDatabase(t, 'the OpenAPI document lists every route and validates as OpenAPI 3.1; the docs page is served offline', async (t, s) => {
  const reply = await s.request('GET', '/openapi.json')
  t.equal(reply.status, 200)
  const doc = reply.body
  t.equal(doc.openapi, '3.1.0')
  const validator = new Validator()
  const result = await validator.validate(doc)
  t.ok(result.valid, `valid OpenAPI 3.1: ${JSON.stringify(result.errors)?.slice(0, 2000)}`)
  t.equal(validator.version, '3.1')

  const routes = s.runtime.loaded.routes
  const missing = routes.filter((r) => !doc.paths[r.path.replace(/:(\w+)/g, '{$1}')]?.[r.method.toLowerCase()]).map((r) => `${r.method} ${r.path}`)
  t.same(missing, [], 'every registered route is in the document')
  const count = Object.values(doc.paths).reduce((n: number, p: any) => n + Object.keys(p).length, 0)
  t.equal(count, routes.length, 'and nothing else')

  const put = doc.paths['/settings'].put
  t.equal(put['x-mamkit-access'], 'admin')
  t.ok(put.responses['401'] && put.responses['403'] && put.responses['422'], 'problem responses by access and input')
  t.match(put.requestBody.content['application/json'].schema, { type: 'object', properties: { settings: Object } })
  const flag = doc.paths['/status_flags/{id}'].get
  t.match(flag.parameters, [{ name: 'id', in: 'path', required: true, schema: { type: 'integer' } }])
  t.notOk(doc.paths['/healthz'].get.security, 'public routes need no credentials')
  t.same(doc.paths['/healthz'].get.responses['200'].content['application/json'].schema, { type: 'object', required: ['status'], properties: { status: { type: 'string', const: 'ok' } } }, 'declared success shapes are in it')

  const page = await s.request('GET', '/docs')
  t.equal(page.status, 200)
  t.match(page.headers.get('content-type'), /text\/html/)
  t.match(page.text, /docs\/swagger-ui-bundle\.js/)
  t.match(page.text, /"openapi\.json"/)
  const bundle = await s.request('GET', '/docs/swagger-ui-bundle.js')
  t.equal(bundle.status, 200)
  t.ok(bundle.buffer.length > 100_000, 'the renderer itself, from the installed package')
  assertProblem(t, await s.request('GET', '/docs/package.json'), 404)
  assertProblem(t, await s.request('GET', '/docs/..%2Fpackage.json'), 404)
})
