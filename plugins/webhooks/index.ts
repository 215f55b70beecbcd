import { Type } from 'typebox'
import { definePlugin, coreServices } from '../../core/index.js'
import { webhookEntities } from './entities.js'
import { migrations } from './migrations.js'
import { registerWebhookRoutes } from './routes.js'
import { DELIVER_JOB, WebhookService, type WebhookSettingsValues } from './service.js'
import { webhookServices } from './refs.js'

export { webhookServices } from './refs.js'
export { sign as signWebhook } from './service.js'
export type { WebhookService } from './service.js'

const Settings = Type.Object({
  allow_private_targets: Type.Boolean({ default: process.env.MAMKIT_WEBHOOKS_ALLOW_PRIVATE === 'true' }),
  disable_after_failures: Type.Integer({ minimum: 1, maximum: 100_000, default: 50 }),
  timeout_ms: Type.Integer({ minimum: 100, maximum: 120_000, default: 10_000 }),
  concurrency: Type.Integer({ minimum: 1, maximum: 1000, default: 64 }),
  max_age_hours: Type.Number({ minimum: 0, maximum: 168, default: 24 }),
  retry_scale: Type.Number({ minimum: 0, maximum: 100, default: 1 }),
})

/** Outgoing webhooks: catalogue events POSTed to subscribed URLs, signed like Standard Webhooks. */
export const webhooksPlugin = definePlugin({
  name: 'webhooks',
  title: 'Webhooks',
  version: '1.0.0',
  description: 'Catalogue events POSTed to subscribed URLs, signed (Standard Webhooks), retried for a day, with a delivery log',
  entities: webhookEntities,
  migrations,
  settings: Settings,
  register(api) {
    let made: WebhookService | undefined
    api.provide(webhookServices.service, (resolve) => {
      const db = resolve(coreServices.db)
      made = new WebhookService(db.knex, db.dialect, resolve(coreServices.events), resolve(coreServices.jobs), resolve(coreServices.config).secretKey, () => api.settings() as WebhookSettingsValues, api.log, resolve(coreServices.config).jobs.leaseMs)
      return made
    })
    const service = api.use(webhookServices.service)
    api.jobs.define(DELIVER_JOB, {
      maxAttempts: 1000, // each attempt's failure is the delivery's business, not the job's
      concurrency: 1,
      async handler(ctx) {
        return service().sendDue(ctx.signal)
      },
    })
    registerWebhookRoutes(api)
  },
  start({ resolve }) {
    const service = resolve(webhookServices.service)
    resolve(coreServices.outbox).consume({ plugin: 'webhooks', deliver: (events) => service.deliver(events).then(() => undefined) })
  },
})
