import { IdParams, paginate, created, type RegisterApi } from '../../core/index.js'
import { webhookServices } from './refs.js'
import { DeliveriesInput, DeliveryParams, WebhookInput } from './schemas.js'

/** Webhook subscriptions (administrators; not in the spec, listed in the README). */
export function registerWebhookRoutes(api: RegisterApi) {
  const { routes } = api
  const webhooks = api.use(webhookServices.service)

  routes.get('/webhooks', { access: 'admin', summary: 'webhook subscriptions' }, async () => {
    const s = webhooks()
    return { webhooks: (await s.list()).map((r: any) => s.serialize(r)) }
  })

  routes.post('/webhooks', { access: 'admin', input: WebhookInput, wrap: 'webhook', summary: 'subscribe a URL to events (webhook[url], webhook[events], webhook[active]); the answer shows the signing secret, once' }, async (ctx) => {
    const s = webhooks()
    const { row, secret } = await s.create(ctx.input.webhook as any, ctx.user.userId)
    return created(ctx, { webhook: s.serialize(row, secret) })
  })

  routes.get('/webhooks/:id', { access: 'admin', params: IdParams, summary: 'a webhook subscription' }, async (ctx) => {
    const s = webhooks()
    return { webhook: s.serialize(await s.get(ctx.params.id)) }
  })

  routes.put('/webhooks/:id', { access: 'admin', params: IdParams, input: WebhookInput, wrap: 'webhook', summary: 'change a webhook (active=true switches a disabled one on again)' }, async (ctx) => {
    const s = webhooks()
    return { webhook: s.serialize(await s.update(ctx.params.id, ctx.input.webhook)) }
  })

  routes.delete('/webhooks/:id', { access: 'admin', params: IdParams, summary: 'remove a webhook and its delivery log' }, async (ctx) => {
    const s = webhooks()
    return { webhook: s.serialize(await s.remove(ctx.params.id)) }
  })

  routes.get('/webhooks/:id/deliveries', { access: 'admin', params: IdParams, input: DeliveriesInput, summary: 'the delivery log of a webhook, newest first (state, response code, duration, attempts)' }, async (ctx) => {
    const s = webhooks()
    await s.get(ctx.params.id)
    const rows = await paginate(ctx, s.deliveriesQuery(ctx.params.id, ctx.input.state), ctx.input, { orderBy: ['id'], direction: 'desc', defaultPerPage: 50 })
    return { deliveries: rows.map((r) => s.serializeDelivery(r)) }
  })

  routes.post('/webhooks/:id/deliveries/:delivery_id/redeliver', { access: 'admin', params: DeliveryParams, summary: 'send a delivery again (a new delivery of the same event)' }, async (ctx) => {
    const s = webhooks()
    await s.get(ctx.params.id)
    return created(ctx, { delivery: s.serializeDelivery(await s.redeliver(ctx.params.id, ctx.params.delivery_id)) })
  })
}
