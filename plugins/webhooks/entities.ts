import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'

/** An outgoing webhook subscription; read and written with knex by the service (the entity describes the table). */
export class Webhook extends BaseEntity {
  url!: string
  events!: string
  secret!: string
  active: Opt<boolean> = true
  consecutiveFailures: Opt<number> = 0
  disabledReason: string | null = null
  createdById: number | null = null
}

export class WebhookDelivery extends BaseEntity {
  webhook!: Webhook
  eventId!: string
  dedupKey!: string
  eventName!: string
  body!: string
  state!: string
  attempts: Opt<number> = 0
  responseCode: number | null = null
  durationMs: number | null = null
  error: string | null = null
  nextAttemptAt: Date | null = null
  firstAttemptAt: Date | null = null
  lastAttemptAt: Date | null = null
  redeliveryOf: number | null = null
  lockedBy: string | null = null
  leaseUntil: Date | null = null
}

export const WebhookSchema = new EntitySchema<Webhook, BaseEntity>({
  class: Webhook,
  tableName: 'webhooks',
  properties: {
    ...baseProperties,
    url: { type: 'string', length: 2000 },
    events: { type: 'text' },
    secret: { type: 'text' },
    active: { type: 'boolean', default: true },
    consecutiveFailures: { type: 'integer', default: 0 },
    disabledReason: { type: 'string', length: 500, nullable: true },
    createdById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'created_by_id', nullable: true, deleteRule: 'set null', index: true },
  },
})

export const WebhookDeliverySchema = new EntitySchema<WebhookDelivery, BaseEntity>({
  class: WebhookDelivery,
  tableName: 'webhook_deliveries',
  properties: {
    ...baseProperties,
    webhook: { kind: 'm:1', entity: () => Webhook, deleteRule: 'cascade', index: false },
    eventId: { type: 'string', length: 36 },
    dedupKey: { type: 'string', length: 80 },
    eventName: { type: 'string', length: 100 },
    body: { type: 'text' },
    state: { type: 'string', length: 20 },
    attempts: { type: 'integer', default: 0 },
    responseCode: { type: 'integer', nullable: true },
    durationMs: { type: 'integer', nullable: true },
    error: { type: 'text', nullable: true },
    nextAttemptAt: { type: 'Date', nullable: true, index: true },
    firstAttemptAt: { type: 'Date', nullable: true },
    lastAttemptAt: { type: 'Date', nullable: true },
    redeliveryOf: { type: 'integer', nullable: true },
    lockedBy: { type: 'string', length: 100, nullable: true },
    leaseUntil: { type: 'Date', nullable: true },
  },
  uniques: [{ properties: ['webhook', 'dedupKey'] }],
  indexes: [{ properties: ['webhook', 'id'] }],
})

export const webhookEntities = [WebhookSchema, WebhookDeliverySchema]
