import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'

/** One event told to one user (in the list, by email, or both). Written with knex by the fan-out; read with knex by the routes. */
export class Notification extends BaseEntity {
  userId!: number
  eventId!: string
  kind!: string
  subjectType!: string
  subjectId!: number
  actorId: number | null = null
  title!: string
  payload!: string
  inApp!: boolean
  read: Opt<boolean> = false
  readAt: Date | null = null
  email: string | null = null
  emailDueAt: Date | null = null
  emailedAt: Date | null = null
}

/** a user's channels for one event kind */
export class NotificationSetting extends BaseEntity {
  userId!: number
  kind!: string
  inApp!: boolean
  email!: string
}

/** the administrators' default channels for one event kind */
export class NotificationDefault extends BaseEntity {
  kind!: string
  inApp!: boolean
  email!: string
}

export const NotificationSchema = new EntitySchema<Notification, BaseEntity>({
  class: Notification,
  tableName: 'notifications',
  properties: {
    ...baseProperties,
    userId: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'user_id', deleteRule: 'cascade', index: false },
    eventId: { type: 'string', length: 36 },
    kind: { type: 'string', length: 100 },
    subjectType: { type: 'string', length: 50 },
    subjectId: { type: 'integer' },
    actorId: { type: 'integer', nullable: true },
    title: { type: 'string', length: 500 },
    payload: { type: 'text' },
    inApp: { type: 'boolean' },
    read: { type: 'boolean', default: false },
    readAt: { type: 'Date', nullable: true },
    email: { type: 'string', length: 20, nullable: true },
    emailDueAt: { type: 'Date', nullable: true, index: true },
    emailedAt: { type: 'Date', nullable: true },
  },
  uniques: [{ properties: ['userId', 'eventId'] }],
  indexes: [{ properties: ['userId', 'inApp', 'id'] }, { properties: ['userId', 'inApp', 'read', 'id'] }],
})

export const NotificationSettingSchema = new EntitySchema<NotificationSetting, BaseEntity>({
  class: NotificationSetting,
  tableName: 'notification_settings',
  properties: {
    ...baseProperties,
    userId: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'user_id', deleteRule: 'cascade', index: false },
    kind: { type: 'string', length: 100 },
    inApp: { type: 'boolean' },
    email: { type: 'string', length: 20 },
  },
  uniques: [{ properties: ['userId', 'kind'] }],
})

export const NotificationDefaultSchema = new EntitySchema<NotificationDefault, BaseEntity>({
  class: NotificationDefault,
  tableName: 'notification_defaults',
  properties: {
    ...baseProperties,
    kind: { type: 'string', length: 100, unique: true },
    inApp: { type: 'boolean' },
    email: { type: 'string', length: 20 },
  },
})

export const notificationEntities = [NotificationSchema, NotificationSettingSchema, NotificationDefaultSchema]
