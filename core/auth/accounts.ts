import type { EntityManager } from '../db/orm.js'
import { iso } from '../db/entity.js'
import { column } from '../db/rows.js'
import { conflict, invalidParam, notFound } from '../errors.js'
import { ApiKey, AuthToken, Role, User } from './entities.js'
import { formatCredential, hashPassword, newSecret } from './secrets.js'

export const ADMIN_ROLE = 'Administrator'
export const USER_ROLE = 'User'

/** The two roles every installation has from its first start. */
export async function ensureBuiltinRoles(em: EntityManager): Promise<void> {
  for (const [name, roleMatrix] of [
    [ADMIN_ROLE, { admin: true }],
    [USER_ROLE, {}],
  ] as const) {
    if (await em.count(Role, { name })) continue
    em.create(Role, { name, roleMatrix: { ...roleMatrix }, builtin: true })
  }
  await em.flush()
}

export function checkPassword(password: string, param = 'password'): void {
  if (typeof password !== 'string' || password.length < 8) throw invalidParam(param, 'must be at least 8 characters')
  if (password.length > 1024) throw invalidParam(param, 'must be at most 1024 characters')
}

export async function createUser(
  em: EntityManager,
  input: { username: string; password?: string | null; admin?: boolean; roleId?: number; firstname?: string | null; lastname?: string | null; email?: string | null },
): Promise<User> {
  if (!/^[A-Za-z0-9._@-]{1,100}$/.test(input.username))
    throw invalidParam('username', 'must be 1 to 100 letters, digits or . _ @ -')
  if (await em.count(User, { username: input.username })) throw conflict(`The username "${input.username}" is taken`)
  if (input.password != null) checkPassword(input.password)
  const role = input.roleId
    ? await em.findOne(Role, input.roleId)
    : await em.findOne(Role, { name: input.admin ? ADMIN_ROLE : USER_ROLE })
  if (!role) throw input.roleId ? invalidParam('role_id', 'is not a known role') : notFound('role', input.admin ? ADMIN_ROLE : USER_ROLE)
  const user = em.create(User, {
    username: input.username,
    passwordHash: input.password != null ? await hashPassword(input.password) : null,
    firstname: input.firstname ?? null,
    lastname: input.lastname ?? null,
    email: input.email ?? null,
    role,
  })
  await em.flush()
  return user
}

export async function createApiKey(em: EntityManager, user: User, name: string): Promise<{ key: ApiKey; secret: string }> {
  const { secret, hash } = newSecret()
  const key = em.create(ApiKey, { name, user, secretHash: hash })
  await em.flush()
  return { key, secret: formatCredential('api_key', key.id, secret) }
}

export async function createAuthToken(em: EntityManager, user: User, ttlDays: number, name: string | null = null, app: string | null = null) {
  const { secret, hash } = newSecret()
  const token = em.create(AuthToken, { user, secretHash: hash, name, app, expiresAt: new Date(Date.now() + ttlDays * 86_400_000) })
  await em.flush()
  return { token, secret: formatCredential('token', token.id, secret) }
}

/** Ends a user's login sessions (API keys stay), all but `keepTokenId`; how many ended. */
export async function endLoginSessions(em: EntityManager, userId: number, keepTokenId?: number): Promise<number> {
  const where = keepTokenId === undefined ? { user: userId, revokedAt: null } : { user: userId, revokedAt: null, id: { $ne: keepTokenId } }
  return em.nativeUpdate(AuthToken, where, { revokedAt: new Date() })
}

/** What a user's JSON is made of: an entity, or a row read without the ORM (GET /session). */
export type UserView = Pick<User, 'id' | 'username' | 'firstname' | 'lastname' | 'email' | 'createdAt' | 'updatedAt'> & { role: { id: number; name: string } }

/** the columns `userViewOfRow` reads, from `users u join roles r on r.id = u.role_id` */
export const USER_VIEW_COLUMNS = ['u.id', 'u.username', 'u.firstname', 'u.lastname', 'u.email', 'u.created_at', 'u.updated_at', 'r.id as role_id', 'r.name as role_name']

/** a plain row of USER_VIEW_COLUMNS as a UserView (GET /session, GET /users: no entities) */
export function userViewOfRow(row: Record<string, any>): UserView {
  return {
    id: Number(row.id),
    username: row.username,
    firstname: row.firstname,
    lastname: row.lastname,
    email: row.email,
    role: { id: Number(row.role_id), name: row.role_name },
    createdAt: column.date(row.created_at)!,
    updatedAt: column.date(row.updated_at)!,
  }
}

export function serializeUser(user: UserView) {
  return {
    id: user.id,
    username: user.username,
    firstname: user.firstname,
    lastname: user.lastname,
    email: user.email,
    role_id: user.role.id,
    role: user.role.name,
    created_at: iso(user.createdAt),
    updated_at: iso(user.updatedAt),
  }
}

/** what an API key's JSON is made of: the entity, or a plain row (GET /users/:user_id/api_keys) */
export type ApiKeyFields = Pick<ApiKey, 'id' | 'name' | 'lastUsedAt' | 'expiresAt' | 'createdAt' | 'updatedAt'> & { user: { id: number } }

export function serializeApiKey(key: ApiKeyFields, secret?: string) {
  return {
    id: key.id,
    name: key.name,
    ...(secret ? { key: secret } : {}),
    user_id: key.user.id,
    last_used_at: iso(key.lastUsedAt),
    expires_at: iso(key.expiresAt),
    created_at: iso(key.createdAt),
    updated_at: iso(key.updatedAt),
  }
}
