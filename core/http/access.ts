import { can, type Principal } from '../auth/principal.js'
import { forbidden, unauthenticated } from '../errors.js'
import type { CompiledRoute } from '../plugin/loader.js'

/**
 * Who may call a route (its `access`), checked before its parameters so that nobody learns a
 * route's rules without signing in: 401 without a valid principal, 403 without the privilege. A
 * principal limited to a scope (a guest link) reaches only routes that list its kind in `scopes`.
 */
export function checkAccess(route: CompiledRoute, user: Principal | undefined, credentialSent: boolean): void {
  if (route.access === 'public') return
  if (!user) throw unauthenticated(credentialSent ? 'The credentials are invalid, expired or revoked' : undefined)
  if (user.scope !== undefined && !route.scopes?.includes(user.scope.kind))
    throw forbidden(`This credential is limited to a ${user.scope.kind} and does not open this route`)
  if (route.access === 'authenticated') return
  if (route.access === 'admin') {
    if (!user.isAdmin) throw forbidden('This action needs administrative privileges')
  } else if (!can(user, route.access)) {
    throw forbidden(`This action needs the "${route.access}" capability`)
  }
}
