import { Type } from 'typebox'
import type { RegisterApi } from '../plugin/contract.js'
import type { MamContext } from '../http/context.js'
import { ApiKey, User } from '../auth/entities.js'
import { createApiKey, serializeApiKey } from '../auth/accounts.js'
import { forbidden, invalidParam, notFound } from '../errors.js'
import { IdParam } from '../http/schemas.js'

const UserParams = Type.Object({ user_id: IdParam })
const KeyParams = Type.Object({ user_id: IdParam, id: IdParam })
const Name = Type.String({ minLength: 1, maxLength: 200 })
const CreateInput = Type.Object({ api_key: Type.Optional(Type.Object({ name: Name }, { additionalProperties: false })) }, { additionalProperties: false })

/** §4.4: a user manages their own keys, an administrator anyone's. Keys carry exactly their user's rights. */
export function registerApiKeyRoutes({ routes, events }: RegisterApi) {
  routes.get('/users/:user_id/api_keys', { access: 'authenticated', params: UserParams, summary: 'API keys of a user' }, async (ctx) => {
    const user = await keyOwner(ctx)
    const keys = await ctx.em.find(ApiKey, { user }, { orderBy: { id: 'asc' } })
    return { api_keys: keys.map((k) => serializeApiKey(k)) }
  })

  routes.post(
    '/users/:user_id/api_keys',
    { access: 'authenticated', params: UserParams, input: CreateInput, wrap: 'api_key', summary: 'create an API key; its secret is shown once' },
    async (ctx) => {
      const user = await keyOwner(ctx)
      const name = ctx.input.api_key?.name
      if (!name) throw invalidParam('api_key[name]', 'is required')
      const { key, secret } = await createApiKey(ctx.em, user, name)
      ctx.status = 201
      return { apikey: serializeApiKey(key, secret) }
    },
  )

  routes.delete('/user/:user_id/api_keys/:id', { access: 'authenticated', params: KeyParams, summary: 'delete an API key' }, async (ctx) => {
    const user = await keyOwner(ctx)
    const key = await ctx.em.findOne(ApiKey, { id: ctx.params.id, user })
    if (!key) throw notFound('API key', ctx.params.id)
    const body = { apikey: serializeApiKey(key) }
    await ctx.em.remove(key).flush()
    events.emit('auth.credential-revoked', { userId: user.id })
    return body
  })
}

async function keyOwner(ctx: MamContext): Promise<User> {
  const me = ctx.user!
  if (ctx.params.user_id !== me.userId && !me.isAdmin) throw forbidden('You may only manage your own API keys')
  const user = await ctx.em.findOne(User, ctx.params.user_id)
  if (!user) throw notFound('user', ctx.params.user_id)
  return user
}
