import { EntitySchema, type Opt } from '@mikro-orm/core'
import { Asset } from '../assets/index.js'
import { Project } from '../projects/index.js'

import { BaseEntity, baseProperties, User } from '../../core/index.js'

/*
 * The galleries tables as migration 0001-galleries creates them. The services read and write them with
 * knex (listing 10,000 entries with review status is one join and one grouped query, not a unit of
 * work); these entities are the schema's description, kept honest by test/core/schema-drift.test.ts:
 * every index, unique, foreign key rule, default and length here is one the migration makes, and
 * `index: false` on a reference says the migration gives that column no index of its own.
 */

const userRef = (fieldName: string, deleteRule: 'set null' | 'cascade', nullable = true) =>
  ({ kind: 'm:1', entity: () => User, mapToPk: true, fieldName, nullable, deleteRule, index: false }) as const

/** colours, font, watermark and images of a gallery's look; `style` and `images` are JSON documents */
export class GalleryStylePreset extends BaseEntity {
  name!: string
  style!: string
  images!: string
  createdById: number | null = null
}

export class Gallery extends BaseEntity {
  uuid!: string
  name!: string
  description: string | null = null
  galleryStylePresetId: number | null = null
  /** the hidden project holding files uploaded straight into the gallery */
  uploadsProjectId: number | null = null
  createdById: number | null = null
}

/** a virtual folder: a row, never a directory (the root '' has none) */
export class GalleryFolder extends BaseEntity {
  galleryId!: number
  path!: string
}

/** an asset shown in a gallery folder under its own name, with the gallery's attributes */
export class GalleryEntry extends BaseEntity {
  galleryId!: number
  assetId!: number
  folder!: string
  name!: string
  uploaded: Opt<boolean> = false
  label: string | null = null
  color: string | null = null
  rating: number | null = null
  selected: Opt<boolean> = false
  clientNote: string | null = null
  addedById: number | null = null
}

/** an email share or a review link; only the SHA-256 of the link's token is kept */
export class GalleryShare extends BaseEntity {
  galleryId!: number
  sharedById!: number
  email!: string
  message: string | null = null
  tokenHash!: string
  /** `share` or `review` */
  purpose!: string
  allowDownload: Opt<boolean> = false
  allowApproval: Opt<boolean> = false
  expiresAt!: Date
  revokedAt: Date | null = null
  accessCount: Opt<number> = 0
  lastAccessedAt: Date | null = null
}

export class ReviewRequest extends BaseEntity {
  galleryId!: number
  requestedById: number | null = null
  /** `all` or `any` */
  rule!: string
  comment: string | null = null
  /** open, completed, cancelled, forced, superseded */
  state!: string
  closedById: number | null = null
  closedAt: Date | null = null
}

/** one asset or one gallery folder (every asset in it, also later ones) a request covers */
export class ReviewRequestItem {
  id!: number
  requestId!: number
  assetId: number | null = null
  folder: string | null = null
}

/** a user or an email address (with its review link) asked to decide */
export class ReviewApprover extends BaseEntity {
  requestId!: number
  userId: number | null = null
  email: string | null = null
  shareId: number | null = null
}

/** an approver's decision on one asset; no row means pending */
export class ReviewStatus extends BaseEntity {
  requestId!: number
  approverId!: number
  assetId!: number
  status!: string
  comment: string | null = null
}

/** every request, decision, cancellation, supersession and force, with who did it */
export class ReviewHistory {
  id!: number
  galleryId!: number
  requestId: number | null = null
  assetId: number | null = null
  action!: string
  status: string | null = null
  comment: string | null = null
  actorUserId: number | null = null
  actorEmail: string | null = null
  createdAt: Opt<Date> = new Date()
}

/** a guest's proxy with the preset's watermark burnt in, cached per gallery, asset, kind and text */
export class GalleryWatermark extends BaseEntity {
  galleryId!: number
  assetId!: number
  kind!: string
  textHash!: string
  spec!: string
  source!: string
  /** new, pending, ready, failed */
  state!: string
  build: Opt<number> = 0
  jobId: number | null = null
  file: string | null = null
  error: string | null = null
}

export const GalleryStylePresetSchema = new EntitySchema<GalleryStylePreset, BaseEntity>({
  class: GalleryStylePreset,
  tableName: 'gallery_style_presets',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 255, unique: true },
    style: { type: 'text' },
    images: { type: 'text' },
    createdById: userRef('created_by_id', 'set null'),
  },
})

