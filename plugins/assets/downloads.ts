import { createWriteStream } from 'node:fs'
import { mkdir, rename, rm, stat } from 'node:fs/promises'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import yazl from 'yazl'
import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, iso } from '../../core/db/entity.js'
import { User } from '../../core/auth/entities.js'
import type { JobRow } from '../../core/jobs/types.js'
import { Asset } from './entities.js'
import { decryptRange, plainSize } from './proxy-crypto.js'

export type PackageKind = 'highres' | 'editing_proxy' | 'lowres'
export const PACKAGE_TTL_MS = 24 * 3600_000

/** A prepared download (spec §3: prepare → AssetState → download with its id once finished). */
export class AssetState extends BaseEntity {
  asset!: Asset
  user!: User
  kind!: PackageKind
  jobId: number | null = null
  /** file name below <dataDir>/downloads once built */
  file: string | null = null
  size: number | null = null
  expiresAt: Date | null = null
  purged: Opt<boolean> = false
}

export const AssetStateSchema = new EntitySchema<AssetState, BaseEntity>({
  class: AssetState,
  tableName: 'asset_states',
  properties: {
    ...baseProperties,
    asset: { kind: 'm:1', entity: () => Asset, deleteRule: 'cascade' },
    user: { kind: 'm:1', entity: () => User, deleteRule: 'cascade' },
    kind: { type: 'string' },
    jobId: { type: 'integer', nullable: true },
    file: { type: 'string', nullable: true },
    size: { type: 'double', nullable: true },
    expiresAt: { type: 'Date', nullable: true },
    purged: { type: 'boolean' },
  },
})

export function serializeState(s: AssetState, job: JobRow | null) {
  const expired = s.expiresAt !== null && s.expiresAt.getTime() <= Date.now()
  return {
    id: s.id,
    asset_id: s.asset.id,
    user_id: s.user.id,
    kind: s.kind,
    job_id: s.jobId,
    state: expired || s.purged ? 'expired' : (job?.state ?? 'queued'),
    progress: job?.progress ?? 0,
    error: job?.error ?? null,
    size: s.size,
    expires_at: iso(s.expiresAt),
    created_at: iso(s.createdAt),
    updated_at: iso(s.updatedAt),
  }
}

/**
 * The highres package: a zip streamed to disk entry by entry (STORE: media is compressed already,
 * zip64 when needed), never held in memory; written under a temporary name and renamed when whole.
 */
export async function writeZip(target: string, entries: Array<{ file: string; name: string }>): Promise<number> {
  await mkdir(path.dirname(target), { recursive: true })
  const temp = `${target}.partial`
  const zip = new yazl.ZipFile()
  for (const e of entries) zip.addFile(e.file, e.name, { compress: false })
  zip.end()
  try {
    await pipeline(zip.outputStream, createWriteStream(temp))
    await rename(temp, target)
  } catch (err) {
    await rm(temp, { force: true })
    throw err
  }
  return (await stat(target)).size
}

/** a decrypted copy of a proxy, for a download that must be a plain file */
export async function decryptToFile(key: Buffer, encrypted: string, target: string): Promise<number> {
  await mkdir(path.dirname(target), { recursive: true })
  const temp = `${target}.partial`
  const size = await plainSize(encrypted)
  try {
    await pipeline(await decryptRange(key, encrypted, 0, Math.max(0, size - 1)), createWriteStream(temp))
    await rename(temp, target)
  } catch (err) {
    await rm(temp, { force: true })
    throw err
  }
  return size
}
