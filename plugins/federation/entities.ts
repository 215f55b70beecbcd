import { BigIntType, EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'

/**
 * The federation's tables as the ORM sees them (test/core/schema-drift.test.ts keeps them equal to
 * migrations.ts). The plugin's services use knex on them inside the ORM's transaction, so the
 * replicated state and the materialised rows commit together.
 */
export class CrdtStateRow {
  id!: number
  uuid!: string
  type!: string
  originSite!: string
  ownerSite!: string
  state!: string
  checksum!: string
  bucket!: number
  localSeq!: number
  deleted: Opt<boolean> = false
  schemaV: Opt<number> = 1
  localId: number | null = null
  localValues: string | null = null
}

export class FederationSeq {
  id!: number
  n!: number
}

export class FederationSite extends BaseEntity {
  siteUuid!: string
  federationUuid: string | null = null
  name!: string
  baseUrl: string | null = null
  incarnation: Opt<number> = 1
  publicKey!: string
  privateKeySealed!: string
}

export class FederationPeer extends BaseEntity {
  siteUuid!: string
  name!: string
  baseUrl: string | null = null
  publicKey!: string
  replica: string | null = null
  status!: string
  pullOnly: Opt<boolean> = false
  introducedBy: string | null = null
  sentAckedSeq: Opt<number> = 0
  recvSeq: Opt<number> = 0
  lastRoot: string | null = null
  clockOffsetMs: number | null = null
  lastOkAt: Date | null = null
  lastError: string | null = null
}

export class FederationInvite extends BaseEntity {
  tokenId!: string
  secretSealed!: string
  name!: string
  baseUrl: string | null = null
  createdById: number | null = null
  expiresAt!: Date
  usedAt: Date | null = null
  joinerSite: string | null = null
  nonce: string | null = null
}

export class FederationTransport extends BaseEntity {
  uuid!: string
  fromSite!: string
  kind!: string
  subject: string | null = null
  contentSha256!: string
  manifest!: string
  status!: string
  error: string | null = null
  appliedAt: Date | null = null
}

const big = { type: new BigIntType('number') }

export const CrdtStateSchema = new EntitySchema<CrdtStateRow>({
  class: CrdtStateRow,
  tableName: 'federation_crdt_state',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    uuid: { type: 'string', length: 36, unique: true },
    type: { type: 'string', length: 40 },
    originSite: { type: 'string', length: 36 },
    ownerSite: { type: 'string', length: 36 },
    state: { type: 'text' },
    checksum: { type: 'string', length: 16 },
    bucket: { type: 'integer' },
    localSeq: { ...big, index: true },
    deleted: { type: 'boolean', default: false },
    schemaV: { type: 'integer', default: 1 },
    localId: { type: 'integer', nullable: true },
    localValues: { type: 'text', nullable: true },
  },
  indexes: [{ properties: ['bucket', 'uuid', 'checksum'] }, { properties: ['type', 'deleted'] }, { properties: ['type', 'localId'] }],
})

export const FederationSeqSchema = new EntitySchema<FederationSeq>({
  class: FederationSeq,
  tableName: 'federation_seq',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    n: { ...big },
  },
})

export const FederationSiteSchema = new EntitySchema<FederationSite, BaseEntity>({
  class: FederationSite,
  tableName: 'federation_site',
  properties: {
    ...baseProperties,
    siteUuid: { type: 'string', length: 36, unique: true },
    federationUuid: { type: 'string', length: 36, nullable: true },
    name: { type: 'string', length: 200 },
    baseUrl: { type: 'string', length: 500, nullable: true },
    incarnation: { type: 'integer', default: 1 },
    publicKey: { type: 'text' },
    privateKeySealed: { type: 'text', hidden: true },
  },
})

export const FederationPeerSchema = new EntitySchema<FederationPeer, BaseEntity>({
  class: FederationPeer,
  tableName: 'federation_peers',
  properties: {
    ...baseProperties,
    siteUuid: { type: 'string', length: 36, unique: true },
    name: { type: 'string', length: 200 },
    baseUrl: { type: 'string', length: 500, nullable: true },
    publicKey: { type: 'text' },
    replica: { type: 'string', length: 20, nullable: true },
    status: { type: 'string', length: 20 },
    pullOnly: { type: 'boolean', default: false },
    introducedBy: { type: 'string', length: 36, nullable: true },
    sentAckedSeq: { ...big, default: 0 },
    recvSeq: { ...big, default: 0 },
    lastRoot: { type: 'string', length: 16, nullable: true },
    clockOffsetMs: { type: 'integer', nullable: true },
    lastOkAt: { type: 'Date', nullable: true },
    lastError: { type: 'text', nullable: true },
  },
})

export const FederationInviteSchema = new EntitySchema<FederationInvite, BaseEntity>({
  class: FederationInvite,
  tableName: 'federation_invites',
  properties: {
    ...baseProperties,
    tokenId: { type: 'string', length: 32, unique: true },
    secretSealed: { type: 'text', hidden: true },
    name: { type: 'string', length: 200 },
    baseUrl: { type: 'string', length: 500, nullable: true },
    createdById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'created_by_id', nullable: true, deleteRule: 'set null', index: true },
    expiresAt: { type: 'Date' },
    usedAt: { type: 'Date', nullable: true },
    joinerSite: { type: 'string', length: 36, nullable: true },
    nonce: { type: 'string', length: 64, nullable: true },
  },
})

export const FederationTransportSchema = new EntitySchema<FederationTransport, BaseEntity>({
  class: FederationTransport,
  tableName: 'federation_transports',
  properties: {
    ...baseProperties,
    uuid: { type: 'string', length: 36, unique: true },
    fromSite: { type: 'string', length: 36 },
    kind: { type: 'string', length: 20 },
    subject: { type: 'string', length: 36, nullable: true },
    contentSha256: { type: 'string', length: 64 },
    manifest: { type: 'text' },
    status: { type: 'string', length: 20 },
    error: { type: 'text', nullable: true },
    appliedAt: { type: 'Date', nullable: true },
  },
  uniques: [{ properties: ['fromSite', 'contentSha256'] }],
})

export const federationEntities = [CrdtStateSchema, FederationSeqSchema, FederationSiteSchema, FederationPeerSchema, FederationInviteSchema, FederationTransportSchema]
