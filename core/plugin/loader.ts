import type { Resolver } from 'awilix'
import type { Logger } from 'pino'
import { BootError } from '../errors.js'
import { compileSchema, type CompiledSchema } from '../http/validation.js'
import { routePathProblem, routeShape } from '../http/router.js'
import { checkResolver, type CredentialResolver } from '../http/credentials.js'
import { wrapSpecOf } from '../http/wrap.js'
import type { JobDefinition } from '../jobs/types.js'
import type { MamConfig } from '../config.js'
import type { EventBus } from '../events.js'
import type { Access, Handler, HttpMethod, PluginDefinition, RouteDefinition, RouteOptions } from './contract.js'

export interface CompiledRoute extends RouteDefinition {
  compiledParams?: CompiledSchema
  compiledInput?: CompiledSchema
}

export interface RegisteredJob extends JobDefinition<any> {
  type: string
  plugin: string
}

export interface LoadedPlugins {
  /** dependency order: a plugin comes after everything it depends on */
  plugins: PluginDefinition[]
  routes: CompiledRoute[]
  jobs: Map<string, RegisteredJob>
  services: Map<string, { plugin: string; resolver: Resolver<unknown> }>
  /** role_matrix keys: capability → description */
  capabilities: Map<string, { plugin: string; description: string }>
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
  const loaded: LoadedPlugins = { plugins, routes: [], jobs: new Map(), services: new Map(), capabilities: new Map(), credentials: [] }
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
    const add = (method: HttpMethod) => (path: string, options: RouteOptions, handler: Handler) => {
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
    await plugin.register?.({
      routes: { get: add('GET'), post: add('POST'), put: add('PUT'), patch: add('PATCH'), delete: add('DELETE') },
      jobs: {
        define(type, definition) {
          if (loaded.jobs.has(type)) throw new BootError('JOB_DUPLICATE', plugin.name, `job type "${type}" is already defined`)
          loaded.jobs.set(type, { ...definition, type, plugin: plugin.name })
        },
      },
      credentials: {
        add(resolver) {
          const problem = checkResolver(resolver, loaded.credentials)
          if (problem) throw new BootError('PLUGIN_INVALID', plugin.name, problem)
          loaded.credentials.push(resolver)
        },
      },
      provide(name, resolver) {
        const owner = loaded.services.get(name)
        if (owner) throw new BootError('PLUGIN_INVALID', plugin.name, `service "${name}" is already provided by "${owner.plugin}"`)
        loaded.services.set(name, { plugin: plugin.name, resolver })
      },
      events: env.events,
      config: env.config,
      log: env.log.child({ plugin: plugin.name }),
    })
  }
  return loaded
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
