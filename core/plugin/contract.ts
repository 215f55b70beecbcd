import type { Static, TSchema } from 'typebox'
import type { Resolver } from 'awilix'
import type { EntitySchema } from '@mikro-orm/core'
import type { Logger } from 'pino'
import type { MamContext } from '../http/context.js'
import type { JobDefinition } from '../jobs/types.js'
import type { JobType } from '../jobs/define.js'
import type { Migration } from '../db/migrator.js'
import type { MamConfig } from '../config.js'
import type { EventBus, EventType } from '../events.js'
import type { Principal } from '../auth/principal.js'
import type { ServiceRef, ServiceResolver } from './services.js'
import type { CredentialResolver } from '../http/credentials.js'

/**
 * Who may call a route: nobody needs to sign in (`public`), any signed-in user (`authenticated`),
 * an administrator (`admin`), or a user whose role grants the named capability.
 */
export type Access = 'public' | 'authenticated' | 'admin' | `${string}.${string}`

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

type SchemaSlot = TSchema | undefined

export interface RouteOptions<P extends SchemaSlot = SchemaSlot, I extends SchemaSlot = SchemaSlot, A extends Access = Access> {
  access: A
  /** path parameters (`:id`); strings from the path are coerced to the schema's types */
  params?: P
  /** query string and body merged (Rails-style params); bracket names nest */
  input?: I
  /** accept multipart/form-data with files of at most this many bytes */
  multipart?: { maxFileSize: number; maxFiles?: number }
  /** a JSON body that is not an object (a bare string or array) is taken as this parameter */
  bodyKey?: string
  /**
   * Rails' wrap_parameters: the name of an object property of `input` (`'team'`); when the request
   * has no such key, top-level parameters that are attributes of it are taken as if sent inside it
   */
  wrap?: string
  /** principals limited to a scope (a guest link's `scope.kind`) reach this route only when it lists that kind */
  scopes?: string[]
  /** one line shown by `mamkit routes` and in the OpenAPI document */
  summary?: string
  /** the success body's schema, for the OpenAPI document (not checked at run time) */
  response?: TSchema
}

/** the signed-in user as a route with this access sees it: always there unless the route is public */
export type UserOf<A extends Access> = A extends 'public' ? Principal | undefined : Principal

/** what a handler of a route with these schemas and this access gets: typed params, input and user */
export type RouteContext<P extends SchemaSlot = undefined, I extends SchemaSlot = undefined, A extends Access = 'authenticated'> = MamContext<
  P extends TSchema ? Static<P> : Record<string, string>,
  I extends TSchema ? Static<I> : Record<string, never>,
  UserOf<A>
>

export type Handler<C = MamContext> = (ctx: C) => unknown | Promise<unknown>

export interface RouteDefinition extends RouteOptions {
  method: HttpMethod
  path: string
  handler: Handler<any>
  plugin: string
}

/** `api.routes.get(path, { access, params, input }, handler)`: the handler's ctx is typed from the schemas */
type AddRoute = <P extends SchemaSlot = undefined, I extends SchemaSlot = undefined, A extends Access = Access>(
  path: string,
  options: RouteOptions<P, I, A>,
  handler: Handler<RouteContext<P, I, A>>,
) => void

export interface RouteRegistrar {
  get: AddRoute
  post: AddRoute
  put: AddRoute
  patch: AddRoute
  delete: AddRoute
}

export interface JobRegistrar {
  /** a handle made by `defineJob` (its type starts with this plugin's name), or a plain type name */
  define<P>(job: JobType<P>, definition: JobDefinition<P>): void
  /** @deprecated name the job with `defineJob('<plugin>.<name>', PayloadSchema)` */
  define<P = unknown>(type: string, definition: JobDefinition<P>): void
  /**
   * Runs a job this plugin defined again and again, with the payload `{}`: each run that ends
   * (finished, failed or cancelled) queues the next one `everyMs` later, in the transaction that
   * records its end, so a crash can neither break the chain nor double it. Whenever a process that
   * runs jobs finds none of the type queued or running (its first start, a queued run cancelled),
   * it queues one `firstAfterMs` from then (default `everyMs`). Runs of a switched-off plugin wait.
   */
  schedule(job: JobType<any> | string, everyMs: number, options?: { firstAfterMs?: number }): void
}

