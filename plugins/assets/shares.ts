import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, iso, User } from '../../core/index.js'
import { Asset } from './entities.js'

/**
 * An asset shared through an email address: the recipient plays the low-res proxy through a public
 * link until it expires or is revoked. Only the SHA-256 of the link's token is stored, so a copy of
 * the database opens no link.
 */
export class AssetShare extends BaseEntity {
  asset!: Asset
  sharedBy!: User
  email!: string
  message: string | null = null
  tokenHash!: string
  expiresAt!: Date
  revokedAt: Date | null = null
  accessCount: Opt<number> = 0
  lastAccessedAt: Date | null = null
}

export const AssetShareSchema = new EntitySchema<AssetShare, BaseEntity>({
  class: AssetShare,
  tableName: 'asset_shares',
  properties: {
    ...baseProperties,
    // lookups by asset use the index (asset_id, created_at)
    asset: { kind: 'm:1', entity: () => Asset, deleteRule: 'cascade', index: false },
    sharedBy: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    email: { type: 'string', length: 254 },
    message: { type: 'text', nullable: true },
    tokenHash: { type: 'string', length: 64, unique: true },
    expiresAt: { type: 'Date' },
    revokedAt: { type: 'Date', nullable: true },
    accessCount: { type: 'integer', default: 0 },
    lastAccessedAt: { type: 'Date', nullable: true },
  },
  // GET /assets/:id/shares lists by asset, newest first
  indexes: [{ properties: ['asset', 'createdAt'] }],
})

/** `asset_share` JSON: never the token nor its hash (SECURITY.md API3) */
export function serializeShare(s: AssetShare) {
  return {
    id: s.id,
    asset_id: s.asset.id,
    email: s.email,
    message: s.message,
    expires_at: iso(s.expiresAt),
    revoked_at: iso(s.revokedAt),
    shared_by: { id: s.sharedBy.id, username: s.sharedBy.username },
    access_count: s.accessCount,
    last_accessed_at: iso(s.lastAccessedAt),
    created_at: iso(s.createdAt),
    updated_at: iso(s.updatedAt),
  }
}
