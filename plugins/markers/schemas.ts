import { Type } from 'typebox'
import { IdParam, Nullable } from '../../core/index.js'

/** a frame number from the asset's first frame, or a timecode in the asset's start timecode */
const FrameOrTimecode = Type.Union([Type.Integer({ minimum: -2147483648, maximum: 2147483647 }), Type.String({ maxLength: 20 })])

const markerFields = {
    in: Type.Optional(FrameOrTimecode),
    out: Type.Optional(FrameOrTimecode),
    text: Type.Optional(Type.String({ maxLength: 100_000 })),
    color: Type.Optional(Type.String({ maxLength: 40 })),
    guid: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
    track: Type.Optional(Nullable(Type.String({ maxLength: 40 }))),
    author: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
    rate: Type.Optional(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.String({ maxLength: 20 })])),
    parent_id: Type.Optional(Nullable(IdParam)),
}
export const MarkerFields = Type.Object(markerFields, { additionalProperties: false })

export const MarkerInputSchema = Type.Object(
  {
    ...markerFields,
    marker_description: Type.Optional(Nullable(MarkerFields)),
  },
  { additionalProperties: false },
)

export const AssetParams = Type.Object({ asset_id: IdParam })
export const MarkerParams = Type.Object({ asset_id: IdParam, id: IdParam })

export const ListInput = Type.Object(
  {
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
)

export const BulkEntry = Type.Object(
  {
    id: Type.Optional(IdParam),
    in: Type.Optional(FrameOrTimecode),
    text: Type.Optional(Type.String({ maxLength: 100_000 })),
    guid: Nullable(Type.String({ maxLength: 1000 })),
  },
  { additionalProperties: false },
)

export const BulkInput = Type.Object({ marker_descriptions: Type.Array(BulkEntry, { minItems: 1, maxItems: 10_000 }) }, { additionalProperties: false })

/** `format` is read from the query string by the route (the core keeps it out of the input) */
export const ExportInput = Type.Object({}, { additionalProperties: false })

export const PushInput = Type.Object({}, { additionalProperties: false })

export const PdfInput = Type.Object({ asset_ids: Type.Array(IdParam, { minItems: 1, maxItems: 200 }) }, { additionalProperties: false })
