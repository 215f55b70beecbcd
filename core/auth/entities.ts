import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../db/entity.js'

export class Role extends BaseEntity {
  name!: string
  /** capability name → granted; `admin: true` is administrative privilege */
  roleMatrix: Opt<Record<string, boolean>> = {}
  /** created at first start; can be edited but not deleted */
  builtin: Opt<boolean> = false
}

export class User extends BaseEntity {
  username!: string
  /** null until an invited user sets one */
  passwordHash: string | null = null
  firstname: string | null = null
  lastname: string | null = null
  email: string | null = null
  role!: Role
}

/** `Authorization: Bearer` keys; only the SHA-256 of the secret is kept. */
export class ApiKey extends BaseEntity {
  name!: string
  user!: User
  secretHash!: string
  lastUsedAt: Date | null = null
  expiresAt: Date | null = null
}

/** Login sessions (`authentication_token`, cookie `_auth_token`); hashed like API keys. */
export class AuthToken extends BaseEntity {
  user!: User
  secretHash!: string
  name: string | null = null
  app: string | null = null
  lastSeenAt: Date | null = null
  expiresAt!: Date
  revokedAt: Date | null = null
}

export const RoleSchema = new EntitySchema<Role, BaseEntity>({
  class: Role,
  tableName: 'roles',
  properties: {
    ...baseProperties,
    name: { type: 'string', unique: true },
    roleMatrix: { type: 'json' },
    builtin: { type: 'boolean' },
  },
})

export const UserSchema = new EntitySchema<User, BaseEntity>({
  class: User,
  tableName: 'users',
  properties: {
    ...baseProperties,
    username: { type: 'string', unique: true },
    passwordHash: { type: 'string', nullable: true, hidden: true },
    firstname: { type: 'string', nullable: true },
    lastname: { type: 'string', nullable: true },
    email: { type: 'string', nullable: true },
    role: { kind: 'm:1', entity: () => Role },
  },
})

export const ApiKeySchema = new EntitySchema<ApiKey, BaseEntity>({
  class: ApiKey,
  tableName: 'api_keys',
  properties: {
    ...baseProperties,
    name: { type: 'string' },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade' },
    secretHash: { type: 'string', hidden: true },
    lastUsedAt: { type: 'Date', nullable: true },
    expiresAt: { type: 'Date', nullable: true },
  },
})

export const AuthTokenSchema = new EntitySchema<AuthToken, BaseEntity>({
  class: AuthToken,
  tableName: 'auth_tokens',
  properties: {
    ...baseProperties,
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade' },
    secretHash: { type: 'string', hidden: true },
    name: { type: 'string', nullable: true },
    app: { type: 'string', nullable: true },
    lastSeenAt: { type: 'Date', nullable: true },
    expiresAt: { type: 'Date' },
    revokedAt: { type: 'Date', nullable: true },
  },
})
