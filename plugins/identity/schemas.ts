import { Type } from 'typebox'
import { Nullable, OneOf } from '../../core/index.js'

const Username = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._@-]+$' })
const Text = Type.String({ maxLength: 200 })
const Email = Type.String({ maxLength: 320, pattern: '^[^\\s@]+@[^\\s@]+$' })
export const Password = Type.String({ minLength: 8, maxLength: 1024 })
const Bytes = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })

export const UserFields = Type.Object(
  {
    username: Type.Optional(Username),
    password: Type.Optional(Password),
    current_password: Type.Optional(Type.String({ maxLength: 1024 })),
    firstname: Type.Optional(Nullable(Text)),
    lastname: Type.Optional(Nullable(Text)),
    email: Type.Optional(Nullable(Email)),
    role_id: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
)
export const UserInput = Type.Object({ user: Type.Optional(Nullable(UserFields)) }, { additionalProperties: false })

export const TeamFields = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })), quota: Type.Optional(Nullable(Bytes)) },
  { additionalProperties: false },
)
export const TeamInput = Type.Object({ team: Type.Optional(Nullable(TeamFields)) }, { additionalProperties: false })

/** per-user settings: a closed schema, so a typo is a 422 rather than a silently ignored key */
export const SettingsFields = Type.Object(
  {
    language: Type.Optional(OneOf(['en', 'de', 'fr', 'es', 'it', 'ja'])),
    timezone: Type.Optional(Type.String({ maxLength: 64, pattern: '^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$' })),
    theme: Type.Optional(OneOf(['light', 'dark', 'system'])),
    items_per_page: Type.Optional(Type.Integer({ minimum: 10, maximum: 500 })),
    default_asset_view: Type.Optional(OneOf(['list', 'grid'])),
    email_notifications: Type.Optional(Type.Boolean()),
    timecode_display: Type.Optional(OneOf(['timecode', 'frames', 'seconds'])),
  },
  { additionalProperties: false },
)
export const SettingsInput = Type.Object({ settings: SettingsFields }, { additionalProperties: false })
