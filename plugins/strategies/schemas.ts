import { Type } from 'typebox'
import { Nullable } from '../../core/index.js'
const Target = Type.Object(
  {
    endpoint: Type.Optional(Nullable(Type.String({ maxLength: 2048 }))),
    region: Type.Optional(Nullable(Type.String({ maxLength: 64 }))),
    access_key_id: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
    secret_access_key: Type.Optional(Nullable(Type.String({ maxLength: 1024 }))),
    force_path_style: Type.Optional(Type.Boolean()),
    storage_class: Type.Optional(Nullable(Type.String({ maxLength: 64 }))),
    checksum_mode: Type.Optional(Type.String({ maxLength: 20 })),
  },
  { additionalProperties: false },
)

export const StrategyFields = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    destination: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    target: Type.Optional(Nullable(Target)),
    format: Type.Optional(Type.String({ maxLength: 20 })),
    admin_only: Type.Optional(Type.Boolean()),
    includes: Type.Optional(Nullable(Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 100 }))),
    transmission_check: Type.Optional(Type.String({ maxLength: 20 })),
    enabled: Type.Optional(Type.Boolean()),
    strategy_type: Type.Optional(Type.String({ maxLength: 40 })),
    contents: Type.Optional(Type.String({ maxLength: 20 })),
    delete_project: Type.Optional(Type.Boolean()),
    keep: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000 })),
  },
  { additionalProperties: false },
)

const WrappedFields = Type.Optional(Nullable(StrategyFields))

/** `archive_strategy[name]` … from forms, `{archive_strategy: {...}}` or the fields at the top level (wrap) */
export const strategyInput = <W extends string>(wrapKey: W) =>
  Type.Object({ [wrapKey]: WrappedFields } as { [K in W]: typeof WrappedFields }, { additionalProperties: false })

/** a strategy id: an integer, or its digits as a string (forms, and JSON from some clients) */
export const StrategyRef = Type.Unsafe<number | string>({ type: ['integer', 'string'], pattern: '^[1-9][0-9]{0,9}$', minimum: 1, maximum: 2147483647 })

export const ArchiveInput = Type.Object(
  {
    strategy: Type.Optional(StrategyRef),
    archive_strategy_id: Type.Optional(StrategyRef),
    exclude_linked_files: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)

export const NoInput = Type.Object({}, { additionalProperties: false })
