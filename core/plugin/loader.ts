import type { Resolver } from 'awilix'
import type { Logger } from 'pino'
import { BootError } from '../errors.js'
import { check, compileSchema, type CompiledSchema } from '../http/validation.js'
import { routePathProblem, routeShape } from '../http/router.js'
import { checkResolver, type CredentialResolver } from '../http/credentials.js'
import { wrapSpecOf } from '../http/wrap.js'
import type { JobDefinition, Recurrence } from '../jobs/types.js'
import type { JobType } from '../jobs/define.js'
import type { MamConfig } from '../config.js'
import type { EventBus } from '../events.js'
import type { Access, Handler, HttpMethod, PluginDefinition, ProvideOptions, RouteDefinition, RouteOptions } from './contract.js'
import { reachablePlugins, stringKeyProblem, type ServiceRef, type ServiceResolver } from './services.js'
import { PluginSettings } from './settings.js'

export interface CompiledRoute extends RouteDefinition {
  compiledParams?: CompiledSchema
  compiledInput?: CompiledSchema
}

export interface RegisteredJob extends JobDefinition<any> {
  type: string
  plugin: string
  /** the payload schema of a job defined with `defineJob`, checked at enqueue */
  compiledPayload?: CompiledSchema
  /** set by `api.jobs.schedule`: the job runs again and again (see JobQueue.ensureRecurring) */
  recurring?: Recurrence
}

/** a service a plugin provides: a ServiceRef's factory, or (legacy) an awilix resolver under a plain name */
export interface RegisteredService {
  plugin: string
  /** plugins whose services the factory may resolve */
  reachable: ReadonlySet<string>
  factory?: (resolve: ServiceResolver) => unknown
  lifetime?: ProvideOptions['lifetime']
  dispose?: ProvideOptions['dispose']
  resolver?: Resolver<unknown>
}

export interface LoadedPlugins {
  /** dependency order: a plugin comes after everything it depends on */
  plugins: PluginDefinition[]
  routes: CompiledRoute[]
  jobs: Map<string, RegisteredJob>
  services: Map<string, RegisteredService>
  /** role_matrix keys: capability → description */
  capabilities: Map<string, { plugin: string; description: string }>
  /** plugin → the plugins whose services it may resolve (itself, the core, its dependencies) */
  reachable: Map<string, ReadonlySet<string>>
  settings: PluginSettings
  /** set by the runtime once the container exists: what `api.use(ref)` resolves from */
  resolveRoot?: (id: string) => unknown
  /** ways to authenticate that plugins added, in registration order */
  credentials: CredentialResolver[]
}

const NAME = /^[a-z][a-z0-9-]*$/
const BUILTIN_ACCESS = new Set(['public', 'authenticated', 'admin'])

/** Orders the plugins by `dependsOn`; a missing dependency or a cycle stops the boot. */
export function sortPlugins(plugins: PluginDefinition[]): PluginDefinition[] {
  const byName = new Map<string, PluginDefinition>()
  for (const p of plugins) {
    if (!p || typeof p.name !== 'string' || !NAME.test(p.name))
      throw new BootError('PLUGIN_INVALID', String(p?.name), 'a plugin needs a kebab-case name')
    if (typeof p.version !== 'string') throw new BootError('PLUGIN_INVALID', p.name, 'a plugin needs a version')
    if (byName.has(p.name)) throw new BootError('PLUGIN_DUPLICATE', p.name, 'loaded twice')
    byName.set(p.name, p)
  }
  const ordered: PluginDefinition[] = []
  const state = new Map<string, 'visiting' | 'done'>()
  const visit = (p: PluginDefinition, path: string[]) => {
    if (state.get(p.name) === 'done') return
    if (state.get(p.name) === 'visiting')
      throw new BootError('PLUGIN_CYCLE', p.name, `dependency cycle: ${[...path, p.name].join(' -> ')}`)
    state.set(p.name, 'visiting')
    for (const dep of p.dependsOn ?? []) {
      const target = byName.get(dep)
      if (!target) throw new BootError('PLUGIN_MISSING_DEPENDENCY', p.name, `depends on "${dep}", which is not loaded`)
      visit(target, [...path, p.name])
    }
    for (const dep of p.optionalDependsOn ?? []) {
      const target = byName.get(dep)
      if (target) visit(target, [...path, p.name])
    }
    state.set(p.name, 'done')
    ordered.push(p)
  }
  for (const p of plugins) visit(p, [])
  return ordered
}

