import crypto from 'node:crypto'
import type { Knex } from '@mikro-orm/knex'
import type { MamConfig } from '../config.js'
import type { EventBus } from '../events.js'
import type { Principal } from './principal.js'
import { parseCredential, secretMatches, sha256 } from './secrets.js'

interface UserSnapshot {
  userId: number
  username: string
  roleId: number
  isAdmin: boolean
  capabilities: Set<string>
}

interface Cached<T> {
  value: T
  until: number
}

const LAST_USED_EVERY_MS = 60_000

// the one-shot crypto.hash (Node 20.12+) costs a third of createHash; same digest
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash
const cacheKeyOf: (raw: string) => string = oneShotHash ? (raw) => oneShotHash('sha256', raw, 'hex') : sha256

interface VerifiedCredential {
  userId: number
  id: number
  kind: Principal['via']
}

/** a fresh object per request (handlers get their own); spelled out, as `{ ...user, … }` costs ~40× more in V8 */
const principalOf = (user: UserSnapshot, cred: VerifiedCredential): Principal => ({
  userId: user.userId,
  username: user.username,
  roleId: user.roleId,
  isAdmin: user.isAdmin,
  capabilities: user.capabilities,
  via: cred.kind,
  credentialId: cred.id,
})

export const parseJson = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T

/**
 * Turns a bearer secret into a Principal. Verified credentials and user snapshots are cached
 * for `auth.cacheTtlMs` so a request costs no database round trip; revocation, user and role
 * changes in this process drop the cache at once (other processes see them within the TTL).
 */
export class AuthService {
  private readonly credentials = new Map<string, Cached<VerifiedCredential>>()
  private readonly users = new Map<number, Cached<UserSnapshot>>()
  private readonly lastUsedWritten = new Map<string, number>()

  constructor(
    private readonly knex: Knex,
    private readonly config: MamConfig,
    events: EventBus,
  ) {
    events.on('auth.user-changed', ({ userId }) => this.forgetUser(userId))
    events.on('auth.role-changed', () => this.users.clear())
    events.on('auth.credential-revoked', ({ userId }) => this.forgetUser(userId))
  }

  /**
   * `authenticate` when both caches hold the answer: the Principal without a promise, so the request
   * path needs no `await` for it. Undefined when the database has to be asked (a credential not seen
   * or expired from the cache, a user snapshot expired): call `authenticate` then.
   */
  authenticateCached(raw: string): Principal | undefined {
    const now = Date.now()
    const cred = this.credentials.get(cacheKeyOf(raw))
    if (!cred || cred.until < now) return undefined
    const hit = this.users.get(cred.value.userId)
    if (!hit || hit.until < now) return undefined
    this.touch(cred.value.kind, cred.value.id, now)
    return principalOf(hit.value, cred.value)
  }

  async authenticate(raw: string): Promise<Principal | null> {
    const now = Date.now()
    const cacheKey = cacheKeyOf(raw)
    let cred = this.credentials.get(cacheKey)
    if (!cred || cred.until < now) {
      const value = await this.verify(raw, now)
      if (!value) {
        this.credentials.delete(cacheKey)
        return null
      }
      cred = { value, until: now + this.config.auth.cacheTtlMs }
      this.credentials.set(cacheKey, cred)
    }
    // a cached user snapshot costs no extra await (the request path asks authenticateCached first)
    const hit = this.users.get(cred.value.userId)
    const user = hit && hit.until >= now ? hit.value : await this.snapshot(cred.value.userId, now)
    if (!user) return null
    this.touch(cred.value.kind, cred.value.id, now)
    return principalOf(user, cred.value)
  }

  private async verify(raw: string, now: number) {
    const parsed = parseCredential(raw)
    if (!parsed) return null
    const table = parsed.kind === 'api_key' ? 'api_keys' : 'auth_tokens'
    const row = await this.knex(table).where({ id: parsed.id }).first()
    if (!row || !secretMatches(parsed.secret, row.secret_hash)) return null
    if (row.expires_at !== null && row.expires_at !== undefined && new Date(row.expires_at).getTime() <= now) return null
    if (row.revoked_at) return null
    return { userId: Number(row.user_id), id: parsed.id, kind: parsed.kind }
  }

  async snapshot(userId: number, now = Date.now()): Promise<UserSnapshot | null> {
    const hit = this.users.get(userId)
    if (hit && hit.until >= now) return hit.value
    const row = await this.knex('users')
      .join('roles', 'roles.id', 'users.role_id')
      .where('users.id', userId)
      .first('users.id', 'users.username', 'users.role_id', 'roles.role_matrix')
    if (!row) {
      this.users.delete(userId)
      return null
    }
    const matrix = parseJson<Record<string, boolean>>(row.role_matrix) ?? {}
    const value: UserSnapshot = {
      userId: Number(row.id),
      username: row.username,
      roleId: Number(row.role_id),
      isAdmin: matrix.admin === true,
      capabilities: new Set(Object.keys(matrix).filter((k) => matrix[k] === true)),
    }
    this.users.set(userId, { value, until: now + this.config.auth.cacheTtlMs })
    return value
  }

  forgetUser(userId: number): void {
    this.users.delete(userId)
    for (const [key, cred] of this.credentials) if (cred.value.userId === userId) this.credentials.delete(key)
  }

  /** last_used_at / last_seen_at, written at most once a minute per credential, off the request path */
  private touch(kind: Principal['via'], id: number, now: number) {
    const key = `${kind}:${id}`
    if ((this.lastUsedWritten.get(key) ?? 0) + LAST_USED_EVERY_MS > now) return
    this.lastUsedWritten.set(key, now)
    const [table, column] = kind === 'api_key' ? ['api_keys', 'last_used_at'] : ['auth_tokens', 'last_seen_at']
    this.knex(table)
      .where({ id })
      .update({ [column]: new Date(now) })
      .catch(() => this.lastUsedWritten.delete(key))
  }
}
