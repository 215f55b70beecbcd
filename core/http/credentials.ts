import type { Principal } from '../auth/principal.js'
import type { AuthService } from '../auth/service.js'
import type { MamContext } from './context.js'

/**
 * One way of presenting credentials. The request path asks every resolver in registration order
 * (the core's API keys and login tokens first) to `extract` its credential from the request; the
 * first that finds one decides who the request is: `cached` may answer at once without a promise
 * (the synchronous fast path), else `resolve` asks its store. `null` from `resolve` means the
 * credential was presented but is not valid: 401 on every route that needs a signed-in user.
 *
 * A resolver may answer with a principal of its own kind (`via`, see `PrincipalKinds`) and with
 * fewer rights than the user's: a guest link is a principal with a `scope`.
 */
export interface CredentialResolver {
  /** for errors and logs: `api-key`, `site-signature`, `guest-link` … */
  name: string
  /** the raw credential when the request carries one of this kind; `query` and `body` are parsed already */
  extract(ctx: MamContext, query: Record<string, unknown>, body: unknown): string | undefined
  /** the principal from a cache, or undefined when `resolve` must be asked */
  cached?(raw: string, ctx: MamContext): Principal | undefined
  resolve(raw: string, ctx: MamContext): Promise<Principal | null>
}

const BEARER = /^Bearer\s+(\S+)$/i
const COOKIE = '_auth_token'
const CORE_RESOLVER = 'api-key-or-login-token'

/** the core's own credentials look like `mk_<id>_<secret>` (API key) or `mt_<id>_<secret>` (login token) */
const isCoreCredential = (value: string) => value.length > 3 && value.charCodeAt(0) === 109 /* m */ && value.charCodeAt(2) === 95 /* _ */ && (value[1] === 'k' || value[1] === 't')

/**
 * API keys and login tokens (wire.md): `Authorization: Bearer`, the `_auth_token` cookie, or the
 * `auth_token` parameter. Only values of the core's own format are claimed, so plugins may take
 * other bearer credentials (a site signature, a render node's token) after it.
 */
export function coreCredentialResolver(auth: AuthService): CredentialResolver {
  return {
    name: CORE_RESOLVER,
    extract(ctx, query, body) {
      const headers = ctx.req.headers
      if (headers.authorization) {
        const m = BEARER.exec(headers.authorization)
        if (m && isCoreCredential(m[1])) return m[1]
      }
      if (headers.cookie) {
        const cookie = ctx.cookies.get(COOKIE)
        if (cookie && isCoreCredential(cookie)) return cookie
      }
      const param = query.auth_token ?? (body && typeof body === 'object' ? (body as Record<string, unknown>).auth_token : undefined)
      return typeof param === 'string' && isCoreCredential(param) ? param : undefined
    },
    cached: (raw, ctx) => auth.authenticateCached(raw, ctx.req.socket),
    resolve: (raw) => auth.authenticate(raw),
  }
}

/** Plugins' resolvers, checked at registration: each needs a name of its own and the two functions. */
export function checkResolver(resolver: CredentialResolver, taken: Iterable<CredentialResolver>): string | undefined {
  if (!resolver || typeof resolver.name !== 'string' || !resolver.name) return 'a credential resolver needs a name'
  if (typeof resolver.extract !== 'function' || typeof resolver.resolve !== 'function') return `credential resolver "${resolver.name}" needs extract() and resolve()`
  if (resolver.cached !== undefined && typeof resolver.cached !== 'function') return `credential resolver "${resolver.name}": cached must be a function`
  if (resolver.name === CORE_RESOLVER) return `"${CORE_RESOLVER}" is the core's own credential resolver`
  for (const other of taken) if (other.name === resolver.name) return `credential resolver "${resolver.name}" is registered already`
  return undefined
}