export interface CredentialRegistrar {
  /** another way to authenticate, asked after the core's API keys and login tokens and the resolvers added before it */
  add(resolver: CredentialResolver): void
}

export interface ProvideOptions<T = unknown> {
  /** `singleton` (default): one per process; `request`: one per request or job (gets the scoped EntityManager) */
  lifetime?: 'singleton' | 'request'
  /** runs when the runtime closes (or the request scope ends): stop timers and watchers the service started */
  dispose?(service: T): void | Promise<void>
}

export interface RegisterApi<Settings = any> {
  routes: RouteRegistrar
  jobs: JobRegistrar
  credentials: CredentialRegistrar
  /**
   * Offers a service under one of this plugin's refs (`<plugin>.<name>`). `factory` gets a resolver
   * that reaches the core's services and those of the plugins this one depends on.
   */
  provide<T>(ref: ServiceRef<T>, factory: (resolve: ServiceResolver) => T, options?: ProvideOptions<T>): void
  /** @deprecated legacy string keys; provide through a ServiceRef */
  provide(name: string, resolver: Resolver<unknown>): void
  /**
   * A service of the core, of this plugin or of a plugin it depends on, for use in handlers and
   * jobs: the dependency is checked now (a boot error names it), the service resolved on each call.
   */
  use<T>(ref: ServiceRef<T>): () => T
  events: EventBus
  config: MamConfig
  /** this plugin's settings: `config.plugins.<name>` validated against `settings` with its defaults */
  settings(): Settings
  log: Logger
}

export interface PluginDefinition<S extends TSchema = TSchema> {
  /** kebab-case id; the `module` parameter of activate_module and the feature name */
  name: string
  /** human-readable name shown by GET /features */
  title?: string
  version: string
  description?: string
  dependsOn?: string[]
  /**
   * Plugins used when they are loaded (galleries use custom metadata if it is there): loaded first
   * and reachable like dependencies when present, no boot error when absent. Check at run time
   * whether one is active (`coreServices.features`) before calling into it.
   */
  optionalDependsOn?: string[]
  entities?: EntitySchema<any, any>[]
  migrations?: Migration[]
  /** role_matrix keys this plugin contributes */
  capabilities?: Record<string, string>
  /** the catalogue events this plugin publishes (`defineEvent('<plugin>.<what-happened>', …)`) */
  events?: EventType<any>[]
  /**
   * The plugin's settings as a TypeBox object schema with defaults. Values come from
   * `config.plugins.<name>`; they are validated at boot (a coded boot error names the setting).
   */
  settings?: S
  /** false: installed but switched off until activate_module */
  activeByDefault?: boolean
  /** core parts that cannot be switched off */
  required?: boolean
  /** modules sold separately check their activation key here */
  verifyActivationKey?(key: string): boolean
  register?(api: RegisterApi<Static<S>>): void | Promise<void>
  /** runs after migrations, before the server listens (seed data, built-in rows, reconciles) */
  start?(scope: StartContext): void | Promise<void>
  /**
   * runs once every plugin has started, still before the server listens and jobs run: work that needs
   * what other plugins hook on in their `start` (repairing file operations a crash cut short)
   */
  started?(scope: StartContext): void | Promise<void>
}

export interface StartContext {
  /** services by ref, as `RegisterApi.use` reaches them; a fresh request scope (its own EntityManager) */
  resolve: ServiceResolver & (<T = unknown>(name: string) => T)
  config: MamConfig
  log: Logger
}

/** Identity function that gives plugin authors type checking and editor help. */
export function definePlugin<S extends TSchema = TSchema>(plugin: PluginDefinition<S>): PluginDefinition<S> {
  return plugin
}
