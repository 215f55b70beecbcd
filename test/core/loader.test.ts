import t from 'tap'
import { Type } from 'typebox'
import { describePlugins } from '../../core/runtime.js'
import { loadPlugins, sortPlugins } from '../../core/plugin/loader.js'
import { definePlugin, type PluginDefinition, type RegisterApi } from '../../core/plugin/contract.js'
import { BootError } from '../../core/errors.js'
import { defineJob } from '../../core/jobs/define.js'
import { aliasOf, createServiceRef } from '../../core/plugin/services.js'
import { resolveConfig } from '../../core/config.js'
import { EventBus } from '../../core/events.js'
import { createLogger } from '../../core/runtime.js'
import { builtinPlugins } from '../../plugins/index.js'

const ok = () => ({ ok: true })
const plugin = (name: string, extra: Partial<PluginDefinition> = {}) => definePlugin({ name, version: '1.0.0', ...extra })
const withRoutes = (name: string, register: (api: RegisterApi) => void, extra: Partial<PluginDefinition> = {}) => plugin(name, { register, ...extra })

/** asserts that booting `plugins` fails with a BootError of `code` that names `pluginName` (and `also`) */
async function bootFails(t: Tap, plugins: PluginDefinition[], code: string, pluginName: string, also: RegExp[] = []) {
  const err = await describePlugins({ plugins }).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(err instanceof BootError, `${code}: a BootError`)
  const boot = err as BootError
  t.equal(boot?.code, code, `code ${code}`)
  t.equal(boot?.plugin, pluginName, `names the plugin "${pluginName}"`)
  t.match(boot?.message, `plugin "${pluginName}"`, 'the message names the plugin')
  for (const re of also) t.match(boot?.message, re)
}
type Tap = Pick<typeof t, 'ok' | 'equal' | 'match'>

t.test('the built-in plugins load, in dependency order', async (t) => {
  const { loaded } = await describePlugins({ plugins: builtinPlugins })
  const names = loaded.plugins.map((p) => p.name)
  t.equal(names[0], 'core', 'the core first')
  for (const p of loaded.plugins)
    for (const dep of p.dependsOn ?? []) t.ok(names.indexOf(dep) < names.indexOf(p.name), `${dep} before ${p.name}`)
  t.ok(loaded.capabilities.has('admin'))
  t.ok(loaded.capabilities.has('templates.manage'))
  t.ok(loaded.routes.length > 20)
})

t.test('dependencies: sorted, missing, cycles', async (t) => {
  const order = sortPlugins([plugin('c', { dependsOn: ['b'] }), plugin('b', { dependsOn: ['a'] }), plugin('a')]).map((p) => p.name)
  t.same(order, ['a', 'b', 'c'], 'dependencies come first')

  await bootFails(t, [plugin('archive', { dependsOn: ['storage'] })], 'PLUGIN_MISSING_DEPENDENCY', 'archive', [/"storage"/])
  await bootFails(t, [plugin('a', { dependsOn: ['b'] }), plugin('b', { dependsOn: ['c'] }), plugin('c', { dependsOn: ['a'] })], 'PLUGIN_CYCLE', 'a', [/a -> b -> c -> a/])
  await bootFails(t, [plugin('selfish', { dependsOn: ['selfish'] })], 'PLUGIN_CYCLE', 'selfish')
})

t.test('names: duplicates and bad names', async (t) => {
  await bootFails(t, [plugin('twin'), plugin('twin')], 'PLUGIN_DUPLICATE', 'twin')
  await bootFails(t, [plugin('core')], 'PLUGIN_DUPLICATE', 'core', [], )
  await bootFails(t, [plugin('Not_Kebab')], 'PLUGIN_INVALID', 'Not_Kebab')
  await bootFails(t, [{ name: 'noversion' } as PluginDefinition], 'PLUGIN_INVALID', 'noversion', [/version/])
})

