import crypto from 'node:crypto'
import type { Knex } from '@mikro-orm/knex'
import type { MamConfig } from '../config.js'
import type { Dialect } from '../db/orm.js'
import type { EventBus } from '../events.js'
import type { Principal } from './principal.js'
import { parseCredential, secretMatches, sha256, type CredentialKind } from './secrets.js'

/** PostgreSQL channel on which processes sharing a database tell each other to drop cached credentials */
export const AUTH_CHANNEL = 'mamkit_auth'

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
  kind: CredentialKind
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
 * for `auth.cacheTtlMs` so a request costs no database round trip. Revocation, user and role
 * changes drop the cache at once in this process and, on PostgreSQL, in every process sharing the
 * database (a NOTIFY on `AUTH_CHANNEL`, which the runtime's listener hands to `applyRemote`); on
 * SQLite other processes see them within the TTL, which is the backstop everywhere.
 */
export class AuthService {
  private readonly credentials = new Map<string, Cached<VerifiedCredential>>()
  private readonly users = new Map<number, Cached<UserSnapshot>>()
  private readonly lastUsedWritten = new Map<string, number>()
  /** per connection (a socket), the last credential it sent and its cache key */
  private readonly lastDigest = new WeakMap<object, { raw: string; key: string }>()
  /** bumped by every invalidation: a lookup that started before one must not cache what it read */
  private generation = 0

  constructor(
    private readonly knex: Knex,
    private readonly config: MamConfig,
    events: EventBus,
    private readonly dialect: Dialect = 'sqlite',
  ) {
    events.on('auth.user-changed', ({ userId }) => this.changed(`user:${userId}`))
    events.on('auth.role-changed', ({ roleId }) => this.changed(`role:${roleId}`))
    events.on('auth.credential-revoked', ({ userId }) => this.changed(`user:${userId}`))
  }

  /**
   * `authenticate` when both caches hold the answer: the Principal without a promise, so the request
   * path needs no `await` for it. Undefined when the database has to be asked (a credential not seen
   * or expired from the cache, a user snapshot expired): call `authenticate` then.
   */
  authenticateCached(raw: string, connection?: object): Principal | undefined {
    const now = Date.now()
    const cred = this.credentials.get(connection ? this.keyOnConnection(raw, connection) : cacheKeyOf(raw))
    if (!cred || cred.until < now) return undefined
    const hit = this.users.get(cred.value.userId)
    if (!hit || hit.until < now) return undefined
    this.touch(cred.value.kind, cred.value.id, now)
    return principalOf(hit.value, cred.value)
  }

  /**
   * The cache key (a digest) of a credential sent on a connection: a keep-alive client sends the
   * same one with every request, so the last digest is kept with the connection (while it is open)
   * instead of hashing again; a sha256 was ~2 % of a request that reads nothing.
   */
  private keyOnConnection(raw: string, connection: object): string {
    const last = this.lastDigest.get(connection)
    if (last !== undefined && last.raw === raw) return last.key
    const key = cacheKeyOf(raw)
    this.lastDigest.set(connection, { raw, key })
    return key
  }

  async authenticate(raw: string): Promise<Principal | null> {
    const now = Date.now()
    const cacheKey = cacheKeyOf(raw)
    let cred = this.credentials.get(cacheKey)
    if (!cred || cred.until < now) {
      const generation = this.generation
      const value = await this.verify(raw, now)
      if (!value) {
        this.credentials.delete(cacheKey)
        return null
      }
      cred = { value, until: now + this.config.auth.cacheTtlMs }
      if (generation === this.generation) this.credentials.set(cacheKey, cred)
    }
    // a cached user snapshot costs no extra await (the request path asks authenticateCached first)
    const hit = this.users.get(cred.value.userId)
    const user = hit && hit.until >= now ? hit.value : await this.snapshot(cred.value.userId, now)
    if (!user) return null
    this.touch(cred.value.kind, cred.value.id, now)
    return principalOf(user, cred.value)
  }

  private async verify(raw: string, now: number): Promise<VerifiedCredential | null> {
    const parsed = parseCredential(raw)
    if (!parsed) return null
    const row = await this.knex(tableOf(parsed.kind)).where({ id: parsed.id }).first()
    if (!row || !secretMatches(parsed.secret, row.secret_hash) || !isLive(row, now)) return null
    return { userId: Number(row.user_id), id: parsed.id, kind: parsed.kind }
  }

  /**
   * The user as a principal outside a request: a job acting for whoever queued it, with the rights
   * the user has now (a role changed or a user removed since the request counts). Null for a
   * removed user.
   */
  async principalFor(userId: number): Promise<Principal | null> {
    const user = await this.snapshot(userId)
    return user ? { ...user, via: 'job', credentialId: 0 } : null
  }

  async snapshot(userId: number, now = Date.now()): Promise<UserSnapshot | null> {
    const hit = this.users.get(userId)
    if (hit && hit.until >= now) return hit.value
    const generation = this.generation
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
    if (generation === this.generation) this.users.set(userId, { value, until: now + this.config.auth.cacheTtlMs })
    return value
  }

  /**
   * For a request that failed on a principal from the cache: is its user (or, for the core's own
   * credentials, the key or token) gone meanwhile? The caches forget the user either way, so the
   * next request asks the database.
   */
  async isGone(principal: Principal): Promise<boolean> {
    this.forget(`user:${principal.userId}`)
    if (!(await this.knex('users').where('id', principal.userId).first('id'))) return true
    if (principal.via !== 'api_key' && principal.via !== 'token') return false
    const row = await this.knex(tableOf(principal.via)).where({ id: principal.credentialId }).first()
    return !row || !isLive(row, Date.now())
  }

  /** a change made by another process, as it arrived on `AUTH_CHANNEL` */
  applyRemote(payload: string): void {
    this.forget(payload)
  }

  /** a change in this process: forget here, and tell the other processes sharing the database */
  private changed(what: string) {
    this.forget(what)
    if (this.dialect !== 'postgresql') return
    // not awaited: the request that changed something answers at once; the TTL covers a lost notification
    this.knex.raw('select pg_notify(?, ?)', [AUTH_CHANNEL, what]).catch(() => {})
  }

  /** `user:<id>`: that user's snapshot and credentials; `role:<id>`: every user snapshot; anything else (`all`): everything */
  private forget(what: string) {
    this.generation++
    if (what.startsWith('user:')) {
      const userId = Number(what.slice(5))
      this.users.delete(userId)
      for (const [key, cred] of this.credentials) if (cred.value.userId === userId) this.credentials.delete(key)
      return
    }
    this.users.clear()
    if (!what.startsWith('role:')) this.credentials.clear()
  }

  /** last_used_at / last_seen_at, written at most once a minute per credential, off the request path */
  private touch(kind: CredentialKind, id: number, now: number) {
    const key = `${kind}:${id}`
    if ((this.lastUsedWritten.get(key) ?? 0) + LAST_USED_EVERY_MS > now) return
    this.lastUsedWritten.set(key, now)
    const column = kind === 'api_key' ? 'last_used_at' : 'last_seen_at'
    this.knex(tableOf(kind))
      .where({ id })
      .update({ [column]: new Date(now) })
      .catch(() => this.lastUsedWritten.delete(key))
  }
}

const tableOf = (kind: CredentialKind) => (kind === 'api_key' ? 'api_keys' : 'auth_tokens')

/** not expired and, for login tokens, not revoked */
function isLive(row: { expires_at?: unknown; revoked_at?: unknown }, now: number): boolean {
  if (row.expires_at !== null && row.expires_at !== undefined && new Date(row.expires_at as string).getTime() <= now) return false
  return !row.revoked_at
}
