import { Type } from 'typebox'
import { Nullable, OneOf, compileSchema } from '../../core/index.js'
import { TEMPLATE_TYPE_IDS } from './types.js'

/** in characters (code points), as Ajv and PostgreSQL's varchar(200) count them */
export const NAME_MAX_LENGTH = 200

const Name = Type.String({ minLength: 1, maxLength: NAME_MAX_LENGTH, pattern: '^[^\\u0000-\\u001f\\u007f]*$' })

/**
 * `substitution_patterns` arrive in several shapes (a list of `{token, pattern}`, Rails-style
 * `substitution_patterns[substitution_pattern][token]`, lists of those); `readPatterns` takes them
 * apart and validates each element against `PatternElement`.
 */
const Patterns = Type.Unknown()

const TemplateFields = Type.Object(
  {
    name: Type.Optional(Name),
    template_type: Type.Optional(OneOf(TEMPLATE_TYPE_IDS)),
    position: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    substitution_patterns: Type.Optional(Patterns),
  },
  { additionalProperties: false },
)

export const TemplateInput = Type.Object(
  { template: Type.Optional(Nullable(TemplateFields)), substitution_patterns: Type.Optional(Patterns) },
  { additionalProperties: false },
)

export const DeleteInput = Type.Object(
  { ignore_missing_directory: Type.Boolean({ default: false }) },
  { additionalProperties: false },
)

export const PatternElement = compileSchema(
  Type.Object(
    { token: Type.String({ minLength: 1, maxLength: 200 }), pattern: Type.String({ maxLength: 1000 }) },
    { additionalProperties: false },
  ),
)