t.test('routes: access, duplicates, schemas, paths', async (t) => {
  await bootFails(t, [withRoutes('open', (api) => api.routes.get('/open', {} as any, ok))], 'ROUTE_NO_ACCESS', 'open', [/GET \/open/])
  await bootFails(t, [withRoutes('open', (api) => api.routes.get('/open', undefined as any, ok))], 'ROUTE_NO_ACCESS', 'open')
  await bootFails(t, [withRoutes('typo', (api) => api.routes.post('/things', { access: 'things.mange' }, ok), { capabilities: { 'things.manage': 'x' } })], 'ROUTE_NO_ACCESS', 'typo', [
    /things\.mange/,
  ])
  await bootFails(t, [withRoutes('typo', (api) => api.routes.get('/things', { access: 'Admin' as any }, ok))], 'ROUTE_NO_ACCESS', 'typo')

  // the same method and path shape in two plugins, whatever the parameter is called
  await bootFails(
    t,
    [withRoutes('first', (api) => api.routes.get('/things/:id', { access: 'authenticated' }, ok)), withRoutes('second', (api) => api.routes.get('/things/:thing_id', { access: 'authenticated' }, ok))],
    'ROUTE_DUPLICATE',
    'second',
    [/GET \/things\/:thing_id/, /"first"/],
  )
  await bootFails(t, [withRoutes('greedy', (api) => api.routes.get('/roles', { access: 'authenticated' }, ok)), ...builtinPlugins], 'ROUTE_DUPLICATE', 'roles', [
    /GET \/roles/,
    /"greedy"/,
  ])
  // another method or another shape is not a duplicate
  const { loaded } = await describePlugins({
    plugins: [
      withRoutes('first', (api) => {
        api.routes.get('/things/:id', { access: 'authenticated' }, ok)
        api.routes.put('/things/:id', { access: 'admin' }, ok)
        api.routes.get('/things/search', { access: 'authenticated' }, ok)
      }),
    ],
  })
  t.same(
    loaded.routes.filter((r) => r.plugin === 'first').map((r) => `${r.method} ${r.path}`),
    ['GET /things/:id', 'PUT /things/:id', 'GET /things/search'],
    'routes keep their registration order: the router decides precedence (router.test.ts)',
  )

  await bootFails(t, [withRoutes('bad-schema', (api) => api.routes.post('/things', { access: 'admin', input: { type: 'nonsense' } as any }, ok))], 'SCHEMA_INVALID', 'bad-schema', [/POST \/things input/])
  await bootFails(
    t,
    [withRoutes('bad-schema', (api) => api.routes.get('/things/:id', { access: 'admin', params: Type.Object({ id: Type.Integer({ minimum: 'one' as any }) }) }, ok))],
    'SCHEMA_INVALID',
    'bad-schema',
    [/params/],
  )
  // wrap names an object property of the input schema
  const Thing = Type.Object({ thing: Type.Optional(Type.Object({ name: Type.String() })), page: Type.Optional(Type.Integer()) })
  await bootFails(t, [withRoutes('wrapless', (api) => api.routes.post('/things', { access: 'admin', wrap: 'thing' }, ok))], 'SCHEMA_INVALID', 'wrapless', [/POST \/things: wrap/])
  await bootFails(t, [withRoutes('wrap-scalar', (api) => api.routes.post('/things', { access: 'admin', input: Thing, wrap: 'page' }, ok))], 'SCHEMA_INVALID', 'wrap-scalar', [/object schema/])
  await bootFails(t, [withRoutes('wrap-typo', (api) => api.routes.post('/things', { access: 'admin', input: Thing, wrap: 'things' }, ok))], 'SCHEMA_INVALID', 'wrap-typo', [/"things"/])
  t.ok((await describePlugins({ plugins: [withRoutes('wraps', (api) => api.routes.post('/things', { access: 'admin', input: Thing, wrap: 'thing' }, ok))] })).loaded.routes.length)

  await bootFails(t, [withRoutes('suffix', (api) => api.routes.get('/things.json', { access: 'public' }, ok))], 'PLUGIN_INVALID', 'suffix')
  await bootFails(t, [withRoutes('relative', (api) => api.routes.get('things', { access: 'public' }, ok))], 'PLUGIN_INVALID', 'relative')
})