/** Lets every plugin register its routes, jobs and services, and checks what they declare. */
export async function loadPlugins(
  input: PluginDefinition[],
  env: { config: MamConfig; log: Logger; events: EventBus },
): Promise<LoadedPlugins> {
  const plugins = sortPlugins(input)
  const byName = new Map(plugins.map((p) => [p.name, p]))
  const loaded: LoadedPlugins = {
    plugins,
    routes: [],
    jobs: new Map(),
    services: new Map(),
    capabilities: new Map(),
    reachable: new Map(plugins.map((p) => [p.name, reachablePlugins(p, byName)])),
    settings: new PluginSettings(),
    credentials: [],
  }
  const routeKeys = new Map<string, string>()

  for (const plugin of plugins) {
    for (const [cap, description] of Object.entries(plugin.capabilities ?? {})) {
      if (!/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/.test(cap))
        throw new BootError('PLUGIN_INVALID', plugin.name, `capability "${cap}" must be lower-case words joined by dots`)
      // a second declaration would silently take over the first one's role_matrix key (even `admin`)
      const owner = loaded.capabilities.get(cap)
      if (owner) throw new BootError('PLUGIN_INVALID', plugin.name, `capability "${cap}" is already declared by "${owner.plugin}"`)
      loaded.capabilities.set(cap, { plugin: plugin.name, description })
    }
  }

  for (const plugin of plugins) {
    const add = (method: HttpMethod) => (path: string, options: RouteOptions, handler: Handler<any>) => {
      const where = `${method} ${path}`
      if (!options || !options.access)
        throw new BootError('ROUTE_NO_ACCESS', plugin.name, `${where} does not declare who may call it (access)`)
      if (!isKnownAccess(options.access, loaded))
        throw new BootError('ROUTE_NO_ACCESS', plugin.name, `${where} declares unknown access "${options.access}"`)
      if (typeof path !== 'string' || !path.startsWith('/') || path.endsWith('.json'))
        throw new BootError('PLUGIN_INVALID', plugin.name, `${where}: paths start with / and carry no .json suffix`)
      const problem = routePathProblem(path)
      if (problem) throw new BootError('PLUGIN_INVALID', plugin.name, `${where}: ${problem}`)
      // the router matches literal segments without regard to case: /Teams and /teams are one path
      const key = `${method} ${routeShape(path)}`
      const owner = routeKeys.get(key)
      if (owner) throw new BootError('ROUTE_DUPLICATE', plugin.name, `${where} is already registered by "${owner}"`)
      routeKeys.set(key, plugin.name)
      const wrapProblem = options.wrap === undefined ? undefined : wrapSpecOf(options.input, options.wrap)
      if (typeof wrapProblem === 'string') throw new BootError('SCHEMA_INVALID', plugin.name, `${where}: ${wrapProblem}`)
      loaded.routes.push({
        ...options,
        method,
        path,
        handler,
        plugin: plugin.name,
        compiledParams: compile(plugin.name, where, 'params', options.params),
        compiledInput: compile(plugin.name, where, 'input', options.input),
      })
    }
    loaded.settings.load(plugin, env.config.plugins[plugin.name])
    for (const event of plugin.events ?? []) {
      if (event.plugin !== plugin.name && plugin.name !== 'core')
        throw new BootError('EVENT_INVALID', plugin.name, `event "${event.name}" must start with the plugin's name ("${plugin.name}.<what-happened>")`)
      try {
        env.events.declare(event)
      } catch (err) {
        throw new BootError('EVENT_INVALID', plugin.name, (err as Error).message)
      }
    }
    const reachable = loaded.reachable.get(plugin.name)!
    await plugin.register?.({
      routes: { get: add('GET'), post: add('POST'), put: add('PUT'), patch: add('PATCH'), delete: add('DELETE') },
      jobs: {
        define: (job: JobType<unknown> | string, definition: JobDefinition<any>) => defineJob(loaded, plugin.name, job, definition),
        schedule: (job: JobType<unknown> | string, everyMs: number, options?: { firstAfterMs?: number }) => scheduleJob(loaded, plugin.name, job, everyMs, options),
      },
      provide(ref: ServiceRef<unknown> | string, factory: ((resolve: ServiceResolver) => unknown) | Resolver<unknown>, options?: ProvideOptions) {
        const id = typeof ref === 'string' ? ref : ref.id
        const keyProblem = typeof ref === 'string' ? stringKeyProblem(plugin.name, ref, factory) : null
        if (keyProblem) throw new BootError('SERVICE_INVALID', plugin.name, keyProblem)
        if (typeof ref !== 'string' && ref.plugin !== plugin.name)
          throw new BootError('SERVICE_INVALID', plugin.name, `service "${id}" belongs to ${ref.plugin === 'core' ? 'the core' : `plugin "${ref.plugin}"`}: a plugin provides services named after itself ("${plugin.name}.<name>")`)
        const owner = loaded.services.get(id)
        if (owner) throw new BootError('SERVICE_INVALID', plugin.name, `service "${id}" is already provided by "${owner.plugin}"`)
        loaded.services.set(
          id,
          typeof ref === 'string'
            ? { plugin: plugin.name, reachable, resolver: factory as Resolver<unknown> }
            : { plugin: plugin.name, reachable, factory: factory as (resolve: ServiceResolver) => unknown, lifetime: options?.lifetime ?? 'singleton', dispose: options?.dispose },
        )
      },
      credentials: {
        add(resolver: CredentialResolver) {
          const problem = checkResolver(resolver, loaded.credentials)
          if (problem) throw new BootError('PLUGIN_INVALID', plugin.name, problem)
          loaded.credentials.push(resolver)
        },
      },
      use<T>(ref: ServiceRef<T>) {
        assertReachable(plugin.name, reachable, ref)
        return () => {
          if (!loaded.resolveRoot) throw new Error(`service "${ref.id}" used before the runtime started`)
          return loaded.resolveRoot(ref.id) as T
        }
      },
      settings: () => loaded.settings.get(plugin.name),
      events: env.events,
      config: env.config,
      log: env.log.child({ plugin: plugin.name }),
    } as any)
  }
  return loaded
}

