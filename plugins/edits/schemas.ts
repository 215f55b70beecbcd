import { Type } from 'typebox'
import { IdParam, Nullable, Page } from '../../core/index.js'

/** workstation names as Windows and SMB know them; also the edit's folder name below the mount root */
export const EditName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' })

const EditFields = {
  name: Type.Optional(EditName),
  password: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  comment: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
}

/** `edit[name]` … from forms; JSON clients send `{edit: {...}}` or the fields at the top level */
export const EditInput = Type.Object(
  { ...EditFields, edit: Type.Optional(Nullable(Type.Object(EditFields, { additionalProperties: false }))) },
  { additionalProperties: false },
)

export const EditListInput = Type.Object({ ...Page }, { additionalProperties: false })

/** an edit by name or id; forms send both as strings, so names are tried first */
const EditRef = Type.Unsafe<string | number>({ type: ['string', 'integer'], minLength: 1, maxLength: 200, minimum: 1 })

export const EditRefInput = Type.Object({ edit: Type.Optional(EditRef) }, { additionalProperties: false })

export const SubprojectInput = Type.Object({ subproject_id: IdParam, edit: Type.Optional(EditRef) }, { additionalProperties: false })
