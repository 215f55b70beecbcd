/**
 * The plugin contract v1: service refs named after their plugin and reachable only through
 * `dependsOn`, typed job handles named after their plugin, and settings validated at boot.
 */
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Type } from 'typebox'
import { MamRuntime, describePlugins } from '../../core/runtime.js'
import { definePlugin, type PluginDefinition } from '../../core/plugin/contract.js'
import { asValue } from 'awilix'
import { aliasOf, coreServices, createServiceRef } from '../../core/plugin/services.js'
import { defineJob } from '../../core/jobs/define.js'
import { BootError } from '../../core/errors.js'

const plugin = (name: string, extra: Partial<PluginDefinition> = {}) => definePlugin({ name, version: '1.0.0', ...extra })

async function bootError(boot: () => Promise<unknown>): Promise<BootError> {
  const err = await boot().then(
    () => null,
    (e: unknown) => e,
  )
  if (!(err instanceof BootError)) throw new Error(`expected a BootError, got ${String(err)}`)
  return err
}

class Counter {
  n = 0
  next() {
    return ++this.n
  }
}
const counterRef = createServiceRef<Counter>('counting.counter')
const counting = plugin('counting', { register: (api) => api.provide(counterRef, () => new Counter()) })

t.test('service refs: ids are <plugin>.<name>', async (t) => {
  t.throws(() => createServiceRef('counter'), /<plugin>\.<name>/, 'an unprefixed id is refused')
  t.throws(() => createServiceRef('Counting.counter'), /<plugin>\.<name>/)
  t.equal(counterRef.plugin, 'counting')
})

t.test('a plugin provides only its own refs: no shadowing of the core or of another plugin', async (t) => {
  let err = await bootError(() => describePlugins({ plugins: [plugin('evil', { register: (api) => api.provide(coreServices.jobs as any, () => ({})) })] }))
  t.equal(err.code, 'SERVICE_INVALID')
  t.equal(err.plugin, 'evil')
  t.match(err.message, /core\.jobs.*belongs to the core/)

  err = await bootError(() => describePlugins({ plugins: [counting, plugin('copycat', { dependsOn: ['counting'], register: (api) => api.provide(counterRef, () => new Counter()) })] }))
  t.equal(err.code, 'SERVICE_INVALID')
  t.equal(err.plugin, 'copycat')
  t.match(err.message, /counting\.counter.*plugin "counting"/)
})

