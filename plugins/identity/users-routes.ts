import { randomBytes } from 'node:crypto'
import { IdParams, Page, Role, User, USER_VIEW_COLUMNS, coreServices, pageTotal, userViewOfRow, createUser, endLoginSessions, hashPassword, sha256, verifyPassword, conflict, forbidden, invalid, invalidParam, notFound, type EntityManager, type RegisterApi, type MamContext, type ParamError } from '../../core/index.js'
import { userInvited } from './events.js'
import { Type } from 'typebox'
import { Invitation } from './entities.js'
import { Password, UserInput } from './schemas.js'
import { identityServices } from './refs.js'

const INVITATION_DAYS = 7
const ListInput = Type.Object(Page, { additionalProperties: false })
const AcceptInput = Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }), password: Password }, { additionalProperties: false })

export async function findUser(ctx: MamContext, id: number): Promise<User> {
  const user = await ctx.em.findOne(User, id, { populate: ['role'] })
  if (!user) throw notFound('user', id)
  return user
}

/** a user as the caller may see them (others' emails: administrators only) */
const view = (ctx: MamContext, user: User) => ctx.resolve(coreServices.userViews).one(ctx.em, user, ctx.user ?? { userId: user.id, isAdmin: false })

/** §4.25 users, POST /users/invite, and POST /invitations/accept (added: sets an invited user's password). */
export function registerUserRoutes({ routes, events }: RegisterApi) {
  const changed = (userId: number) => events.emit('auth.user-changed', { userId })

  routes.get('/users', { access: 'authenticated', input: ListInput, summary: 'list users' }, async (ctx) => {
    const perPage = ctx.input.per_page ?? 100
    const offset = ((ctx.input.page ?? 1) - 1) * perPage
    // plain rows: the list is read by user pickers and admin screens, a page of entities cost ~18 ms (route sweep)
    const knex = ctx.resolve(coreServices.knex)
    const rows = await knex('users as u').join('roles as r', 'r.id', 'u.role_id').orderBy('u.username').limit(perPage).offset(offset).select(USER_VIEW_COLUMNS)
    const total = await pageTotal(offset, perPage, rows.length, async () => Number((await knex('users').count({ n: '*' }))[0].n))
    ctx.set('X-Total-Count', String(total))
    return { users: await ctx.resolve(coreServices.userViews).render(() => ctx.em, rows.map(userViewOfRow), ctx.user) }
  })

  routes.get('/users/:id', { access: 'authenticated', params: IdParams, summary: 'show a user' }, async (ctx) => ({ user: await view(ctx, await findUser(ctx, ctx.params.id)) }))

  routes.post('/users', { access: 'admin', input: UserInput, wrap: 'user', summary: 'create a user' }, async (ctx) => {
    const fields = required(ctx.input.user, ['username', 'password'])
    await assertAccountAvailable(ctx.em, fields)
    const user = await ctx.em.transactional(async (em) => {
      await ctx.resolve(identityServices.userLimits).check(em)
      return createUser(em, accountOf(fields))
    })
    await ctx.resolve(identityServices.teams).ensureOwnTeam(ctx.em, user)
    ctx.status = 201
    return { user: await view(ctx, user) }
  })

  routes.put('/users/:id', { access: 'authenticated', params: IdParams, input: UserInput, wrap: 'user', summary: 'update a user (self: own profile and password; admin: everything)' }, async (ctx) => {
    const me = ctx.user
    const user = await findUser(ctx, ctx.params.id)
    if (user.id !== me.userId && !me.isAdmin) throw forbidden('You may only change your own profile')
    const fields = ctx.input.user ?? {}
    // property-level authorisation: nobody raises their own privileges (SECURITY.md API3)
    if (!me.isAdmin && (fields.role_id !== undefined || fields.username !== undefined))
      throw forbidden('Only administrators change usernames and roles')
    if (fields.password !== undefined && !me.isAdmin) {
      if (!(await verifyPassword(fields.current_password ?? '', user.passwordHash))) throw invalidParam('user[current_password]', 'does not match your password')
    }
    if (fields.username !== undefined && fields.username !== user.username) {
      if (await ctx.em.count(User, { username: fields.username })) throw conflict(`The username "${fields.username}" is taken`)
      user.username = fields.username
    }
    if (fields.role_id !== undefined && fields.role_id !== user.role.id) {
      const role = await ctx.em.findOne(Role, fields.role_id)
      if (!role) throw invalidParam('user[role_id]', 'is not a known role')
      if (user.role.roleMatrix.admin === true && role.roleMatrix.admin !== true) await assertNotLastAdmin(ctx, user)
      user.role = role
    }
    for (const key of ['firstname', 'lastname', 'email'] as const) if (fields[key] !== undefined) user[key] = fields[key]
    if (fields.password !== undefined) {
      user.passwordHash = await hashPassword(fields.password)
      // a new password ends every other login session of the user (whoever may know the old one); API keys stay.
      // Ended first: should the write below fail, the user is logged out, not left with sessions of a password they changed
      await endLoginSessions(ctx.em, user.id, me.userId === user.id && me.via === 'token' ? me.credentialId : undefined)
    }
    await ctx.em.flush()
    changed(user.id)
    return { user: await view(ctx, user) }
  })

  routes.delete('/users/:id', { access: 'admin', params: IdParams, summary: 'delete a user with their keys, tokens and own team' }, async (ctx) => {
    const user = await findUser(ctx, ctx.params.id)
    if (user.role.roleMatrix.admin === true) await assertNotLastAdmin(ctx, user)
    const body = { user: await view(ctx, user) }
    await ctx.em.remove(user).flush()
    changed(user.id)
    return body
  })

  routes.post('/users/invite', { access: 'admin', input: UserInput, wrap: 'user', summary: 'create a user without a password and email an invitation' }, async (ctx) => {
    const fields = required(ctx.input.user, ['username', 'email'])
    if (fields.password !== undefined) throw invalidParam('user[password]', 'is set by the invited user')
    // what the client can correct comes first: a 503 only once the invitation itself is valid
    await assertAccountAvailable(ctx.em, fields)
    const mailer = ctx.resolve(identityServices.mailer)
    mailer.assertConfigured()
    const token = randomBytes(32).toString('base64url')
    const user = await ctx.em.transactional(async (em) => {
      await ctx.resolve(identityServices.userLimits).check(em)
      const u = await createUser(em, { ...accountOf(fields), password: null })
      em.create(Invitation, { user: u, tokenHash: sha256(token), expiresAt: new Date(Date.now() + INVITATION_DAYS * 86_400_000) })
      await em.flush()
      await ctx.resolve(coreServices.outbox).publish(em, userInvited, { user_id: u.id, username: u.username }, { subjectId: u.id, actorId: ctx.user.userId })
      return u
    })
    await ctx.resolve(identityServices.teams).ensureOwnTeam(ctx.em, user)
    const link = `${mailer.settings.publicUrl}/api/v1/invitations/accept?token=${token}`
    try {
      await mailer.send({
        to: fields.email,
        subject: 'You are invited to mamkit',
        text: `Hello ${fields.firstname ?? user.username},\n\nan account "${user.username}" was created for you. Choose your password within ${INVITATION_DAYS} days:\n\n  POST ${link}\n  with the parameter password\n\nInvitation token: ${token}\n`,
      })
    } catch (err) {
      await ctx.em.remove(user).flush() // nobody can accept an invitation that never arrived
      throw err
    }
    ctx.status = 201
    return { user: await view(ctx, user) }
  })

  routes.post('/invitations/accept', { access: 'public', input: AcceptInput, summary: 'accept an invitation: set the password (single use, expires)' }, async (ctx) => {
    const invitation = await ctx.em.findOne(Invitation, { tokenHash: sha256(ctx.input.token) }, { populate: ['user', 'user.role'] })
    if (!invitation || invitation.acceptedAt || invitation.expiresAt.getTime() < Date.now())
      throw invalidParam('token', 'is unknown, used or expired')
    invitation.acceptedAt = new Date()
    invitation.user.passwordHash = await hashPassword(ctx.input.password)
    await ctx.em.flush()
    return { user: await view(ctx, invitation.user) }
  })
}

