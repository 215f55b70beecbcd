import { Type } from 'typebox'
import type { RegisterApi } from '../plugin/contract.js'
import type { MamContext } from '../http/context.js'
import type { Principal } from '../auth/principal.js'
import { AuthToken, User } from '../auth/entities.js'
import { createAuthToken, userViewOfRow, USER_VIEW_COLUMNS } from '../auth/accounts.js'
import { andThen, preparedRead, type MaybePromise, type PreparedRead } from '../db/rows.js'
import { coreServices } from '../plugin/services.js'
import { verifyPassword } from '../auth/secrets.js'
import { MamError, unauthenticated } from '../errors.js'
import type { EventBus } from '../events.js'
import type { UserJson } from '../auth/user-views.js'

const COOKIE = '_auth_token'

const LoginInput = Type.Object(
  {
    login: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    /** device or application name shown in the user's session list */
    name: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
)

/** POST/GET/DELETE /session and /session/user_id: the legacy token login of wire.md. */
export function registerSessionRoutes({ routes, config, events }: RegisterApi) {
  routes.post('/session', { access: 'public', input: LoginInput, summary: 'log in with login and password' }, async (ctx) => {
    const { login, username, password, name } = ctx.input
    const who = login ?? username
    if (!who) throw new MamError('invalid_parameters', 'login is required', { errors: [{ param: 'login', message: 'is required' }] })
    const throttle = ctx.resolve(coreServices.loginThrottle)
    const keys = [`user:${who.toLowerCase()}`, `ip:${ctx.ip}`]
    throttle.check(keys)
    const user = await ctx.em.findOne(User, { username: who }, { populate: ['role'] })
    // verifyPassword spends the same time whether or not the user exists
    if (!(await verifyPassword(password, user?.passwordHash ?? null)) || !user) {
      throttle.fail(keys)
      throw unauthenticated('Invalid login or password')
    }
    throttle.succeed([keys[0]])
    const { secret } = await createAuthToken(ctx.em, user, config.auth.tokenTtlDays, name ?? null, clientApp(ctx))
    ctx.cookies.set(COOKIE, secret, { httpOnly: true, sameSite: 'lax', maxAge: config.auth.tokenTtlDays * 86_400_000, overwrite: true })
    return { authentication_token: secret, user: await ctx.resolve(coreServices.userViews).one(ctx.em, user, { userId: user.id, isAdmin: false }) }
  })

  // polled by clients: synchronous while nothing has to wait (PreparedRead.now)
  routes.get('/session', { access: 'authenticated', summary: 'the signed-in user' }, (ctx) => andThen(currentUser(ctx), (user) => ({ user })))

  routes.delete('/session', { access: 'authenticated', summary: 'log out: revoke this login token' }, async (ctx) => {
    const user = await currentUser(ctx)
    if (ctx.user.via === 'token') await revokeToken(ctx, ctx.user.credentialId, events)
    ctx.cookies.set(COOKIE, null)
    return { user }
  })

  routes.get('/session/user_id', { access: 'authenticated', summary: 'the signed-in user id' }, (ctx) => ({
    hash: { user_id: ctx.user.userId },
  }))
}

/** the signed-in user's row with its role, prepared once per knex (GET /session is polled) */
const userRows = new WeakMap<object, PreparedRead>()
const USER_ROW = `select ${USER_VIEW_COLUMNS.join(', ')} from users u join roles r on r.id = u.role_id where u.id = ?`

export function currentUser(ctx: MamContext<any, any, Principal>): MaybePromise<UserJson> {
  const knex = ctx.resolve(coreServices.knex)
  let read = userRows.get(knex)
  if (!read) userRows.set(knex, (read = preparedRead(knex, USER_ROW)))
  return andThen(read.now([ctx.user.userId]), ([row]) => {
    // deleted meanwhile, by a process whose notice has not arrived yet
    if (!row) throw unauthenticated('The signed-in user no longer exists')
    return ctx.resolve(coreServices.userViews).one(() => ctx.em, userViewOfRow(row), ctx.user)
  })
}

async function revokeToken(ctx: MamContext<any, any, Principal>, id: number, events: EventBus) {
  await ctx.em.nativeUpdate(AuthToken, { id }, { revokedAt: new Date() })
  events.emit('auth.credential-revoked', { userId: ctx.user.userId })
}

/** what kind of client opened a session: the desktop app says so (X-APP-CLIENT), others by user agent */
export function clientApp(ctx: MamContext): string | null {
  if (ctx.app_client.isApp) return ctx.app_client.edit ? `app (${ctx.app_client.edit})` : 'app'
  return ctx.get('user-agent').slice(0, 200) || null
}