t.test("legacy string keys: never a core key, never unprefixed, aliases only of the plugin's own refs", async (t) => {
  const cases: Array<[string, (api: any) => void, RegExp]> = [
    ['core key', (api) => api.provide('jobs', aliasOf(createServiceRef('evil.jobs'))), /"jobs" would shadow the core's service/],
    ['core em', (api) => api.provide('em', aliasOf(createServiceRef('evil.em'))), /"em" would shadow the core's service/],
    ['unprefixed', (api) => api.provide('helper', asValue({})), /"helper" has no plugin prefix/],
    ['another plugin', (api) => api.provide('counting.counter', asValue({})), /belongs to plugin "counting"/],
    ['the core', (api) => api.provide('core.jobs', asValue({})), /belongs to the core/],
    ['alias of another', (api) => api.provide('counter', aliasOf(counterRef)), /aliases "counting.counter" of plugin "counting"/],
  ]
  for (const [what, register, message] of cases) {
    const err = await bootError(() => describePlugins({ plugins: [counting, plugin('evil', { dependsOn: ['counting'], register })] }))
    t.equal(err.code, 'SERVICE_INVALID', what)
    t.equal(err.plugin, 'evil', what)
    t.match(err.message, message, what)
  }
  // allowed: an alias of its own ref, and a prefixed key of its own
  const mine = createServiceRef<Counter>('fine.counter')
  await t.resolves(describePlugins({ plugins: [plugin('fine', { register: (api) => (api.provide(mine, () => new Counter()), api.provide('counter', aliasOf(mine)), api.provide('fine.extra', asValue({}))) })] }))
})

t.test('services of a plugin outside dependsOn cannot be used', async (t) => {
  const err = await bootError(() => describePlugins({ plugins: [counting, plugin('stranger', { register: (api) => void api.use(counterRef) })] }))
  t.equal(err.code, 'SERVICE_UNREACHABLE')
  t.equal(err.plugin, 'stranger')
  t.match(err.message, /counting\.counter.*not in its dependsOn/)

  // a dependency of a dependency is reachable: it is loaded, and loaded first
  await t.resolves(describePlugins({ plugins: [counting, plugin('middle', { dependsOn: ['counting'] }), plugin('top', { dependsOn: ['middle'], register: (api) => void api.use(counterRef) })] }))
})

t.test('a factory that resolves an unreachable service fails the boot; reachable ones resolve by ref', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-contract-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const greeterRef = createServiceRef<{ greet(): string }>('greeting.greeter')
  const greeting = (dependsOn: string[]) =>
    plugin('greeting', {
      dependsOn,
      register: (api) =>
        api.provide(greeterRef, (resolve) => {
          const counter = resolve(counterRef)
          const { dataDir } = resolve(coreServices.config)
          return { greet: () => `hello #${counter.next()} from ${dataDir}` }
        }),
    })

  const err = await bootError(() => MamRuntime.create({ plugins: [counting, greeting([])], config: { dataDir, logLevel: 'silent' }, runJobs: false }))
  t.equal(err.code, 'SERVICE_UNREACHABLE')
  t.equal(err.plugin, 'greeting')

  let used: (() => { greet(): string }) | undefined
  const user = plugin('user', { dependsOn: ['greeting'], register: (api) => void (used = api.use(greeterRef)) })
  const runtime = await MamRuntime.create({ plugins: [counting, greeting(['counting']), user], config: { dataDir, logLevel: 'silent' }, runJobs: false })
  t.teardown(() => runtime.close())
  t.equal(used!().greet(), `hello #1 from ${dataDir}`, 'the singleton resolved its dependencies by ref')
  t.equal(used!().greet(), `hello #2 from ${dataDir}`, 'one instance per process')
})

t.test('job types are named after their plugin', async (t) => {
  t.throws(() => defineJob('calculate', Type.Object({})), /<plugin>\.<name>/)
  const calc = defineJob('projects.calculate-size', Type.Object({ projectId: Type.Integer() }))
  const err = await bootError(() => describePlugins({ plugins: [plugin('thief', { register: (api) => api.jobs.define(calc, { handler: async () => null }) })] }))
  t.equal(err.code, 'JOB_INVALID')
  t.equal(err.plugin, 'thief')
  t.match(err.message, /projects\.calculate-size/)
})

t.test('settings: validated at boot with defaults, a bad value names the setting', async (t) => {
  const Settings = Type.Object(
    {
      encodeConcurrency: Type.Integer({ minimum: 1, maximum: 16, default: 1 }),
      proxy: Type.Object({ height: Type.Integer({ minimum: 90, default: 540 }) }, { default: {}, additionalProperties: false }),
    },
    { additionalProperties: false },
  )
  let seen: unknown
  const encoder = definePlugin({ name: 'encoder', version: '1.0.0', settings: Settings, register: (api) => void (seen = api.settings()) })

  await describePlugins({ plugins: [encoder] })
  t.same(seen, { encodeConcurrency: 1, proxy: { height: 540 } }, 'defaults, also of nested objects')

  await describePlugins({ plugins: [encoder], config: { plugins: { encoder: { proxy: { height: 720 } } } } })
  t.same(seen, { encodeConcurrency: 1, proxy: { height: 720 } }, 'configured values win')

  let err = await bootError(() => describePlugins({ plugins: [encoder], config: { plugins: { encoder: { proxy: { height: 10 } } } } }))
  t.equal(err.code, 'SETTINGS_INVALID')
  t.equal(err.plugin, 'encoder')
  t.match(err.message, /setting plugins\.encoder\.proxy\.height must be at least 90/)

  err = await bootError(() => describePlugins({ plugins: [encoder], config: { plugins: { encoder: { encodeConcurency: 2 } } } }))
  t.match(err.message, /setting plugins\.encoder\.encodeConcurency is not a known parameter/, 'a misspelt setting is named')
})

t.test('catalogue events: declared by their plugin, payloads checked when published', async (t) => {
  const { defineEvent } = await import('../../core/events.js')
  const ingested = defineEvent('media.ingested', { payload: Type.Object({ name: Type.String() }, { additionalProperties: false }), description: 'a file became an asset', subject: 'asset' })
  const undeclared = defineEvent('media.vanished', { payload: Type.Object({}), description: 'never declared', subject: 'asset' })
  t.throws(() => defineEvent('ingested', { payload: Type.Object({}), description: '', subject: 'asset' }), /<plugin>\.<what-happened>/)

  const err = await bootError(() => describePlugins({ plugins: [plugin('other', { events: [ingested] })] }))
  t.equal(err.code, 'EVENT_INVALID')
  t.match(err.message, /media\.ingested/)

  const { loaded } = await describePlugins({ plugins: [plugin('media', { events: [ingested] })] })
  t.ok(loaded)
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-events-'))
  const runtime = await MamRuntime.create({ plugins: [plugin('media', { events: [ingested] })], config: { dataDir, logLevel: 'silent' }, runJobs: false })
  t.teardown(async () => {
    await runtime.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  t.same(runtime.events.catalogue().map((e) => e.name), ['job.failed', 'job.finished', 'media.ingested'], "the core's events and the plugin's")
  const heard: unknown[] = []
  runtime.events.subscribe(ingested, (e) => heard.push(e))
  const published = runtime.events.publish(ingested, { name: 'clip.mov' }, { subjectId: 7, actorId: 1 })
  t.match(heard, [{ id: published.id, name: 'media.ingested', subject: { type: 'asset', id: 7 }, actor_id: 1, payload: { name: 'clip.mov' } }])
  t.throws(() => runtime.events.publish(ingested, { name: 5 } as any, { subjectId: 7 }), /payload name must be a string/)
  t.throws(() => runtime.events.publish(undeclared, {}, { subjectId: 7 }), /not declared/)
})

t.test('optional dependencies: loaded first and reachable when present, no error when absent', async (t) => {
  const user = plugin('user', { optionalDependsOn: ['counting'], register: (api) => void api.use(counterRef) })
  const { loaded } = await describePlugins({ plugins: [user, counting] })
  const names = loaded.plugins.map((p) => p.name)
  t.ok(names.indexOf('counting') < names.indexOf('user'), 'the optional dependency comes first')
  const alone = plugin('alone', { optionalDependsOn: ['counting'] })
  await t.resolves(describePlugins({ plugins: [alone] }), 'an absent optional dependency is no boot error')
  const err = await bootError(() => describePlugins({ plugins: [user] }))
  t.equal(err.code, 'SERVICE_UNREACHABLE', 'an absent one is not reachable')
})