t.test('capabilities, services and jobs', async (t) => {
  await bootFails(t, [plugin('caps', { capabilities: { 'Things Manage': 'x' } })], 'PLUGIN_INVALID', 'caps', [/Things Manage/])
  await bootFails(t, [plugin('one', { capabilities: { 'things.manage': 'x' } }), plugin('two', { capabilities: { 'things.manage': 'y' } })], 'PLUGIN_INVALID', 'two', [
    /things\.manage/,
    /"one"/,
  ])
  await bootFails(t, [plugin('steal', { capabilities: { admin: 'mine now' } })], 'PLUGIN_INVALID', 'steal', [/admin/])
  await bootFails(
    t,
    [
      withRoutes('svc-a', (api) => api.provide('thing', aliasOf(createServiceRef('svc-a.thing')))),
      withRoutes('svc-b', (api) => api.provide('thing', aliasOf(createServiceRef('svc-b.thing')))),
    ],
    'SERVICE_INVALID',
    'svc-b',
    [/"thing"/, /"svc-a"/],
  )
  await bootFails(
    t,
    [withRoutes('job-a', (api) => api.jobs.define('x.run', { handler: ok } as any)), withRoutes('job-b', (api) => api.jobs.define('x.run', { handler: ok } as any))],
    'JOB_DUPLICATE',
    'job-b',
    [/x\.run/],
  )

  // recurring jobs: only a job this plugin defined, a period of at least a second, a payload of {}
  await bootFails(t, [withRoutes('recur-a', (api) => api.jobs.schedule('recur-a.tick', 60_000))], 'JOB_INVALID', 'recur-a', [/recur-a\.tick/, /not defined/])
  await bootFails(t, [withRoutes('recur-b', (api) => (api.jobs.define('recur-b.tick', { handler: ok } as any), api.jobs.schedule('recur-b.tick', 10)))], 'JOB_INVALID', 'recur-b', [/every must be/, /got 10/])
  const NeedsProject = defineJob('recur-c.tick', Type.Object({ projectId: Type.Integer() }))
  await bootFails(t, [withRoutes('recur-c', (api) => (api.jobs.define(NeedsProject, { handler: ok } as any), api.jobs.schedule(NeedsProject, 60_000)))], 'JOB_INVALID', 'recur-c', [/payload is \{\}/])

  // credential resolvers: named, with extract() and resolve(), one per name, never the core's own
  const resolver = (name: string) => ({ name, extract: () => undefined, resolve: async () => null })
  await bootFails(t, [withRoutes('cred-a', (api) => api.credentials.add(resolver('guest'))), withRoutes('cred-b', (api) => api.credentials.add(resolver('guest')))], 'PLUGIN_INVALID', 'cred-b', [/"guest"/])
  await bootFails(t, [withRoutes('cred-core', (api) => api.credentials.add(resolver('api-key-or-login-token')))], 'PLUGIN_INVALID', 'cred-core', [/core/])
  await bootFails(t, [withRoutes('cred-half', (api) => api.credentials.add({ name: 'half' } as any))], 'PLUGIN_INVALID', 'cred-half', [/extract\(\) and resolve\(\)/])
  const withResolvers = await describePlugins({ plugins: [withRoutes('cred-a', (api) => api.credentials.add(resolver('site'))), withRoutes('cred-b', (api) => api.credentials.add(resolver('node')))] })
  t.same(withResolvers.loaded.credentials.map((r) => r.name), ['site', 'node'], 'resolvers in registration order')

  // a route may use a capability of a plugin loaded before or after it
  const { loaded } = await describePlugins({
    plugins: [withRoutes('uses', (api) => api.routes.get('/later', { access: 'later.use' }, ok)), plugin('later', { capabilities: { 'later.use': 'x' } })],
  })
  t.equal(loaded.capabilities.get('later.use')?.plugin, 'later')
})

t.test('loadPlugins directly', async (t) => {
  const env = { config: resolveConfig({ dataDir: t.testdir() }), log: createLogger({ logLevel: 'silent' }), events: new EventBus() }
  const loaded = await loadPlugins([withRoutes('solo', (api) => api.routes.get('/solo', { access: 'public', summary: 'alone' }, ok))], env)
  t.same(
    loaded.routes.map((r) => ({ method: r.method, path: r.path, plugin: r.plugin, access: r.access })),
    [{ method: 'GET', path: '/solo', plugin: 'solo', access: 'public' }],
  )
  await t.rejects(loadPlugins([plugin('x', { dependsOn: ['y'] })], env), { code: 'PLUGIN_MISSING_DEPENDENCY', plugin: 'x' })
})

t.test('route paths: literal segments and :name parameters only; shapes clash without regard to case', async (t) => {
  for (const [name, p] of [
    ['wildcard', '/files/*rest'],
    ['optional', '/files{/:name}'],
    ['trailing', '/files/'],
    ['empty-segment', '/files//meta'],
    ['twice', '/files/:id/versions/:id'],
    ['mid-segment', '/files/:name.:ext'],
  ])
    await bootFails(t, [withRoutes(name, (api) => api.routes.get(p, { access: 'public' }, ok))], 'PLUGIN_INVALID', name, [new RegExp(`GET ${p.replace(/[*{}.]/g, '\\$&')}`)])
  await bootFails(
    t,
    [withRoutes('upper', (api) => api.routes.get('/Things/:id', { access: 'public' }, ok)), withRoutes('lower', (api) => api.routes.get('/things/:thing_id', { access: 'public' }, ok))],
    'ROUTE_DUPLICATE',
    'lower',
    [/upper/],
  )
  const { loaded } = await describePlugins({ plugins: [withRoutes('fine', (api) => api.routes.get('/things/:thing_id/parts/:part', { access: 'public' }, ok))] })
  t.ok(loaded.routes.some((r) => r.path === '/things/:thing_id/parts/:part'))
})
