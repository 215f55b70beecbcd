import { Type } from 'typebox'
import { IdParam, Nullable } from '../../core/index.js'

const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '^[^\\u0000-\\u001f\\u007f]*$' })
/** `#rrggbb` */
const Color = Type.String({ pattern: '^#[0-9A-Fa-f]{6}$' })

const FlagFields = {
  name: Type.Optional(Name),
  color: Type.Optional(Color),
  position: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
}

/** `status_flag[name]`, `status_flag[color]` … or the same names at the top level */
export const StatusFlagInput = Type.Object(
  { ...FlagFields, status_flag: Type.Optional(Nullable(Type.Object(FlagFields, { additionalProperties: false }))) },
  { additionalProperties: false },
)

/** no `set`: toggle; `set=true|false`: set or clear whatever the current state */
export const ToggleInput = Type.Object({ set: Type.Optional(Type.Boolean()) }, { additionalProperties: false })

export const ProjectFlagParams = Type.Object({ id: IdParam, status_flag_id: IdParam })
