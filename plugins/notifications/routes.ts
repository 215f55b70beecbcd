import { IdParams, paginate, type RegisterApi } from '../../core/index.js'
import { notificationServices } from './refs.js'
import { ListInput, SettingsInput } from './schemas.js'
import type { ChannelChange } from './service.js'

/** §4.18: the current user's notifications and settings; the defaults for administrators. */
export function registerNotificationRoutes(api: RegisterApi) {
  const { routes } = api
  const notifications = api.use(notificationServices.service)

  routes.get('/notifications', { access: 'authenticated', input: ListInput, summary: 'the current user’s notifications, newest first (unread=true: unread only; keyset paging with after)' }, async (ctx) => {
    const s = notifications()
    const rows = await paginate(ctx, s.listQuery(ctx.user.userId, ctx.input.unread), ctx.input, { orderBy: ['id'], direction: 'desc', defaultPerPage: 50 })
    ctx.set('X-Unread-Count', String(await s.unreadCount(ctx.user.userId)))
    return { notifications: rows.map((r) => s.serialize(r)) }
  })

  routes.get('/notifications/:id', { access: 'authenticated', params: IdParams, summary: 'one of the current user’s notifications' }, async (ctx) => {
    const s = notifications()
    return { notification: s.serialize(await s.get(ctx.user.userId, ctx.params.id)) }
  })

  routes.post('/notifications/:id/toggle_read', { access: 'authenticated', params: IdParams, summary: 'mark a notification read, or unread again' }, async (ctx) => {
    const s = notifications()
    return { notification: s.serialize(await s.toggleRead(ctx.user.userId, ctx.params.id)) }
  })

  routes.post('/notification/mark_all_read', { access: 'authenticated', summary: 'mark every notification of the current user read' }, async (ctx) => {
    const marked = await notifications().markAllRead(ctx.user.userId)
    return { hash: { marked_read: marked, unread: 0 } }
  })

  routes.get('/notification_settings', { access: 'authenticated', summary: 'the current user’s channels per event kind (own choice, else the default)' }, async (ctx) => {
    return { notification_settings: await notifications().settingsOf(ctx.user.userId) }
  })

  routes.put('/notification_settings', { access: 'authenticated', input: SettingsInput, summary: 'set the current user’s channels per event kind (in_app, email: off|immediately|hourly|daily; or off / default)' }, async (ctx) => {
    const s = notifications()
    await s.updateSettings(ctx.user.userId, ctx.input.notification_settings as Record<string, ChannelChange>, 'notification_settings')
    return { notification_settings: await s.settingsOf(ctx.user.userId) }
  })

  routes.get('/notification_settings/defaults', { access: 'admin', summary: 'the default channels per event kind' }, async () => {
    return { notification_settings: await notifications().settingsOf(null) }
  })

  routes.put('/notification_settings/defaults', { access: 'admin', input: SettingsInput, summary: 'set the default channels per event kind' }, async (ctx) => {
    const s = notifications()
    await s.updateSettings(null, ctx.input.notification_settings as Record<string, ChannelChange>, 'notification_settings')
    return { notification_settings: await s.settingsOf(null) }
  })
}
