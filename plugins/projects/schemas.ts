import { Type } from 'typebox'
import { IdParam, Nullable, Page } from '../../core/index.js'

const Name = Type.String({ minLength: 1, maxLength: 200 })
const Bytes = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
const RelPath = Type.String({ minLength: 1, maxLength: 4096 })

const ProjectFields = {
  name: Type.Optional(Name),
  templatename: Type.Optional(Name),
  template_id: Type.Optional(IdParam),
  storage: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  custom_metadata: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown())),
  description: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
  alternative_name: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
  is_library_project: Type.Optional(Type.Boolean()),
  encoding_priority: Type.Optional(Type.Integer({ minimum: -100, maximum: 100 })),
}

/** fields at the top level or nested under `project` (JSON clients send `{project: {...}}`) */
export const ProjectInput = Type.Object(
  { ...ProjectFields, project: Type.Optional(Nullable(Type.Object(ProjectFields, { additionalProperties: false }))) },
  { additionalProperties: false },
)

export const ListInput = Type.Object(
  {
    ...Page,
    name: Type.Optional(Type.String({ maxLength: 200 })),
    library: Type.Optional(Type.Boolean()),
    frozen: Type.Optional(Type.Boolean()),
    online: Type.Optional(Type.Boolean()),
    archived: Type.Optional(Type.Boolean()),
    storage: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
)

export const RenameInput = Type.Object({ name: Name }, { additionalProperties: false })
export const TemplateRefInput = Type.Object({ template_id: Type.Optional(IdParam), templatename: Type.Optional(Name) }, { additionalProperties: false })
export const CreateFolderInput = Type.Object({ path: RelPath }, { additionalProperties: false })
export const RenameFolderInput = Type.Object({ path: RelPath, name: Type.String({ minLength: 1, maxLength: 255 }) }, { additionalProperties: false })
export const MoveContentsInput = Type.Object(
  { source: Type.Union([RelPath, Type.Array(RelPath, { minItems: 1, maxItems: 1000 })]), destination: Type.String({ maxLength: 4096 }) },
  { additionalProperties: false },
)
export const QuotaInput = Type.Object({ quota: Nullable(Bytes) }, { additionalProperties: false })
export const OptionalQuotaInput = Type.Object({ quota: Type.Optional(Nullable(Bytes)) }, { additionalProperties: false })
export const EncodingPriorityInput = Type.Object(
  { project_ids: Type.Array(IdParam, { minItems: 1, maxItems: 10_000 }), encoding_priority: Type.Integer({ minimum: -100, maximum: 100 }) },
  { additionalProperties: false },
)
export const ProjectTeamParams = Type.Object({ id: IdParam, team_id: IdParam })
