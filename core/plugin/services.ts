import { asFunction } from 'awilix'
import type { Logger } from 'pino'
import type { MamConfig } from '../config.js'
import type { EventBus } from '../events.js'
import type { Database, EntityManager, Knex } from '../db/orm.js'
import type { JobService } from '../jobs/service.js'
import type { Outbox } from '../outbox.js'
import type { FeatureService } from '../system/features.js'
import type { AuthService } from '../auth/service.js'
import type { LoginThrottle } from '../auth/throttle.js'
import type { UserViews } from '../auth/user-views.js'
import type { StorageRegistry } from '../storage/storages.js'
import type { MediaTools } from '../media/tools.js'
import type { PluginDefinition, RouteDefinition } from './contract.js'
import type { PluginSettings } from './settings.js'
import type { RequestObservers } from '../http/metrics.js'
import type { HealthChecks } from '../system/health.js'

/**
 * A typed name for a service in the container, like Backstage's service refs. The id is
 * `<plugin>.<name>`: the plugin part says who provides it, so nobody can shadow another plugin's
 * service (or the core's) and a caller can only resolve services of plugins it depends on.
 * Plugins export their refs from their `index.ts`; callers import the ref, never the class behind it.
 */
export interface ServiceRef<T> {
  readonly id: string
  /** the providing plugin (`core` for the core's own services) */
  readonly plugin: string
  /** never set: carries the service's type */
  readonly __type?: T
}

const REF_ID = /^([a-z][a-z0-9-]*)\.([a-zA-Z][a-zA-Z0-9]*)$/

export function createServiceRef<T>(id: string): ServiceRef<T> {
  const m = REF_ID.exec(id)
  if (!m) throw new Error(`service ref "${id}": ids are <plugin>.<name>, e.g. "projects.service"`)
  return Object.freeze({ id, plugin: m[1] })
}

/** resolves services by ref; the one a plugin gets only reaches its own, its dependencies' and the core's */
export type ServiceResolver = <T>(ref: ServiceRef<T>) => T

/** The core's services, resolvable by every plugin. */
export const coreServices = {
  config: createServiceRef<MamConfig>('core.config'),
  log: createServiceRef<Logger>('core.log'),
  events: createServiceRef<EventBus>('core.events'),
  db: createServiceRef<Database>('core.db'),
  /** the query builder of the database (plain-row reads and bulk writes) */
  knex: createServiceRef<Knex>('core.knex'),
  /** request- or job-scoped EntityManager (a fork); root resolution gives a fresh fork */
  em: createServiceRef<EntityManager>('core.em'),
  jobs: createServiceRef<JobService>('core.jobs'),
  /** catalogue events written in the change's transaction and fanned out to consumers (core/outbox.ts) */
  outbox: createServiceRef<Outbox>('core.outbox'),
  features: createServiceRef<FeatureService>('core.features'),
  auth: createServiceRef<AuthService>('core.auth'),
  loginThrottle: createServiceRef<LoginThrottle>('core.loginThrottle'),
  userViews: createServiceRef<UserViews>('core.userViews'),
  storages: createServiceRef<StorageRegistry>('core.storages'),
  mediaTools: createServiceRef<MediaTools>('core.mediaTools'),
  plugins: createServiceRef<readonly PluginDefinition[]>('core.plugins'),
  capabilities: createServiceRef<ReadonlyMap<string, { plugin: string; description: string }>>('core.capabilities'),
  /** every plugin's settings in force (`api.settings()` reads them); GET/PUT /settings change them live */
  settings: createServiceRef<PluginSettings>('core.settings'),
  /** the route table as the plugins declared it (OpenAPI document, route listings) */
  routes: createServiceRef<readonly RouteDefinition[]>('core.routes'),
  /** listeners told of every answered request (metrics, traffic counting) */
  requests: createServiceRef<RequestObservers>('core.requests'),
  /** readiness checks of this process (GET /readyz) */
  health: createServiceRef<HealthChecks>('core.health'),
} as const

/** every plugin a plugin may resolve services of: itself, the core, and what it depends on (transitively) */
export function reachablePlugins(plugin: PluginDefinition, byName: ReadonlyMap<string, PluginDefinition>): Set<string> {
  const reachable = new Set<string>(['core', plugin.name])
  const visit = (p: PluginDefinition) => {
    for (const dep of [...(p.dependsOn ?? []), ...(p.optionalDependsOn ?? []).filter((d) => byName.has(d))]) {
      if (reachable.has(dep)) continue
      reachable.add(dep)
      const target = byName.get(dep)
      if (target) visit(target)
    }
  }
  visit(plugin)
  return reachable
}

const ALIAS_OF = Symbol('mamkit.aliasOf')

/**
 * @deprecated a legacy string key for a service provided by ref (`api.provide('projects', aliasOf(ref))`),
 * until every caller resolves the ref
 */
export const aliasOf = (ref: ServiceRef<unknown>) => Object.assign(asFunction((cradle: Record<string, unknown>) => cradle[ref.id]).singleton(), { [ALIAS_OF]: ref })

/** the keys the core registers without a prefix (legacy string keys beside its refs) */
const CORE_KEYS = new Set([...Object.keys(coreServices), 'orm'])

/**
 * Why a plugin may not provide a service under the string key `id`, or null. String keys are
 * legacy: the only ones allowed are aliases (aliasOf) of the plugin's own refs that shadow nothing
 * of the core, and keys named `<plugin>.<name>` after the plugin itself.
 */
export function stringKeyProblem(plugin: string, id: string, resolver: unknown): string | null {
  if (CORE_KEYS.has(id)) return `service "${id}" would shadow the core's service of that name (core.${id})`
  const target = (resolver as { [ALIAS_OF]?: ServiceRef<unknown> } | null)?.[ALIAS_OF]
  if (target) return target.plugin === plugin ? null : `service "${id}" aliases "${target.id}" of plugin "${target.plugin}": a plugin provides only its own services`
  const m = REF_ID.exec(id)
  if (!m) return `service "${id}" has no plugin prefix: provide it through a ServiceRef named "${plugin}.<name>" (createServiceRef)`
  return m[1] === plugin ? null : `service "${id}" belongs to ${m[1] === 'core' ? 'the core' : `plugin "${m[1]}"`}: a plugin provides services named after itself ("${plugin}.<name>")`
}
