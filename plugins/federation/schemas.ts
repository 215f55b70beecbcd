import { Type } from '../../core/index.js'

const Uuid = Type.String({ pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' })
const Url = Type.String({ minLength: 8, maxLength: 500, pattern: '^https?://' })
const Short = (max: number) => Type.String({ minLength: 1, maxLength: max })

/** a replicated record on the wire; the state's own structure is checked by the kernel (§6.5) */
export const WireCrdtSchema = Type.Object(
  {
    uuid: Uuid,
    type: Type.String({ minLength: 1, maxLength: 40, pattern: '^[a-z][a-z0-9_]*$' }),
    origin_site: Uuid,
    owner_site: Uuid,
    state: Type.String({ minLength: 2, maxLength: 256 * 1024 }),
  },
  { additionalProperties: false },
)
export const Crdts = Type.Array(WireCrdtSchema, { maxItems: 2000 })

export const HelloSite = Type.Object(
  { uuid: Uuid, name: Short(200), base_url: Type.Union([Url, Type.Null()]), public_key: Type.String({ minLength: 40, maxLength: 200 }), replica: Type.String({ pattern: '^[0-9a-f]{6}\\.[1-9][0-9]{0,5}$' }) },
  { additionalProperties: false },
)

/** an admin's invite, or (phase hello) a joining site's hello: one path, two callers (§6.8) */
export const InitiateJoinInput = Type.Object({
  name: Type.Optional(Short(200)),
  base_url: Type.Optional(Type.Union([Url, Type.Null()])),
  phase: Type.Optional(Type.Literal('hello')),
  token_id: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{16,32}$' })),
  site: Type.Optional(HelloSite),
  nonce_j: Type.Optional(Type.String({ minLength: 16, maxLength: 64 })),
  proof: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
})

/** an admin's join with an invite, or the joining site's final signed step */
export const FinalizeJoinInput = Type.Object({
  invite: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
  name: Type.Optional(Short(200)),
  base_url: Type.Optional(Url),
  nonce_s: Type.Optional(Type.String({ minLength: 16, maxLength: 64 })),
  watermark: Type.Optional(Type.Integer({ minimum: 0 })),
  signature: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
})

export const MergeInput = Type.Object({ crdts: Crdts })

export const InitialDataQuery = Type.Object({
  cursor: Type.Optional(Type.String({ maxLength: 400 })),
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 500 }),
})

export const ManifestEntrySchema = Type.Object(
  { sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }), size: Type.Integer({ minimum: 0 }), role: Short(40), url: Url },
  { additionalProperties: false },
)
export const TransportInput = Type.Object({
  federation_transport: Type.Object(
    {
      from_site: Type.Optional(Uuid),
      kind: Type.Union([Type.Literal('bundle'), Type.Literal('media'), Type.Literal('project_transfer')]),
      subject: Type.Optional(Type.Union([Uuid, Type.Null()])),
      manifest: Type.Array(ManifestEntrySchema, { minItems: 1, maxItems: 10_000 }),
      content_sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    },
    { additionalProperties: false },
  ),
})

export const GossipPush = Type.Object({
  protocol: Type.Integer({ minimum: 1 }),
  federation: Uuid,
  from: Uuid,
  incarnation: Type.Optional(Type.String({ maxLength: 40 })),
  seq_from: Type.Optional(Type.Integer({ minimum: 0 })),
  seq_to: Type.Optional(Type.Integer({ minimum: 0 })),
  recv_seq: Type.Optional(Type.Integer({ minimum: 0 })),
  root: Type.Optional(Type.String({ pattern: '^[0-9a-f]{16}$' })),
  acks: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  crdts: Type.Array(WireCrdtSchema, { maxItems: 500 }),
})

export const GossipCompare = Type.Object({
  protocol: Type.Integer({ minimum: 1 }),
  /** 1…4: bucket roll-ups of that depth; "rows": the (uuid, checksum) rows of one node */
  level: Type.Union([Type.Integer({ minimum: 1, maximum: 4 }), Type.Literal('rows')]),
  parents: Type.Optional(Type.Array(Type.String({ pattern: '^[0-9a-f]{1,6}$' }), { maxItems: 4096 })),
  checksums: Type.Optional(Type.Record(Type.String({ pattern: '^[0-9a-f]{1,6}$' }), Type.String({ pattern: '^[0-9a-f]{16}$' }))),
  depth: Type.Optional(Type.Integer({ minimum: 1, maximum: 4 })),
  prefix: Type.Optional(Type.String({ pattern: '^[0-9a-f]{1,6}$' })),
  rows: Type.Optional(Type.Array(Type.Tuple([Uuid, Type.String({ pattern: '^[0-9a-f]{16}$' })]), { maxItems: 20_000 })),
  cursor: Type.Optional(Type.Union([Uuid, Type.Null()])),
})

export const OwnsUuidQuery = Type.Object({ uuid: Uuid })

export const SiteParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 36 }) })
export const SiteInput = Type.Object({
  site: Type.Object(
    {
      name: Type.Optional(Short(200)),
      base_url: Type.Optional(Type.Union([Url, Type.Null()])),
      pull_only: Type.Optional(Type.Boolean()),
      status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('suspended'), Type.Literal('left')])),
    },
    { additionalProperties: false },
  ),
})
