import { Type } from 'typebox'
import { IdParam, Nullable, OneOf, Page } from '../../core/index.js'

const RelPath = Type.String({ minLength: 1, maxLength: 4096 })

export const AssetUpdateInput = Type.Object(
  { asset: Type.Optional(Nullable(Type.Object({ description: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))) }, { additionalProperties: false }))), description: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))) },
  { additionalProperties: false },
)

export const ListAssetsInput = Type.Object(
  {
    ...Page,
    folder: Type.Optional(Type.String({ maxLength: 4096 })),
    recursive: Type.Optional(Type.Boolean()),
    type: Type.Optional(OneOf(['video', 'audio', 'image', 'other'])),
    online: Type.Optional(Type.Boolean()),
    /** keyset paging: the rows after this path (the `X-Next-After` of the previous page), instead of `page` */
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    /** `X-Total-Count` or not: by default on OFFSET pages (`page`) and not on keyset pages (`after`) */
    total: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)

export const CountInput = Type.Object({ folder: Type.Optional(Type.String({ maxLength: 4096 })), recursive: Type.Optional(Type.Boolean()) }, { additionalProperties: false })
export const AddAssetsInput = Type.Object({ paths: Type.Array(RelPath, { minItems: 1, maxItems: 10_000 }) }, { additionalProperties: false })
export const InjectInput = Type.Object({ path: Type.Optional(Type.String({ maxLength: 4096 })) }, { additionalProperties: false })
export const ByPathInput = Type.Object({ path: RelPath, project_id: Type.Optional(IdParam) }, { additionalProperties: false })
export const LinksInput = Type.Object({ asset_ids: Type.Array(IdParam, { minItems: 1, maxItems: 1000 }) }, { additionalProperties: false })
export const DestroyInput = Type.Object(
  { asset_ids: Type.Optional(Type.Array(IdParam, { maxItems: 10_000 })), project_id: Type.Optional(IdParam), paths: Type.Optional(Type.Array(RelPath, { maxItems: 10_000 })) },
  { additionalProperties: false },
)
export const PropertiesInput = Type.Object({ query: Type.Optional(Type.String({ maxLength: 200 })) }, { additionalProperties: false })

/** GET /projects/:id/changed_asset_metadata: an ISO date or time; without it, since the project was last used */
export const ChangedSinceInput = Type.Object({ since: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}', maxLength: 40 })) }, { additionalProperties: false })
