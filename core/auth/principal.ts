/**
 * How a request can authenticate: the core's API keys and login tokens. A plugin that adds a
 * credential resolver (`api.credentials.add`) names its own kind by widening this interface:
 *
 *   declare module 'mamkit' { interface PrincipalKinds { guest: true } }
 */
export interface PrincipalKinds {
  api_key: true
  token: true
  /** a job acting for the user who queued it (`AuthService.principalFor`); credentialId is 0 */
  job: true
}
export type PrincipalVia = keyof PrincipalKinds

/**
 * What a credential opens when it opens less than its user's rights (a guest link: one gallery).
 * A principal with a scope reaches only routes that list `kind` in their `scopes`; those routes
 * check `id` themselves.
 */
export interface PrincipalScope {
  kind: string
  id?: number | string
  [detail: string]: unknown
}

/** The signed-in user as handlers see it: who, which role, and what that role grants. */
export interface Principal {
  /** the user the credential acts for (for a guest link: the user who shared it) */
  userId: number
  username: string
  roleId: number
  isAdmin: boolean
  capabilities: ReadonlySet<string>
  /** how this request authenticated, and the row of that credential */
  via: PrincipalVia
  credentialId: number
  scope?: PrincipalScope
}

export function can(principal: Principal | undefined, capability: string): boolean {
  if (!principal) return false
  if (principal.isAdmin) return true
  return principal.capabilities.has(capability)
}
