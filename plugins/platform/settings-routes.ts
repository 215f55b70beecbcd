import { Type } from 'typebox'
import { User, paginate, type RegisterApi } from '../../core/index.js'
import { platformServices } from './refs.js'
import { serializeChange } from './settings-service.js'
import { ChangesQuery, SettingsInput } from './schemas.js'

const SettingsView = Type.Object({ settings: Type.Record(Type.String(), Type.Unknown()) })

/** §4.13: GET/PUT /settings (root key `settings`), and the audit of changes. */
export function registerSettingsRoutes(api: RegisterApi) {
  const { routes } = api
  const settings = api.use(platformServices.settings)

  routes.get('/settings', { access: 'admin', summary: "every plugin's settings, grouped by plugin (secrets masked)" }, () => ({ settings: settings().view() }))

  routes.put(
    '/settings',
    { access: 'admin', input: SettingsInput, summary: 'change settings of one or more plugins; applied at once, audited', response: SettingsView },
    async (ctx) => {
      const user = await ctx.em.findOne(User, ctx.user.userId)
      return { settings: await settings().update(ctx.input.settings, ctx.user, user?.username ?? null, ctx.typedInput) }
    },
  )

  routes.get('/settings/changes', { access: 'admin', input: ChangesQuery, summary: 'the audit of setting changes, newest first (who, when, old → new; secrets redacted)' }, async (ctx) => {
    const rows = await paginate(ctx, settings().changesQuery(ctx.input.plugin), ctx.input, { orderBy: ['id'], direction: 'desc', total: true, defaultPerPage: 50 })
    return { setting_changes: rows.map(serializeChange) }
  })
}
