import { Type } from 'typebox'
import { IdParams, Nullable, Role, User, ADMIN_ROLE, andThen, column, coreServices, iso, conflict, invalid, notFound, preparedRead, type Knex, type PreparedRead, type RegisterApi, type MamContext, type ParamError } from '../../core/index.js'

const RoleFields = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    role_matrix: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Boolean())),
  },
  { additionalProperties: false },
)
const RoleInput = Type.Object({ role: Type.Optional(Nullable(RoleFields)) }, { additionalProperties: false })

const serialize = (r: Role, usersCount: number) => ({
  id: r.id,
  name: r.name,
  role_matrix: r.roleMatrix,
  builtin: r.builtin,
  administrative: r.roleMatrix.admin === true,
  users_count: usersCount,
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
})

/** `serialize` of a row of `roles` with its `users_count` */
const roleJsonOfRow = (r: Record<string, any>) => {
  const matrix = column.json<Record<string, boolean>>(r.role_matrix, {})
  return {
    id: Number(r.id),
    name: r.name as string,
    role_matrix: matrix,
    builtin: column.bool(r.builtin),
    administrative: matrix.admin === true,
    users_count: Number(r.users_count),
    created_at: iso(column.date(r.created_at)),
    updated_at: iso(column.date(r.updated_at)),
  }
}

/** §4.2: roles. A role's matrix grants capabilities; `admin` is administrative privilege. */
export function registerRoleRoutes({ routes, events }: RegisterApi) {
  const withCount = async (ctx: MamContext, r: Role) => serialize(r, await ctx.em.count(User, { role: r }))
  const find = async (ctx: MamContext) => {
    const role = await ctx.em.findOne(Role, ctx.params.id)
    if (!role) throw notFound('role', ctx.params.id)
    return role
  }
  const changed = (role: Role) => events.emit('auth.role-changed', { roleId: role.id })

  // every signed-in client reads the roles: one prepared statement with the counts, plain rows (an
  // EntityManager fork and a count query per role cost ~60 times the raw query: bench/routes.ts)
  let listRoles: PreparedRead | undefined
  // synchronous while SQLite's connection is free (PreparedRead.now)
  routes.get('/roles', { access: 'authenticated', summary: 'list all roles' }, (ctx) => {
    listRoles ??= preparedRead(
      ctx.resolve(coreServices.knex) as Knex,
      'select r.id, r.name, r.role_matrix, r.builtin, r.created_at, r.updated_at, (select count(*) from users u where u.role_id = r.id) as users_count from roles r order by r.id',
    )
    return andThen(listRoles.now([]), (rows) => ({ array: rows.map(roleJsonOfRow) }))
  })

  routes.get('/roles/:id', { access: 'authenticated', params: IdParams, summary: 'show a role' }, async (ctx) => ({
    role: await withCount(ctx, await find(ctx)),
  }))

  routes.post('/roles', { access: 'admin', input: RoleInput, wrap: 'role', summary: 'create a role' }, async (ctx) => {
    const fields = readRole(ctx, true)
    await assertNameFree(ctx, fields.name!)
    const role = ctx.em.create(Role, { name: fields.name!, roleMatrix: fields.roleMatrix!, builtin: false })
    await ctx.em.flush()
    ctx.status = 201
    return { role: serialize(role, 0) }
  })

  routes.put('/roles/:id', { access: 'admin', params: IdParams, input: RoleInput, wrap: 'role', summary: 'update a role' }, async (ctx) => {
    const role = await find(ctx)
    const fields = readRole(ctx, false)
    assertBuiltinKept(role, fields)
    if (fields.name !== undefined && fields.name !== role.name) await assertNameFree(ctx, fields.name, role.id)
    if (fields.roleMatrix && role.roleMatrix.admin === true && fields.roleMatrix.admin !== true) await assertOtherAdminsRemain(ctx, role)
    if (fields.name !== undefined) role.name = fields.name
    if (fields.roleMatrix) role.roleMatrix = fields.roleMatrix
    await ctx.em.flush()
    changed(role)
    return { role: await withCount(ctx, role) }
  })

  routes.delete('/roles/:id', { access: 'admin', params: IdParams, summary: 'delete a role' }, async (ctx) => {
    const role = await find(ctx)
    if (role.builtin) throw conflict(`"${role.name}" is a built-in role and cannot be deleted`)
    const holders = await ctx.em.count(User, { role })
    if (holders) throw conflict(`${holders} user(s) hold the role "${role.name}"; give them another role first`, { users_count: holders })
    const body = { role: serialize(role, 0) }
    await ctx.em.remove(role).flush()
    changed(role)
    return body
  })
}

function readRole(ctx: MamContext, creating: boolean): { name?: string; roleMatrix?: Record<string, boolean> } {
  const role = ctx.input.role ?? {}
  const errors: ParamError[] = []
  if (creating && role.name === undefined) errors.push({ param: 'role[name]', message: 'is required' })
  if (creating && role.role_matrix === undefined) errors.push({ param: 'role[role_matrix]', message: 'is required' })
  const known = ctx.resolve<Map<string, unknown>>('capabilities')
  for (const key of Object.keys(role.role_matrix ?? {}))
    if (!known.has(key)) errors.push({ param: `role[role_matrix][${key}]`, message: `is not a known capability (known: ${[...known.keys()].join(', ')})` })
  if (errors.length) throw invalid(errors)
  return { name: role.name, roleMatrix: role.role_matrix }
}

/**
 * The core and plugins find the built-in roles by name (new users get "User", `--admin` users
 * "Administrator", and a restart recreates a missing one), so their names stay, and so does the
 * administrative privilege of "Administrator".
 */
function assertBuiltinKept(role: Role, fields: { name?: string; roleMatrix?: Record<string, boolean> }) {
  if (!role.builtin) return
  if (fields.name !== undefined && fields.name !== role.name)
    throw conflict(`"${role.name}" is a built-in role and keeps its name`, { errors: [{ param: 'role[name]', message: 'cannot change on a built-in role' }] })
  if (role.name === ADMIN_ROLE && fields.roleMatrix && fields.roleMatrix.admin !== true)
    throw conflict(`"${role.name}" is the built-in administrator role and keeps "admin"`, { errors: [{ param: 'role[role_matrix][admin]', message: 'must stay true' }] })
}

async function assertNameFree(ctx: MamContext, name: string, exceptId?: number) {
  const other = await ctx.em.findOne(Role, { name })
  if (other && other.id !== exceptId) throw conflict(`A role named "${name}" exists already`, { errors: [{ param: 'role[name]', message: 'is taken' }] })
}

/** taking `admin` away from a role must not leave the installation without an administrator */
async function assertOtherAdminsRemain(ctx: MamContext, role: Role) {
  const adminRoles = (await ctx.em.find(Role, { id: { $ne: role.id } })).filter((r) => r.roleMatrix.admin === true)
  if ((await ctx.em.count(User, { role: { $in: adminRoles } })) === 0)
    throw conflict(`Removing administrative privilege from "${role.name}" would leave no administrator`)
}
