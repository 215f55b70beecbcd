import type { ParameterizedContext } from 'koa'
import type { AwilixContainer } from 'awilix'
import type { Principal } from '../auth/principal.js'
import type { EntityManager } from '../db/orm.js'
import type { ServiceRef } from '../plugin/services.js'

export interface UploadedFile {
  /** the form field it came in */
  field: string
  /** the file name the client gave; never trust it as a path */
  originalName: string
  /** server-side temporary file; moved or removed by the handler, removed after the request otherwise */
  tempPath: string
  size: number
  mimeType: string | null
}

/** What the desktop application says about itself (spec §5). */
export interface AppClient {
  /** X-APP-CLIENT present: the dedicated application, not a browser */
  isApp: boolean
  /** X-APP-EDIT: the edit (workstation) name */
  edit?: string
  /** X-APP-UIDGIDS: uid and gid of the user the edit represents */
  uidGids?: string
}

export interface MamContextExtras<Params = any, Input = any, User extends Principal | undefined = Principal | undefined> {
  requestId: string
  /** path parameters after validation */
  params: Params
  /** query string and body merged and validated against the route's `input` schema */
  input: Input
  /** true when `input` came from a JSON body alone (typed values), false for query strings and forms */
  typedInput: boolean
  files: UploadedFile[]
  /** the signed-in user: always set on routes that are not `public` */
  user: User
  /** the signed-in user; throws 401 on public routes where nobody signed in */
  requireUser(): Principal
  app_client: AppClient
  /** request-scoped DI container */
  scope: AwilixContainer
  /** request-scoped EntityManager (forked on first use) */
  em: EntityManager
  /** a service of the core, the route's plugin or a plugin it depends on (request scope) */
  resolve<T>(ref: ServiceRef<T>): T
  /** @deprecated legacy string keys: resolve through a ServiceRef */
  resolve<T = any>(name: string): T
}

/**
 * What a route handler gets: Koa's context with the request's params, input and user. Routes
 * registered through `api.routes` get them typed from their schemas and access (`RouteContext`).
 */
export type MamContext<Params = any, Input = any, User extends Principal | undefined = Principal | undefined> = ParameterizedContext<
  Record<string, unknown>,
  MamContextExtras<Params, Input, User>
>
