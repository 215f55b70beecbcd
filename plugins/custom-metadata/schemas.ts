import { Type } from 'typebox'
import { IdParam, Nullable } from '../../core/index.js'
const Name = Type.String({ maxLength: 1000 })
const Position = Type.Integer({ minimum: -1_000_000, maximum: 1_000_000 })
/** the values hash: keys are field ids or names; a JSON list is refused by `valuesOf` with its own message */
export const ValuesHash = Type.Union([Type.Record(Type.String({ maxLength: 255 }), Type.Unknown()), Type.Array(Type.Unknown())])

const SetFields = Type.Object(
  {
    name: Type.Optional(Name),
    applies_to: Type.Optional(Type.String({ maxLength: 20 })),
    root: Type.Optional(Type.Boolean()),
    parent_id: Type.Optional(Nullable(IdParam)),
    position: Type.Optional(Position),
    project_id: Type.Optional(Nullable(IdParam)),
    asset_id: Type.Optional(Nullable(IdParam)),
  },
  { additionalProperties: false },
)
export const SetInput = Type.Object({ custom_metadata_set: Type.Optional(SetFields) }, { additionalProperties: false })

const FieldFields = Type.Object(
  {
    name: Type.Optional(Name),
    type: Type.Optional(Type.String({ maxLength: 40 })),
    custom_metadata_set_id: Type.Optional(IdParam),
    mandatory: Type.Optional(Type.Boolean()),
    maxlen: Type.Optional(Nullable(Type.Integer({ minimum: -2147483648, maximum: 2147483647 }))),
    pattern: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
    min: Type.Optional(Nullable(Type.Number())),
    max: Type.Optional(Nullable(Type.Number())),
    integer: Type.Optional(Type.Boolean()),
    position: Type.Optional(Position),
    use_in_project_name: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)
export const FieldInput = Type.Object({ custom_metadata_field: Type.Optional(FieldFields) }, { additionalProperties: false })
export const FieldListInput = Type.Object({ custom_metadata_set_id: Type.Optional(IdParam) }, { additionalProperties: false })
export const CopyInput = Type.Object(
  { custom_metadata_field: Type.Optional(Type.Object({ custom_metadata_set_id: Type.Optional(IdParam), name: Type.Optional(Name) }, { additionalProperties: false })) },
  { additionalProperties: false },
)

const OptionFields = Type.Object(
  {
    name: Type.Optional(Name),
    custom_metadata_field_id: Type.Optional(IdParam),
    custom_metadata_sub_set_id: Type.Optional(Nullable(IdParam)),
    safe_search: Type.Optional(Type.Boolean()),
    position: Type.Optional(Position),
  },
  { additionalProperties: false },
)
export const OptionInput = Type.Object({ select_field_option: Type.Optional(OptionFields) }, { additionalProperties: false })
export const OptionListInput = Type.Object({ custom_metadata_field_id: Type.Optional(IdParam) }, { additionalProperties: false })

export const ForceInput = Type.Object({ force: Type.Optional(Type.Boolean()) }, { additionalProperties: false })

const DatumFields = Type.Object(
  {
    custom_metadata_field_id: Type.Optional(IdParam),
    project_id: Type.Optional(IdParam),
    asset_id: Type.Optional(IdParam),
    value: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
)
export const DatumInput = Type.Object({ custom_metadatum: Type.Optional(DatumFields) }, { additionalProperties: false })
export const NewDatumInput = Type.Object(
  { custom_metadata_field_id: Type.Optional(IdParam), field_id: Type.Optional(IdParam), value: Type.Optional(Type.String({ maxLength: 1000 })) },
  { additionalProperties: false },
)

export const UpdateMetadataInput = Type.Object({ custom_metadata: ValuesHash }, { additionalProperties: false })
export const BULK_MAX = 10_000
export const BulkInput = Type.Object({ asset_ids: Type.Array(IdParam, { minItems: 1, maxItems: BULK_MAX }), custom_metadata: ValuesHash }, { additionalProperties: false })
