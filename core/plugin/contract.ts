import type { TSchema } from 'typebox'
import type { Resolver } from 'awilix'
import type { EntitySchema } from '@mikro-orm/core'
import type { MamContext } from '../http/context.js'
import type { JobDefinition } from '../jobs/types.js'
import type { Migration } from '../db/migrator.js'
import type { MamConfig } from '../config.js'
import type { Logger } from 'pino'
import type { EventBus } from '../events.js'

/**
 * Who may call a route: nobody needs to sign in (`public`), any signed-in user (`authenticated`),
 * an administrator (`admin`), or a user whose role grants the named capability.
 */
export type Access = 'public' | 'authenticated' | 'admin' | `${string}.${string}`

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

export interface RouteOptions {
  access: Access
  /** path parameters (`:id`); strings from the path are coerced to the schema's types */
  params?: TSchema
  /** query string and body merged (Rails-style params); bracket names nest */
  input?: TSchema
  /** accept multipart/form-data with files of at most this many bytes */
  multipart?: { maxFileSize: number; maxFiles?: number }
  /** a JSON body that is not an object (a bare string or array) is taken as this parameter */
  bodyKey?: string
  /** one line shown by `mamkit routes` and in the OpenAPI document */
  summary?: string
}

export type Handler = (ctx: MamContext) => unknown | Promise<unknown>

export interface RouteDefinition extends RouteOptions {
  method: HttpMethod
  path: string
  handler: Handler
  plugin: string
}

export interface RouteRegistrar {
  get(path: string, options: RouteOptions, handler: Handler): void
  post(path: string, options: RouteOptions, handler: Handler): void
  put(path: string, options: RouteOptions, handler: Handler): void
  patch(path: string, options: RouteOptions, handler: Handler): void
  delete(path: string, options: RouteOptions, handler: Handler): void
}

export interface JobRegistrar {
  define<P = unknown>(type: string, definition: JobDefinition<P>): void
}

export interface RegisterApi {
  routes: RouteRegistrar
  jobs: JobRegistrar
  /** add a service to the root container; other plugins resolve it by name */
  provide(name: string, resolver: Resolver<unknown>): void
  events: EventBus
  config: MamConfig
  log: Logger
}

export interface PluginDefinition {
  /** kebab-case id; the `module` parameter of activate_module and the feature name */
  name: string
  /** human-readable name shown by GET /features */
  title?: string
  version: string
  description?: string
  dependsOn?: string[]
  entities?: EntitySchema<any, any>[]
  migrations?: Migration[]
  /** role_matrix keys this plugin contributes */
  capabilities?: Record<string, string>
  /** false: installed but switched off until activate_module */
  activeByDefault?: boolean
  /** core parts that cannot be switched off */
  required?: boolean
  /** modules sold separately check their activation key here */
  verifyActivationKey?(key: string): boolean
  register?(api: RegisterApi): void | Promise<void>
  /** runs after migrations, before the server listens (seed data, built-in rows) */
  start?(scope: StartContext): void | Promise<void>
  /**
   * runs once every plugin has started, still before the server listens and jobs run: work that needs
   * what other plugins hook on in their `start` (repairing file operations a crash cut short)
   */
  started?(scope: StartContext): void | Promise<void>
}

export interface StartContext {
  resolve<T = unknown>(name: string): T
  config: MamConfig
  log: Logger
}

/** Identity function that gives plugin authors type checking and editor help. */
export function definePlugin(plugin: PluginDefinition): PluginDefinition {
  return plugin
}
