import { Type } from 'typebox'
import { DECISIONS } from './review.js'
import { WATERMARK_POSITIONS } from './presets.js'

import { IdParam, Nullable, OneOf, PageInput } from '../../core/index.js'
const Path = Type.String({ maxLength: 1024 })
const Name = Type.String({ minLength: 1, maxLength: 255 })
// one address only: no list separators, brackets or quotes that would turn `to` into several recipients
export const Email = Type.String({ maxLength: 254, pattern: '^[^\\s@<>,;"()\\[\\]\\\\]+@[^\\s@<>,;"()\\[\\]\\\\]+\\.[^\\s@<>,;"()\\[\\]\\\\]+$' })
const Ids = Type.Array(IdParam, { maxItems: 10_000 })

export const GalleryParams = Type.Object({ id: IdParam })
export const GalleryIdParams = Type.Object({ gallery_id: IdParam })
export const AssetParams = Type.Object({ asset_id: IdParam })
export const EntryParams = Type.Object({ id: IdParam, asset_id: IdParam })
export const ShareParams = Type.Object({ id: IdParam, share_id: IdParam })

const GalleryFields = {
  name: Type.Optional(Name),
  description: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
  gallery_style_preset_id: Type.Optional(Nullable(IdParam)),
}
export const GalleryInput = Type.Object({ gallery: Type.Optional(Type.Object(GalleryFields, { additionalProperties: false })) }, { additionalProperties: false })
export const ListInput = Type.Object({ ...PageInput, query: Type.Optional(Type.String({ maxLength: 255 })) }, { additionalProperties: false })
export const AssetsInput = Type.Object({ ...PageInput, path: Type.Optional(Path), recursive: Type.Optional(Type.Boolean()) }, { additionalProperties: false })
export const CountInput = Type.Object({ path: Type.Optional(Path) }, { additionalProperties: false })
export const AddAssetsInput = Type.Object({ asset_ids: Type.Array(IdParam, { minItems: 1, maxItems: 10_000 }), path: Type.Optional(Path) }, { additionalProperties: false })
export const InjectInput = Type.Object({ path: Type.Optional(Path) }, { additionalProperties: false })
export const FolderInput = Type.Object({ path: Path }, { additionalProperties: false })
export const RenameFolderInput = Type.Object({ path: Path, name: Name }, { additionalProperties: false })
export const MoveInput = Type.Object({ source: Type.Union([Path, Type.Array(Path, { minItems: 1, maxItems: 1000 })]), destination: Type.String({ maxLength: 1024 }) }, { additionalProperties: false })
export const RenameAssetInput = Type.Object({ asset_id: IdParam, name: Name }, { additionalProperties: false })
export const MetadataInput = Type.Object(
  { custom_metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())), metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())) },
  { additionalProperties: false },
)
export const Empty = Type.Object({}, { additionalProperties: false })

const AttributeFields = {
  label: Type.Optional(Nullable(Type.String({ maxLength: 255 }))),
  color: Type.Optional(Nullable(Type.String({ maxLength: 20 }))),
  rating: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 5 }))),
  selected: Type.Optional(Type.Boolean()),
  client_note: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
}
export const BulkAttributesInput = Type.Object(
  { asset_attributes: Type.Array(Type.Object({ asset_id: IdParam, ...AttributeFields }, { additionalProperties: false }), { minItems: 1, maxItems: 10_000 }) },
  { additionalProperties: false },
)

export const ShareInput = Type.Object(
  {
    email: Email,
    expires_at: Type.Optional(Type.String({ maxLength: 40 })),
    allow_download: Type.Optional(Type.Boolean()),
    allow_approval: Type.Optional(Type.Boolean()),
    message: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  { additionalProperties: false },
)

export const ReviewRequestInput = Type.Object(
  {
    asset_ids: Type.Optional(Ids),
    paths: Type.Optional(Type.Array(Path, { maxItems: 1000 })),
    approver_ids: Type.Optional(Type.Array(IdParam, { maxItems: 100 })),
    approver_emails: Type.Optional(Type.Array(Email, { maxItems: 100 })),
    rule: Type.Optional(OneOf(['all', 'any'] as const)),
    comment: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
)
export const ForceInput = Type.Object({ asset_ids: Type.Optional(Ids), paths: Type.Optional(Type.Array(Path, { maxItems: 1000 })), comment: Type.Optional(Type.String({ maxLength: 10_000 })) }, { additionalProperties: false })
export const DecideInput = Type.Object({ gallery_id: Type.Optional(IdParam), status: OneOf(DECISIONS), comment: Type.Optional(Type.String({ maxLength: 10_000 })) }, { additionalProperties: false })
export const AssetReviewInput = Type.Object(
  { gallery_id: Type.Optional(IdParam), approver_ids: Type.Optional(Type.Array(IdParam, { maxItems: 100 })), rule: Type.Optional(OneOf(['all', 'any'] as const)), comment: Type.Optional(Type.String({ maxLength: 10_000 })) },
  { additionalProperties: false },
)
export const CancelInput = Type.Object({ gallery_id: Type.Optional(IdParam) }, { additionalProperties: false })

const Color = Type.String({ maxLength: 20, pattern: '^(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3}|[a-zA-Z]{1,20})$' })
const PresetFields = {
  name: Type.Optional(Name),
  primary_color: Type.Optional(Nullable(Color)),
  secondary_color: Type.Optional(Nullable(Color)),
  background_color: Type.Optional(Nullable(Color)),
  text_color: Type.Optional(Nullable(Color)),
  font: Type.Optional(Nullable(Type.String({ maxLength: 100, pattern: '^[A-Za-z0-9 ,\'-]+$' }))),
  watermark_text: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
  watermark_position: Type.Optional(OneOf(WATERMARK_POSITIONS)),
  watermark_opacity: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  remove_images: Type.Optional(Type.Array(OneOf(['logo', 'background_image'] as const), { maxItems: 2 })),
}
export const PresetInput = Type.Object({ gallery_style_preset: Type.Optional(Type.Object(PresetFields, { additionalProperties: false })) }, { additionalProperties: false })
