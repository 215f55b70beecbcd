/** The signed-in user as handlers see it: who, which role, and what that role grants. */
export interface Principal {
  userId: number
  username: string
  roleId: number
  isAdmin: boolean
  capabilities: ReadonlySet<string>
  /** how this request authenticated, and the row of that credential */
  via: 'api_key' | 'token'
  credentialId: number
}

export function can(principal: Principal | undefined, capability: string): boolean {
  if (!principal) return false
  if (principal.isAdmin) return true
  return principal.capabilities.has(capability)
}
