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
    name: { type: 'string', length: 200, unique: true },
    roleMatrix: { type: 'json' },
    builtin: { type: 'boolean', default: false },
  },
})

export const UserSchema = new EntitySchema<User, BaseEntity>({
  class: User,
  tableName: 'users',
  properties: {
    ...baseProperties,
    username: { type: 'string', length: 200, unique: true },
    passwordHash: { type: 'string', length: 300, nullable: true, hidden: true },
    firstname: { type: 'string', length: 200, nullable: true },
    lastname: { type: 'string', length: 200, nullable: true },
    email: { type: 'string', length: 320, nullable: true },
    role: { kind: 'm:1', entity: () => Role, index: true },
  },
})

export const ApiKeySchema = new EntitySchema<ApiKey, BaseEntity>({
  class: ApiKey,
  tableName: 'api_keys',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 200 },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    secretHash: { type: 'string', length: 64, hidden: true },
    lastUsedAt: { type: 'Date', nullable: true },
    expiresAt: { type: 'Date', nullable: true },
  },
})

export const AuthTokenSchema = new EntitySchema<AuthToken, BaseEntity>({
  class: AuthToken,
  tableName: 'auth_tokens',
  properties: {
    ...baseProperties,
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    secretHash: { type: 'string', length: 64, hidden: true },
    name: { type: 'string', length: 200, nullable: true },
    app: { type: 'string', length: 200, nullable: true },
    lastSeenAt: { type: 'Date', nullable: true },
    expiresAt: { type: 'Date' },
    revokedAt: { type: 'Date', nullable: true },
  },
})
