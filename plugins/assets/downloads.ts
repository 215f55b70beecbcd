import { BigIntType, EntitySchema } from '@mikro-orm/core'
import { BaseEntity, baseProperties, iso, User, type JobRow } from '../../core/index.js'
import { Asset } from './entities.js'

export type PackageKind = 'highres' | 'editing_proxy' | 'lowres'
export const PACKAGE_TTL_MS = 24 * 3600_000

/**
 * A prepared download (spec §3: prepare → AssetState → download with its id once finished). Nothing
 * is copied: the package job checks what the download needs (the original's CRC-32, the proxy) and
 * records its size; the download streams the original or the proxy as it is. `size` set = ready.
 */
export class AssetState extends BaseEntity {
  asset!: Asset
  user!: User
  kind!: PackageKind
  jobId: number | null = null
  size: number | null = null
  expiresAt: Date | null = null
  /** highres: the original as it was packaged; a different file on disk makes the state outdated */
  crc32: string | null = null
  sourceSize: number | null = null
  sourceMtime: Date | null = null
  /**
   * Columns of the package copies that 0003-asset-state-source retired. Mapped only so that the
   * ORM's picture of the table keeps them (dropping them would lose data of older installations):
   * lazy, never selected, never set.
   */
  declare file?: string | null
  declare purged?: boolean
}

export const AssetStateSchema = new EntitySchema<AssetState, BaseEntity>({
  class: AssetState,
  tableName: 'asset_states',
  properties: {
    ...baseProperties,
    asset: { kind: 'm:1', entity: () => Asset, deleteRule: 'cascade', index: true },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade', index: true },
    kind: { type: 'string', length: 20 },
    jobId: { type: 'integer', nullable: true },
    size: { type: 'double', nullable: true },
    expiresAt: { type: 'Date', nullable: true },
    crc32: { type: 'string', length: 8, nullable: true },
    sourceSize: { type: new BigIntType('number'), nullable: true },
    sourceMtime: { type: 'Date', nullable: true },
    file: { type: 'string', length: 255, nullable: true, lazy: true, hidden: true },
    purged: { type: 'boolean', default: false, lazy: true, hidden: true },
  },
  indexes: [{ properties: ['expiresAt'] }],
})

export function serializeState(s: AssetState, job: JobRow | null) {
  const expired = s.expiresAt !== null && s.expiresAt.getTime() <= Date.now()
  return {
    id: s.id,
    asset_id: s.asset.id,
    user_id: s.user.id,
    kind: s.kind,
    job_id: s.jobId,
    state: expired ? 'expired' : (job?.state ?? 'queued'),
    progress: job?.progress ?? 0,
    error: job?.error ?? null,
    size: s.size,
    expires_at: iso(s.expiresAt),
    created_at: iso(s.createdAt),
    updated_at: iso(s.updatedAt),
  }
}
