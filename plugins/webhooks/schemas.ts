import { Type } from 'typebox'
import { PageInput, IdParam, OneOf } from '../../core/index.js'

const Fields = {
  url: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  events: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 200 })),
  active: Type.Optional(Type.Boolean()),
}

/** `webhook[url]`, `webhook[events][]`, `webhook[active]` */
export const WebhookInput = Type.Object({ webhook: Type.Object(Fields, { additionalProperties: false }) }, { additionalProperties: false })

export const DeliveriesInput = Type.Object({ state: Type.Optional(OneOf(['pending', 'succeeded', 'failed', 'cancelled'] as const)), ...PageInput }, { additionalProperties: false })

export const DeliveryParams = Type.Object({ id: IdParam, delivery_id: IdParam })
