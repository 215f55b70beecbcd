import type { ParameterizedContext } from 'koa'
import type { AwilixContainer } from 'awilix'
import type { Principal } from '../auth/principal.js'
import type { EntityManager } from '../db/orm.js'

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

export interface MamContextExtras {
  requestId: string
  /** path parameters after validation */
  params: Record<string, any>
  /** query string and body merged and validated against the route's `input` schema */
  input: any
  /** true when `input` came from a JSON body alone (typed values), false for query strings and forms */
  typedInput: boolean
  files: UploadedFile[]
  user?: Principal
  /** the signed-in user; throws 401 on public routes where nobody signed in */
  requireUser(): Principal
  app_client: AppClient
  /** request-scoped DI container */
  scope: AwilixContainer
  /** request-scoped EntityManager (forked on first use) */
  em: EntityManager
  resolve<T = any>(name: string): T
}

export type MamContext = ParameterizedContext<Record<string, unknown>, MamContextExtras>
