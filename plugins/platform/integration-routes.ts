import { Type } from 'typebox'
import { MamError, User, type RegisterApi } from '../../core/index.js'
import { platformServices } from './refs.js'
import { ChatQuery, InstanceInput, InstanceSettingsInput } from './schemas.js'
import { SlackStyleChat } from './chat.js'
import { monthOf } from './traffic.js'

const TrafficConsumption = Type.Object({
  hash: Type.Object({ instance: Type.String(), month: Type.String(), bytes: Type.Integer(), by_kind: Type.Record(Type.String(), Type.Integer()), limit_bytes: Type.Integer(), exceeded: Type.Boolean() }),
})

/** §4.17 and §4.24: instance subscription, chat user names, the hosted subscription and its traffic. */
export function registerIntegrationRoutes(api: RegisterApi) {
  const { routes } = api
  const settings = api.use(platformServices.settings)
  const traffic = api.use(platformServices.traffic)
  const subscription = () => api.settings().subscription

  const show = () => {
    const s = subscription()
    const now = new Date()
    return {
      instance: s.instance,
      subscribed: s.subscribed,
      plan: s.plan,
      options: s.options,
      traffic_limit_bytes: s.traffic_limit_bytes,
      period_start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
      period_end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
    }
  }
  const change = async (ctx: any, values: Record<string, unknown>) => {
    const user = await ctx.em.findOne(User, ctx.user.userId)
    await settings().update({ platform: { subscription: values } }, ctx.user, user?.username ?? null, true)
  }

  routes.post('/instance_subscription', { access: 'admin', input: InstanceInput, wrap: 'instance_subscription', summary: 'subscribe this instance (plan, options); audited like every setting' }, async (ctx) => {
    await change(ctx, { ...ctx.input.instance_subscription, subscribed: true })
    ctx.status = 201
    return { subscription: show() }
  })

  routes.put('/instance_settings', { access: 'admin', input: InstanceSettingsInput, wrap: 'instance_settings', summary: 'unsubscribe this instance (`subscribed: false`)' }, async (ctx) => {
    await change(ctx, { subscribed: ctx.input.instance_settings.subscribed })
    return { subscription: show() }
  })

  routes.get('/subscription/show', { access: 'admin', summary: 'the hosted subscription of this instance' }, () => ({ subscription: show() }))
  routes.get('/subscription/options', { access: 'admin', summary: 'the options of the plan' }, () => ({ hash: { plan: subscription().plan, options: subscription().options } }))

  routes.get(
    '/subscription/traffic_consumption',
    {
      access: 'admin',
      summary: 'bytes served by download, proxy and share routes this calendar month (UTC), counted by the server',
      response: TrafficConsumption,
    },
    async () => {
      const s = subscription()
      const byKind = await traffic().month(s.instance)
      const bytes = byKind.download + byKind.proxy + byKind.share
      return { hash: { instance: s.instance, month: monthOf(new Date()), bytes, by_kind: byKind, limit_bytes: s.traffic_limit_bytes, exceeded: s.traffic_limit_bytes > 0 && bytes > s.traffic_limit_bytes } }
    },
  )

  routes.get('/integrations/validate_chat_username', { access: 'authenticated', input: ChatQuery, summary: 'whether the user name exists in the configured chat workspace' }, async (ctx) => {
    const { api_url, token } = api.settings().chat
    if (!api_url || !token) throw new MamError('service_unavailable', 'No chat workspace is configured (settings platform.chat.api_url and platform.chat.token)')
    const valid = await new SlackStyleChat(api_url, token).hasUser(ctx.input.username)
    return { hash: { username: ctx.input.username, valid } }
  })
}