export const GallerySchema = new EntitySchema<Gallery, BaseEntity>({
  class: Gallery,
  tableName: 'galleries',
  properties: {
    ...baseProperties,
    uuid: { type: 'string', length: 36, unique: true },
    name: { type: 'string', length: 255, unique: true },
    description: { type: 'text', nullable: true },
    // a preset in use is not deleted (409); RESTRICT stops the race the service's check cannot
    galleryStylePresetId: { kind: 'm:1', entity: () => GalleryStylePreset, mapToPk: true, fieldName: 'gallery_style_preset_id', nullable: true, deleteRule: 'restrict', index: true },
    uploadsProjectId: { kind: 'm:1', entity: () => Project, mapToPk: true, fieldName: 'uploads_project_id', nullable: true, deleteRule: 'set null', index: false },
    createdById: userRef('created_by_id', 'set null'),
  },
})

export const GalleryFolderSchema = new EntitySchema<GalleryFolder, BaseEntity>({
  class: GalleryFolder,
  tableName: 'gallery_folders',
  properties: {
    ...baseProperties,
    // lookups by gallery use the unique (gallery_id, path)
    galleryId: { kind: 'm:1', entity: () => Gallery, mapToPk: true, fieldName: 'gallery_id', deleteRule: 'cascade', index: false },
    path: { type: 'string', length: 1024 },
  },
  uniques: [{ properties: ['galleryId', 'path'] }],
})

export const GalleryEntrySchema = new EntitySchema<GalleryEntry, BaseEntity>({
  class: GalleryEntry,
  tableName: 'gallery_entries',
  properties: {
    ...baseProperties,
    galleryId: { kind: 'm:1', entity: () => Gallery, mapToPk: true, fieldName: 'gallery_id', deleteRule: 'cascade', index: false },
    // removing the asset from its project removes it from every gallery
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: true },
    folder: { type: 'string', length: 1024 },
    name: { type: 'string', length: 255 },
    uploaded: { type: 'boolean', default: false },
    label: { type: 'string', length: 255, nullable: true },
    color: { type: 'string', length: 20, nullable: true },
    rating: { type: 'integer', nullable: true },
    selected: { type: 'boolean', default: false },
    clientNote: { type: 'text', nullable: true },
    addedById: userRef('added_by_id', 'set null'),
  },
  // an asset once per gallery; names unique within a folder (and the folder listing in name order)
  uniques: [{ properties: ['galleryId', 'assetId'] }, { properties: ['galleryId', 'folder', 'name'] }],
})

export const GalleryShareSchema = new EntitySchema<GalleryShare, BaseEntity>({
  class: GalleryShare,
  tableName: 'gallery_shares',
  properties: {
    ...baseProperties,
    galleryId: { kind: 'm:1', entity: () => Gallery, mapToPk: true, fieldName: 'gallery_id', deleteRule: 'cascade', index: true },
    // the hourly rate limit counts by (shared_by_id, created_at)
    sharedById: userRef('shared_by_id', 'cascade', false),
    email: { type: 'string', length: 254 },
    message: { type: 'text', nullable: true },
    tokenHash: { type: 'string', length: 64, unique: true },
    purpose: { type: 'string', length: 20 },
    allowDownload: { type: 'boolean', default: false },
    allowApproval: { type: 'boolean', default: false },
    expiresAt: { type: 'Date' },
    revokedAt: { type: 'Date', nullable: true },
    accessCount: { type: 'integer', default: 0 },
    lastAccessedAt: { type: 'Date', nullable: true },
  },
  indexes: [{ properties: ['sharedById', 'createdAt'] }],
})

export const ReviewRequestSchema = new EntitySchema<ReviewRequest, BaseEntity>({
  class: ReviewRequest,
  tableName: 'review_requests',
  properties: {
    ...baseProperties,
    galleryId: { kind: 'm:1', entity: () => Gallery, mapToPk: true, fieldName: 'gallery_id', deleteRule: 'cascade', index: false },
    requestedById: userRef('requested_by_id', 'set null'),
    rule: { type: 'string', length: 3 },
    comment: { type: 'text', nullable: true },
    state: { type: 'string', length: 12 },
    closedById: userRef('closed_by_id', 'set null'),
    closedAt: { type: 'Date', nullable: true },
  },
  // the live requests of a gallery
  indexes: [{ properties: ['galleryId', 'state'] }],
})

