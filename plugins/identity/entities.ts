import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'

/** A group of users; access rights are granted to teams. Every user also has an own team. */
export class Team extends BaseEntity {
  name!: string
  /** bytes; null: no limit */
  quota: number | null = null
  quotaMailSent: Opt<boolean> = false
  /** bytes used by the projects the team can write, kept up to date by the projects plugin */
  spaceUsed: Opt<number> = 0
  /** set for a user's own team */
  owner: User | null = null
}

export class TeamMembership {
  id!: number
  team!: Team
  user!: User
  createdAt: Opt<Date> = new Date()
}

/** read/write of one team on one object (a project, gallery or preditor sequence …) */
export class AccessRight extends BaseEntity {
  team!: Team
  objectType!: string
  objectId!: number
  read: Opt<boolean> = true
  write: Opt<boolean> = false
}

export class UserSettings {
  user!: User
  settings: Opt<Record<string, unknown>> = {}
  backgroundFile: string | null = null
  updatedAt: Opt<Date> = new Date()
}

/** single-use, expiring link sent by POST /users/invite; only its hash is kept */
export class Invitation extends BaseEntity {
  user!: User
  tokenHash!: string
  expiresAt!: Date
  acceptedAt: Date | null = null
}

/** PKCE login for the desktop app: a signed-in user registers a challenge, the app exchanges the verifier */
export class ProofKey extends BaseEntity {
  user!: User
  codeChallenge!: string
  expiresAt!: Date
  usedAt: Date | null = null
}

const bytes = { type: new BigIntType('number') }

export const TeamSchema = new EntitySchema<Team, BaseEntity>({
  class: Team,
  tableName: 'teams',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 200, unique: true },
    quota: { ...bytes, nullable: true },
    quotaMailSent: { type: 'boolean', default: false },
    spaceUsed: { ...bytes, default: 0 },
    // one own team per user; the unique index also serves lookups by owner
    owner: { kind: 'm:1', entity: () => User, nullable: true, deleteRule: 'cascade', unique: true, index: false },
  },
})

export const TeamMembershipSchema = new EntitySchema<TeamMembership>({
  class: TeamMembership,
  tableName: 'team_memberships',
  properties: {
    id: { type: 'integer', primary: true },
    // lookups by team use the unique index (team_id, user_id)
    team: { kind: 'm:1', entity: () => Team, deleteRule: 'cascade', index: false },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
  uniques: [{ properties: ['team', 'user'] }],
})

export const AccessRightSchema = new EntitySchema<AccessRight, BaseEntity>({
  class: AccessRight,
  tableName: 'access_rights',
  properties: {
    ...baseProperties,
    team: { kind: 'm:1', entity: () => Team, deleteRule: 'cascade', index: true },
    objectType: { type: 'string', length: 50 },
    objectId: { type: 'integer' },
    read: { type: 'boolean' },
    write: { type: 'boolean' },
  },
  uniques: [{ properties: ['objectType', 'objectId', 'team'] }],
})

export const UserSettingsSchema = new EntitySchema<UserSettings>({
  class: UserSettings,
  tableName: 'user_settings',
  properties: {
    user: { kind: '1:1', entity: () => User, primary: true, owner: true, deleteRule: 'cascade' },
    settings: { type: 'json' },
    backgroundFile: { type: 'string', length: 300, nullable: true },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
})

export const InvitationSchema = new EntitySchema<Invitation, BaseEntity>({
  class: Invitation,
  tableName: 'invitations',
  properties: {
    ...baseProperties,
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    tokenHash: { type: 'string', length: 64, unique: true },
    expiresAt: { type: 'Date' },
    acceptedAt: { type: 'Date', nullable: true },
  },
})

export const ProofKeySchema = new EntitySchema<ProofKey, BaseEntity>({
  class: ProofKey,
  tableName: 'proof_keys',
  properties: {
    ...baseProperties,
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    codeChallenge: { type: 'string', length: 128, unique: true },
    expiresAt: { type: 'Date' },
    usedAt: { type: 'Date', nullable: true },
  },
})

export const identityEntities = [TeamSchema, TeamMembershipSchema, AccessRightSchema, UserSettingsSchema, InvitationSchema, ProofKeySchema]