/** a plugin may resolve services of the core, itself and the plugins it depends on */
export function assertReachable(plugin: string, reachable: ReadonlySet<string>, ref: ServiceRef<unknown>): void {
  if (!reachable.has(ref.plugin))
    throw new BootError('SERVICE_UNREACHABLE', plugin, `uses service "${ref.id}" of plugin "${ref.plugin}", which is not in its dependsOn`)
}

function defineJob(loaded: LoadedPlugins, plugin: string, job: JobType<unknown> | string, definition: JobDefinition<any>) {
  const type = typeof job === 'string' ? job : job.type
  if (typeof job !== 'string' && job.plugin !== plugin)
    throw new BootError('JOB_INVALID', plugin, `job type "${type}" must start with the plugin's name ("${plugin}.<name>")`)
  if (loaded.jobs.has(type)) throw new BootError('JOB_DUPLICATE', plugin, `job type "${type}" is already defined`)
  const compiledPayload = typeof job === 'string' ? undefined : compile(plugin, `job ${type}`, 'payload', job.payload)
  loaded.jobs.set(type, { ...definition, type, plugin, compiledPayload })
}

function scheduleJob(loaded: LoadedPlugins, plugin: string, job: JobType<unknown> | string, everyMs: number, options: { firstAfterMs?: number } = {}) {
  const type = typeof job === 'string' ? job : job.type
  const registered = loaded.jobs.get(type)
  if (!registered || registered.plugin !== plugin) throw new BootError('JOB_INVALID', plugin, `schedules job type "${type}", which it has not defined (define it first)`)
  const firstAfterMs = options.firstAfterMs ?? everyMs
  for (const [name, ms, least] of [['every', everyMs, 1000], ['firstAfterMs', firstAfterMs, 0]] as const)
    if (!Number.isSafeInteger(ms) || ms < least) throw new BootError('JOB_INVALID', plugin, `schedule of "${type}": ${name} must be a whole number of milliseconds ≥ ${least} (got ${ms})`)
  if (registered.compiledPayload && check(registered.compiledPayload, {}, true, 'payload').length)
    throw new BootError('JOB_INVALID', plugin, `schedule of "${type}": a scheduled run's payload is {}, which the job's payload schema refuses`)
  registered.recurring = { everyMs, firstAfterMs }
}

function isKnownAccess(access: Access, loaded: LoadedPlugins): boolean {
  return BUILTIN_ACCESS.has(access) || loaded.capabilities.has(access)
}

function compile(plugin: string, where: string, part: string, schema: RouteOptions['input']) {
  if (!schema) return undefined
  try {
    return compileSchema(schema)
  } catch (err) {
    throw new BootError('SCHEMA_INVALID', plugin, `${where} ${part} schema: ${(err as Error).message}`)
  }
}