export const ReviewRequestItemSchema = new EntitySchema<ReviewRequestItem>({
  class: ReviewRequestItem,
  tableName: 'review_request_items',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    requestId: { kind: 'm:1', entity: () => ReviewRequest, mapToPk: true, fieldName: 'request_id', deleteRule: 'cascade', index: true },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', nullable: true, deleteRule: 'cascade', index: true },
    folder: { type: 'string', length: 1024, nullable: true },
  },
})

export const ReviewApproverSchema = new EntitySchema<ReviewApprover, BaseEntity>({
  class: ReviewApprover,
  tableName: 'review_approvers',
  properties: {
    ...baseProperties,
    // lookups by request use the uniques that lead with request_id
    requestId: { kind: 'm:1', entity: () => ReviewRequest, mapToPk: true, fieldName: 'request_id', deleteRule: 'cascade', index: false },
    userId: userRef('user_id', 'cascade'),
    email: { type: 'string', length: 254, nullable: true },
    shareId: { kind: 'm:1', entity: () => GalleryShare, mapToPk: true, fieldName: 'share_id', nullable: true, deleteRule: 'set null', index: false },
  },
  uniques: [{ properties: ['requestId', 'userId'] }, { properties: ['requestId', 'email'] }],
})

export const ReviewStatusSchema = new EntitySchema<ReviewStatus, BaseEntity>({
  class: ReviewStatus,
  tableName: 'review_statuses',
  properties: {
    ...baseProperties,
    requestId: { kind: 'm:1', entity: () => ReviewRequest, mapToPk: true, fieldName: 'request_id', deleteRule: 'cascade', index: false },
    approverId: { kind: 'm:1', entity: () => ReviewApprover, mapToPk: true, fieldName: 'approver_id', deleteRule: 'cascade', index: false },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: false },
    status: { type: 'string', length: 16 },
    comment: { type: 'text', nullable: true },
  },
  // one decision per approver and asset; the grouped status query reads by (request_id, asset_id)
  uniques: [{ properties: ['approverId', 'assetId'] }],
  indexes: [{ properties: ['requestId', 'assetId'] }],
})

export const ReviewHistorySchema = new EntitySchema<ReviewHistory>({
  class: ReviewHistory,
  tableName: 'review_history',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    galleryId: { kind: 'm:1', entity: () => Gallery, mapToPk: true, fieldName: 'gallery_id', deleteRule: 'cascade', index: false },
    requestId: { kind: 'm:1', entity: () => ReviewRequest, mapToPk: true, fieldName: 'request_id', nullable: true, deleteRule: 'set null', index: false },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', nullable: true, deleteRule: 'set null', index: false },
    action: { type: 'string', length: 20 },
    status: { type: 'string', length: 16, nullable: true },
    comment: { type: 'text', nullable: true },
    actorUserId: userRef('actor_user_id', 'set null'),
    actorEmail: { type: 'string', length: 254, nullable: true },
    createdAt: { type: 'Date', onCreate: () => new Date() },
  },
  indexes: [{ properties: ['galleryId', 'assetId'] }],
})

export const GalleryWatermarkSchema = new EntitySchema<GalleryWatermark, BaseEntity>({
  class: GalleryWatermark,
  tableName: 'gallery_watermarks',
  properties: {
    ...baseProperties,
    galleryId: { kind: 'm:1', entity: () => Gallery, mapToPk: true, fieldName: 'gallery_id', deleteRule: 'cascade', index: false },
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: true },
    kind: { type: 'string', length: 20 },
    textHash: { type: 'string', length: 64 },
    spec: { type: 'text' },
    source: { type: 'string', length: 300 },
    state: { type: 'string', length: 12 },
    build: { type: 'integer', default: 0 },
    // a job id without a foreign key: finished jobs are pruned, the cached file stays
    jobId: { type: 'integer', nullable: true },
    file: { type: 'string', length: 255, nullable: true },
    error: { type: 'text', nullable: true },
  },
  uniques: [{ properties: ['galleryId', 'assetId', 'kind', 'textHash'] }],
})

export const galleryEntities = [
  GalleryStylePresetSchema,
  GallerySchema,
  GalleryFolderSchema,
  GalleryEntrySchema,
  GalleryShareSchema,
  ReviewRequestSchema,
  ReviewRequestItemSchema,
  ReviewApproverSchema,
  ReviewStatusSchema,
  ReviewHistorySchema,
  GalleryWatermarkSchema,
]