const accountOf = (f: Record<string, any>) => ({
  username: f.username as string,
  password: f.password as string | undefined,
  firstname: f.firstname,
  lastname: f.lastname,
  email: f.email,
  roleId: f.role_id as number | undefined,
})

function required(fields: Record<string, any> | null | undefined, names: string[]) {
  const f = fields ?? {}
  const errors: ParamError[] = names.filter((n) => f[n] === undefined || f[n] === null).map((n) => ({ param: `user[${n}]`, message: 'is required' }))
  if (errors.length) throw invalid(errors)
  return f as Record<string, any>
}

/**
 * 409 for a username that is taken, 422 (`user[role_id]`) for a role that does not exist: checked
 * before anything else can refuse the request (the mail server, 503), so the client hears first
 * what it can correct. `createUser` checks again in the transaction that writes the account.
 */
async function assertAccountAvailable(em: EntityManager, fields: Record<string, any>) {
  if (await em.count(User, { username: fields.username })) throw conflict(`The username "${fields.username}" is taken`)
  if (fields.role_id !== undefined && !(await em.count(Role, { id: fields.role_id }))) throw invalidParam('user[role_id]', 'is not a known role')
}

/** the installation keeps at least one administrator */
async function assertNotLastAdmin(ctx: MamContext, user: User) {
  const adminRoles = (await ctx.em.find(Role, {})).filter((r) => r.roleMatrix.admin === true)
  const others = await ctx.em.count(User, { role: { $in: adminRoles }, id: { $ne: user.id } })
  if (others === 0) throw conflict(`${user.username} is the last administrator`)
}
