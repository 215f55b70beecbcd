import { Type } from 'typebox'
import { definePlugin, coreServices, OneOf } from '../../core/index.js'
import { notificationEntities } from './entities.js'
import { migrations } from './migrations.js'
import { registerNotificationRoutes } from './routes.js'
import { Audience } from './audience.js'
import { EMAIL_MODES, NotificationService, SEND_EMAILS_JOB, type NotificationSettingsValues } from './service.js'
import { identityServices } from '../identity/index.js'
import { notificationServices } from './refs.js'

export { notificationServices } from './refs.js'
export type { NotificationService, Channels, EmailMode } from './service.js'

const Settings = Type.Object({
  default_in_app: Type.Boolean({ default: true }),
  default_email: OneOf(EMAIL_MODES, { default: 'off' }),
  daily_digest_hour: Type.Integer({ minimum: 0, maximum: 23, default: 7 }),
})

/**
 * Notifications (§4.18): the outbox consumer that tells the users an event concerns (and who may
 * read its subject), in the app and by email (at once, or hourly/daily digests), with per-kind
 * settings over administrator defaults.
 */
export const notificationsPlugin = definePlugin({
  name: 'notifications',
  title: 'Notifications',
  version: '1.0.0',
  description: 'In-app and email notifications (immediately or as hourly/daily digests) of catalogue events, per-kind settings',
  dependsOn: ['identity'],
  entities: notificationEntities,
  migrations,
  settings: Settings,
  register(api) {
    api.provide(notificationServices.service, (resolve) => {
      const db = resolve(coreServices.db)
      return new NotificationService(db.knex, db.dialect, resolve(coreServices.events), resolve(coreServices.jobs), new Audience(db.knex), () => api.settings() as NotificationSettingsValues, api.log)
    })
    const service = api.use(notificationServices.service)
    api.jobs.define(SEND_EMAILS_JOB, {
      maxAttempts: 8,
      concurrency: 1,
      async handler(ctx) {
        return service().sendDue(ctx.resolve(identityServices.mailer), ctx.signal)
      },
    })
    registerNotificationRoutes(api)
  },
  start({ resolve }) {
    const service = resolve(notificationServices.service)
    resolve(coreServices.outbox).consume({ plugin: 'notifications', deliver: (events) => service.deliver(events).then(() => undefined) })
  },
})
