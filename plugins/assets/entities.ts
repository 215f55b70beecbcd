import { randomUUID } from 'node:crypto'
import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/index.js'
import { Project } from '../projects/index.js'

export type AssetType = 'video' | 'audio' | 'image' | 'other'
export type ProcessingState = 'pending' | 'processing' | 'ready' | 'failed'
/** `none`: no proxy is made for this asset (not media, or not analysable); `proxyError` says why */
export type ProxyState = ProcessingState | 'none'

/** A file in a project tree, with its technical metadata, hashes and proxies. */
export class Asset extends BaseEntity {
  uuid: Opt<string> = randomUUID()
  project!: Project
  /** relative to the project folder, `/`-separated */
  path!: string
  /** the folder part of `path` ('' at the project root), for listing by folder */
  folder!: string
  name!: string
  type: Opt<AssetType> = 'other'
  size: Opt<number> = 0
  mtime: Date | null = null
  /** file identity on its device: assets sharing it are hard links of one file */
  inode: number | null = null
  device: number | null = null
  /** false when the file vanished from storage (reindex) */
  online: Opt<boolean> = true
  analysisState: Opt<ProcessingState> = 'pending'
  proxyState: Opt<ProxyState> = 'pending'
  /** technical metadata by property name (duration, codecs, start timecode, EXIF …) */
  metadata: Opt<Record<string, unknown>> = {}
  duration: number | null = null
  description: string | null = null
  /** CRC-32 (fast, also what zip packages need) and SHA-256 (on request) of the content */
  crc32: string | null = null
  sha256: string | null = null
  hashedAt: Date | null = null
  /** per-asset proxy key, encrypted with the server key */
  proxyKeyEnc: string | null = null
  proxyVersion: Opt<number> = 0
  /** proxy files by kind (lowres, poster, thumbnails, waveform, image, audio, editing), relative to the asset's proxy folder */
  proxies: Opt<Record<string, string>> = {}
  proxyError: string | null = null
  analysisError: string | null = null
  /** when the metadata last changed (GET changed_asset_metadata) */
  metadataChangedAt: Date | null = null
}

const bigNumber = { type: new BigIntType('number') }

export const AssetSchema = new EntitySchema<Asset, BaseEntity>({
  class: Asset,
  tableName: 'assets',
  properties: {
    ...baseProperties,
    uuid: { type: 'string', length: 36, unique: true },
    // lookups by project use the indexes below, which begin with project_id
    project: { kind: 'm:1', entity: () => Project, deleteRule: 'cascade', index: false },
    path: { type: 'text' },
    folder: { type: 'text' },
    name: { type: 'text' },
    type: { type: 'string', length: 10 },
    size: { ...bigNumber, default: 0 },
    mtime: { type: 'Date', nullable: true },
    inode: { ...bigNumber, nullable: true },
    device: { ...bigNumber, nullable: true },
    online: { type: 'boolean', default: true },
    analysisState: { type: 'string', length: 12 },
    proxyState: { type: 'string', length: 12 },
    metadata: { type: 'json' },
    duration: { type: 'double', nullable: true },
    description: { type: 'text', nullable: true },
    crc32: { type: 'string', length: 8, nullable: true },
    sha256: { type: 'string', length: 64, nullable: true },
    hashedAt: { type: 'Date', nullable: true },
    proxyKeyEnc: { type: 'text', nullable: true, hidden: true },
    proxyVersion: { type: 'integer', default: 0 },
    proxies: { type: 'json' },
    proxyError: { type: 'text', nullable: true },
    analysisError: { type: 'text', nullable: true },
    metadataChangedAt: { type: 'Date', nullable: true },
  },
  indexes: [
    // listing a folder of a project in name order is the hot read (GET /projects/:id/assets)
    { properties: ['project', 'folder', 'name'] },
    { properties: ['sha256'] },
    { properties: ['inode', 'device'] },
  ],
  uniques: [{ properties: ['project', 'path'] }],
})
