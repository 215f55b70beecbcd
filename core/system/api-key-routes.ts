import { Type } from 'typebox'
import type { RegisterApi } from '../plugin/contract.js'
import type { MamContext } from '../http/context.js'
import { ApiKey, User } from '../auth/entities.js'
import { createApiKey, serializeApiKey } from '../auth/accounts.js'
import { forbidden, invalidParam, notFound } from '../errors.js'
import { IdParam } from '../http/schemas.js'
import { column, preparedRead, type PreparedRead } from '../db/rows.js'
import { coreServices } from '../plugin/services.js'

const UserParams = Type.Object({ user_id: IdParam })
const KeyParams = Type.Object({ user_id: IdParam, id: IdParam })
const Name = Type.String({ minLength: 1, maxLength: 200 })
const CreateInput = Type.Object({ api_key: Type.Optional(Type.Object({ name: Name }, { additionalProperties: false })) }, { additionalProperties: false })

/** §4.4: a user manages their own keys, an administrator anyone's. Keys carry exactly their user's rights. */
export function registerApiKeyRoutes({ routes, events }: RegisterApi) {
  routes.get('/users/:user_id/api_keys', { access: 'authenticated', params: UserParams, summary: 'API keys of a user' }, async (ctx) => {
    mayManageKeysOf(ctx)
    return { api_keys: await apiKeysOf(ctx, ctx.params.user_id) }
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

function mayManageKeysOf(ctx: MamContext): void {
  const me = ctx.user!
  if (ctx.params.user_id !== me.userId && !me.isAdmin) throw forbidden('You may only manage your own API keys')
}

async function keyOwner(ctx: MamContext): Promise<User> {
  mayManageKeysOf(ctx)
  const user = await ctx.em.findOne(User, ctx.params.user_id)
  if (!user) throw notFound('user', ctx.params.user_id)
  return user
}

/** the user's row joined to its keys (none: one row of nulls; no row: no such user), prepared once per knex */
const keyRows = new WeakMap<object, PreparedRead>()
const KEY_ROWS =
  'select u.id as user_id, k.id, k.name, k.last_used_at, k.expires_at, k.created_at, k.updated_at from users u left join api_keys k on k.user_id = u.id where u.id = ? order by k.id'

/** a user's API keys as JSON from plain rows: the list is read by key-management screens, no entities needed */
async function apiKeysOf(ctx: MamContext, userId: number) {
  const knex = ctx.resolve(coreServices.knex)
  let read = keyRows.get(knex)
  if (!read) keyRows.set(knex, (read = preparedRead(knex, KEY_ROWS)))
  const rows = await read([userId])
  if (rows.length === 0) throw notFound('user', userId)
  return rows
    .filter((r) => r.id !== null)
    .map((r) =>
      serializeApiKey({
        id: column.int(r.id),
        name: r.name,
        user: { id: column.int(r.user_id) },
        lastUsedAt: column.date(r.last_used_at),
        expiresAt: column.date(r.expires_at),
        createdAt: column.date(r.created_at)!,
        updatedAt: column.date(r.updated_at)!,
      }),
    )
}
