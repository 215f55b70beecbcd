import { Type } from 'typebox'
import { PageInput, OneOf } from '../../core/index.js'
import { EMAIL_MODES } from './service.js'

export const ListInput = Type.Object({ unread: Type.Optional(Type.Boolean()), ...PageInput }, { additionalProperties: false })

const KindChannels = Type.Union([
  Type.Object({ in_app: Type.Optional(Type.Boolean()), email: Type.Optional(OneOf(EMAIL_MODES)) }, { additionalProperties: false }),
  OneOf(['off', 'default'] as const),
])

/** `notification_settings[<kind>][in_app]`, `[email]`, or the whole kind as `off` / `default` */
export const SettingsInput = Type.Object(
  { notification_settings: Type.Record(Type.String({ minLength: 1, maxLength: 100 }), KindChannels, { maxProperties: 500 }) },
  { additionalProperties: false },
)
