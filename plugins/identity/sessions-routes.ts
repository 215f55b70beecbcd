import { Type } from 'typebox'
import { IdParams, Nullable, AuthToken, User, createAuthToken, iso, notFound, clientApp, type RegisterApi, type MamContext, type Principal } from '../../core/index.js'

const SessionFields = Type.Object({ name: Type.Optional(Nullable(Type.String({ maxLength: 200 }))) }, { additionalProperties: false })
const SessionInput = Type.Object({ session: Type.Optional(Nullable(SessionFields)) }, { additionalProperties: false })

const serialize = (t: AuthToken, currentId: number | null, secret?: string) => ({
  id: t.id,
  name: t.name,
  app: t.app,
  current: t.id === currentId,
  ...(secret ? { authentication_token: secret } : {}),
  last_seen_at: iso(t.lastSeenAt),
  expires_at: iso(t.expiresAt),
  created_at: iso(t.createdAt),
  updated_at: iso(t.updatedAt),
})

/**
 * §4.23 /containers/sessions: a user's login sessions (tokens) with device/app names, last-seen
 * time and revocation. The spec's DESTROY method cannot pass Node's HTTP parser; DELETE serves it,
 * and POST with `X-HTTP-Method-Override: DESTROY` or `_method=DESTROY` reaches the same route.
 */
export function registerSessionContainerRoutes({ routes, config, events }: RegisterApi) {
  const currentId = (ctx: MamContext<any, any, Principal>) => (ctx.user.via === 'token' ? ctx.user.credentialId : null)
  const mine = async (ctx: MamContext<{ id: number }, any, Principal>) => {
    const t = await ctx.em.findOne(AuthToken, { id: ctx.params.id, user: ctx.user.userId, revokedAt: null })
    if (!t) throw notFound('session', ctx.params.id)
    return t
  }

  routes.get('/containers/sessions', { access: 'authenticated', summary: 'login sessions of the current user' }, async (ctx) => {
    const tokens = await ctx.em.find(AuthToken, { user: ctx.user.userId, revokedAt: null, expiresAt: { $gt: new Date() } }, { orderBy: { id: 'desc' }, limit: 500 })
    return { sessions: tokens.map((t) => serialize(t, currentId(ctx))) }
  })

  routes.post('/containers/sessions', { access: 'authenticated', input: SessionInput, wrap: 'session', summary: 'open a new login session (a token for another device)' }, async (ctx) => {
    const user = await ctx.em.findOneOrFail(User, ctx.user.userId)
    const name = ctx.input.session?.name ?? null
    const { token, secret } = await createAuthToken(ctx.em, user, config.auth.tokenTtlDays, name, clientApp(ctx))
    ctx.status = 201
    return { session: serialize(token, currentId(ctx), secret) }
  })

  routes.put('/containers/sessions/:id', { access: 'authenticated', params: IdParams, input: SessionInput, wrap: 'session', summary: 'rename a login session' }, async (ctx) => {
    const t = await mine(ctx)
    const name = ctx.input.session?.name
    if (name !== undefined) t.name = name
    await ctx.em.flush()
    return { session: serialize(t, currentId(ctx)) }
  })

  routes.delete('/containers/sessions/:id', { access: 'authenticated', params: IdParams, summary: 'end a login session (DESTROY)' }, async (ctx) => {
    const t = await mine(ctx)
    t.revokedAt = new Date()
    await ctx.em.flush()
    events.emit('auth.credential-revoked', { userId: ctx.user.userId })
    return { session: serialize(t, currentId(ctx)) }
  })
}
