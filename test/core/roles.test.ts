import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer } from '../../core/testing/index.js'

/** the role as stored, read past the API */
async function roleRow(s: TestServer, id: number) {
  const row = await s.runtime.db.knex('roles').where({ id }).first()
  if (!row) return null
  return { name: row.name, role_matrix: typeof row.role_matrix === 'string' ? JSON.parse(row.role_matrix) : row.role_matrix }
}
const roleCount = async (s: TestServer) => Number((await s.runtime.db.knex('roles').count({ n: '*' }))[0].n)

/** gives a user a role directly in the database, as an admin tool would, and tells the auth cache */
async function assignRole(s: TestServer, userId: number, roleId: number) {
  await s.em().nativeUpdate('User', { id: userId }, { role: roleId })
  s.runtime.events.emit('auth.user-changed', { userId })
}

onEachDatabase(t, 'built-in roles, list and show', async (t, s) => {
  const list = await s.request('GET', '/roles', { token: s.user.token })
  t.equal(list.status, 200)
  t.same(Object.keys(list.body), ['array'], 'root key "array" (wire.md)')
  t.match(list.body.array, [
    { name: 'Administrator', role_matrix: { admin: true }, builtin: true, administrative: true, users_count: 1, created_at: /Z$/, updated_at: /Z$/ },
    { name: 'User', builtin: true, administrative: false, users_count: 1 },
  ])
  t.notOk(list.body.array[1].role_matrix.admin, 'User is not administrative')
  t.equal(list.body.array.length, 2, 'exactly the two built-in roles at first start')
  t.type(list.body.array[0].id, 'number', 'integer ids')

  const admin = list.body.array[0]
  const shown = await s.request('GET', `/roles/${admin.id}.json`, { token: s.user.token })
  t.equal(shown.status, 200)
  t.same(shown.body, { role: admin }, 'root key "role", same fields as the list')

  assertProblem(t, await s.request('GET', '/roles'), 401)
  assertProblem(t, await s.request('GET', `/roles/${admin.id}`), 401)
  assertProblem(t, await s.request('GET', '/roles', { token: 'mk_1_' + 'A'.repeat(43) }), 401)
  assertProblem(t, await s.request('GET', '/roles/999999', { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', '/roles/abc', { token: s.user.token }), 422, ['id'])
})

onEachDatabase(t, 'create roles from forms, query strings and JSON', async (t, s) => {
  const token = s.admin.token
  const fromForm = await s.request('POST', '/roles', {
    token,
    form: { 'role[name]': 'Editors', 'role[role_matrix][templates.manage]': 'true', 'role[role_matrix][admin]': 'false' },
  })
  t.equal(fromForm.status, 201)
  t.match(fromForm.body.role, { name: 'Editors', role_matrix: { 'templates.manage': true, admin: false }, builtin: false, administrative: false, users_count: 0 })
  t.same(await roleRow(s, fromForm.body.role.id), { name: 'Editors', role_matrix: { 'templates.manage': true, admin: false } }, 'stored as given, with booleans')

  const fromQuery = await s.request('POST', '/roles.json', { token, query: { 'role[name]': 'Viewers', 'role[role_matrix][templates.manage]': 'false' } })
  t.equal(fromQuery.status, 201)
  t.same(await roleRow(s, fromQuery.body.role.id), { name: 'Viewers', role_matrix: { 'templates.manage': false } })

  const fromJson = await s.request('POST', '/roles', { token, json: { role: { name: 'Guests', role_matrix: {} } } })
  t.equal(fromJson.status, 201)
  t.same(await roleRow(s, fromJson.body.role.id), { name: 'Guests', role_matrix: {} })

  const stringBooleans = await s.request('POST', '/roles', { token, json: { role: { name: 'Ops', role_matrix: { admin: 'true' } } } })
  t.equal(stringBooleans.status, 201, '"true" is a boolean in JSON too (wire.md)')
  t.same(await roleRow(s, stringBooleans.body.role.id), { name: 'Ops', role_matrix: { admin: true } })

  const list = await s.request('GET', '/roles', { token: s.user.token })
  t.same(
    list.body.array.map((r: { name: string }) => r.name),
    ['Administrator', 'User', 'Editors', 'Viewers', 'Guests', 'Ops'],
  )
})

onEachDatabase(t, 'bad input: 422 naming the parameter, nothing stored', async (t, s) => {
  const token = s.admin.token
  const before = await roleCount(s)

  assertProblem(t, await s.request('POST', '/roles', { token, json: {} }), 422, ['role[name]', 'role[role_matrix]'])
  assertProblem(t, await s.request('POST', '/roles', { token, json: { role: null } }), 422, ['role[name]', 'role[role_matrix]'])
  assertProblem(t, await s.request('POST', '/roles', { token, form: { 'role[name]': 'NoMatrix' } }), 422, ['role[role_matrix]'])
  assertProblem(t, await s.request('POST', '/roles', { token, json: { role: { name: '', role_matrix: {} } } }), 422, ['role[name]'])
  assertProblem(t, await s.request('POST', '/roles', { token, json: { role: { name: 'x', role_matrix: {}, colour: 'red' } } }), 422, ['role[colour]'])
  assertProblem(t, await s.request('POST', '/roles', { token, json: { role: { name: 'x', role_matrix: {} }, admin: true } }), 422, ['admin'])

  const unknown = await s.request('POST', '/roles', { token, json: { role: { name: 'x', role_matrix: { 'templates.manage': true, 'projects.delete_everything': true, nonsense: false } } } })
  assertProblem(t, unknown, 422, ['role[role_matrix][nonsense]', 'role[role_matrix][projects.delete_everything]'])
  t.match(unknown.body.errors[0].message, /not a known capability/)
  t.match(unknown.body.errors[0].message, /templates\.manage/, 'the message lists the known capabilities')
  assertProblem(t, await s.request('POST', '/roles', { token, form: { 'role[name]': 'x', 'role[role_matrix][bogus]': 'true' } }), 422, ['role[role_matrix][bogus]'])

  const notBoolean = await s.request('POST', '/roles', { token, json: { role: { name: 'x', role_matrix: { 'templates.manage': 'yes', admin: 1 } } } })
  assertProblem(t, notBoolean, 422, ['role[role_matrix][admin]', 'role[role_matrix][templates.manage]'])
  assertProblem(t, await s.request('POST', '/roles', { token, form: { 'role[name]': 'x', 'role[role_matrix][admin]': 'yes' } }), 422, ['role[role_matrix][admin]'])
  assertProblem(t, await s.request('POST', '/roles', { token, json: { role: { name: 'x', role_matrix: ['admin'] } } }), 422, ['role[role_matrix]'])
  assertProblem(t, await s.request('POST', '/roles', { token, json: { role: { name: 'x', role_matrix: { admin: { nested: true } } } } }), 422, ['role[role_matrix][admin]'])
  t.equal(await roleCount(s), before, 'no role was created')

  const user = (await s.request('GET', '/roles', { token })).body.array[1]
  const userMatrix = (await roleRow(s, user.id))!.role_matrix
  assertProblem(t, await s.request('PUT', `/roles/${user.id}`, { token, json: { role: { role_matrix: { nonsense: true } } } }), 422, ['role[role_matrix][nonsense]'])
  assertProblem(t, await s.request('PUT', `/roles/${user.id}`, { token, json: { role: { role_matrix: { admin: 'sure' } } } }), 422, ['role[role_matrix][admin]'])
  t.same(await roleRow(s, user.id), { name: 'User', role_matrix: userMatrix }, 'the role is unchanged')
})

onEachDatabase(t, 'update and delete', async (t, s) => {
  const token = s.admin.token
  const created = (await s.request('POST', '/roles', { token, json: { role: { name: 'Editors', role_matrix: {} } } })).body.role

  const renamed = await s.request('PUT', `/roles/${created.id}`, { token, form: { 'role[name]': 'Cutters' } })
  t.equal(renamed.status, 200)
  t.match(renamed.body.role, { id: created.id, name: 'Cutters', role_matrix: {} })
  t.same(await roleRow(s, created.id), { name: 'Cutters', role_matrix: {} }, 'a name alone leaves the matrix')

  const viaQuery = await s.request('PUT', `/roles/${created.id}`, { token, query: { 'role[role_matrix][templates.manage]': 'true' } })
  t.equal(viaQuery.status, 200)
  t.same(await roleRow(s, created.id), { name: 'Cutters', role_matrix: { 'templates.manage': true } }, 'a matrix alone leaves the name')

  const viaJson = await s.request('PUT', `/roles/${created.id}`, { token, json: { role: { name: 'Editors', role_matrix: { admin: false } } } })
  t.equal(viaJson.status, 200)
  t.same(await roleRow(s, created.id), { name: 'Editors', role_matrix: { admin: false } }, 'the matrix is replaced, not merged')

  t.equal((await s.request('PUT', `/roles/${created.id}`, { token, json: { role: null } })).status, 200, 'role may be nil on update')
  t.equal((await s.request('PUT', `/roles/${created.id}`, { token, json: { role: { name: 'Editors' } } })).status, 200, 'keeping its own name is no conflict')
  t.same(await roleRow(s, created.id), { name: 'Editors', role_matrix: { admin: false } })

  assertProblem(t, await s.request('PUT', '/roles/999999', { token, json: { role: { name: 'x' } } }), 404)
  assertProblem(t, await s.request('DELETE', '/roles/999999', { token }), 404)

  const deleted = await s.request('DELETE', `/roles/${created.id}`, { token })
  t.equal(deleted.status, 200)
  t.match(deleted.body.role, { id: created.id, name: 'Editors' })
  t.equal(await roleRow(s, created.id), null, 'gone from the database')
  assertProblem(t, await s.request('GET', `/roles/${created.id}`, { token }), 404)
  assertProblem(t, await s.request('DELETE', `/roles/${created.id}`, { token }), 404)

  const viaOverride = (await s.request('POST', '/roles', { token, json: { role: { name: 'Temp', role_matrix: {} } } })).body.role
  t.equal((await s.request('POST', `/roles/${viaOverride.id}`, { token, headers: { 'x-http-method-override': 'DESTROY' } })).status, 200, 'DESTROY through POST')
  t.equal(await roleRow(s, viaOverride.id), null)
})

onEachDatabase(t, 'conflicts: names, built-in roles, roles in use, the last administrator', async (t, s) => {
  const token = s.admin.token
  const [adminRole, userRole] = (await s.request('GET', '/roles', { token })).body.array
  const userMatrix = userRole.role_matrix
  const editors = (await s.request('POST', '/roles', { token, json: { role: { name: 'Editors', role_matrix: {} } } })).body.role

  const duplicate = await s.request('POST', '/roles', { token, json: { role: { name: 'Editors', role_matrix: {} } } })
  assertProblem(t, duplicate, 409)
  t.equal(duplicate.body.code, 'conflict')
  t.same(duplicate.body.errors, [{ param: 'role[name]', message: 'is taken' }])
  assertProblem(t, await s.request('PUT', `/roles/${editors.id}`, { token, json: { role: { name: 'User' } } }), 409)
  t.same(await roleRow(s, editors.id), { name: 'Editors', role_matrix: {} })

  // concurrent creates of one name: one wins, the others are conflicts, never a 500
  const racing = await Promise.all([1, 2, 3, 4].map(() => s.request('POST', '/roles', { token, json: { role: { name: 'Racers', role_matrix: {} } } })))
  t.same(racing.map((r) => r.status).sort(), [201, 409, 409, 409], 'one created, three conflicts')
  t.equal(Number((await s.runtime.db.knex('roles').where({ name: 'Racers' }).count({ n: '*' }))[0].n), 1)

  const builtin = await s.request('DELETE', `/roles/${userRole.id}`, { token })
  assertProblem(t, builtin, 409)
  t.match(builtin.body.detail, /built-in/)
  assertProblem(t, await s.request('DELETE', `/roles/${adminRole.id}`, { token }), 409)
  // the core finds its built-in roles by name (new users get "User"), so the names stay
  assertProblem(t, await s.request('PUT', `/roles/${userRole.id}`, { token, json: { role: { name: 'Staff' } } }), 409)
  t.same(await roleRow(s, userRole.id), { name: 'User', role_matrix: userMatrix })
  t.equal((await s.request('PUT', `/roles/${userRole.id}`, { token, json: { role: { name: 'User', role_matrix: { 'templates.manage': false } } } })).status, 200, 'a built-in role matrix can change')
  t.same(await roleRow(s, userRole.id), { name: 'User', role_matrix: { 'templates.manage': false } })

  const held = await s.createUser('colourist')
  await assignRole(s, held.id, editors.id)
  const inUse = await s.request('DELETE', `/roles/${editors.id}`, { token })
  assertProblem(t, inUse, 409)
  t.equal(inUse.body.users_count, 1)
  t.ok(await roleRow(s, editors.id), 'the role is still there')

  // the built-in administrator role keeps admin, whoever holds it
  const lastAdmin = await s.request('PUT', `/roles/${adminRole.id}`, { token, json: { role: { role_matrix: { 'templates.manage': true } } } })
  assertProblem(t, lastAdmin, 409)
  t.same(await roleRow(s, adminRole.id), { name: 'Administrator', role_matrix: { admin: true } }, 'still administrative')

  // administrators on a role of their own: taking admin away from it is refused while it is the last one
  const ops = (await s.request('POST', '/roles', { token, json: { role: { name: 'Ops', role_matrix: { admin: true } } } })).body.role
  await assignRole(s, s.admin.id, ops.id)
  const lastOps = await s.request('PUT', `/roles/${ops.id}`, { token, json: { role: { role_matrix: { admin: false } } } })
  assertProblem(t, lastOps, 409)
  t.match(lastOps.body.detail, /no administrator/)
  t.same(await roleRow(s, ops.id), { name: 'Ops', role_matrix: { admin: true } })
  // with another administrator elsewhere it is allowed
  const second = await s.createUser('second-admin', { admin: true })
  const allowed = await s.request('PUT', `/roles/${ops.id}`, { token: second.token, json: { role: { role_matrix: { admin: false } } } })
  t.equal(allowed.status, 200)
  t.same(await roleRow(s, ops.id), { name: 'Ops', role_matrix: { admin: false } })
  const demoted = await s.request('POST', '/roles', { token, json: { role: { name: 'Comeback', role_matrix: { admin: true } } } })
  assertProblem(t, demoted, 403, undefined)
  t.match(demoted.body.detail, /administrative/, 'the former administrator lost the privilege at once')
})

onEachDatabase(t, 'only administrators change roles', async (t, s) => {
  const [, userRole] = (await s.request('GET', '/roles', { token: s.admin.token })).body.array
  const userMatrix = userRole.role_matrix
  const before = await roleCount(s)
  for (const [method, path, json] of [
    ['POST', '/roles', { role: { name: 'Mine', role_matrix: { admin: true } } }],
    ['PUT', `/roles/${userRole.id}`, { role: { role_matrix: { admin: true } } }],
    ['DELETE', `/roles/${userRole.id}`, undefined],
  ] as const) {
    const denied = await s.request(method, path, { token: s.user.token, json })
    assertProblem(t, denied, 403)
    t.match(denied.body.detail, /administrative/)
    assertProblem(t, await s.request(method, path, { json }), 401)
    // credentials come before parameters: an invalid body from a non-admin is still 403
    assertProblem(t, await s.request(method, path, { token: s.user.token, json: { nonsense: 1 } }), 403)
  }
  t.equal(await roleCount(s), before)
  t.same(await roleRow(s, userRole.id), { name: 'User', role_matrix: userMatrix }, 'the user could not raise their own role')
  assertProblem(t, await s.request('PUT', '/roles/999999', { token: s.user.token, json: { role: { name: 'x' } } }), 403)
})

onEachDatabase(t, "a user's role decides privilege on the next request", async (t, s) => {
  const template = (name: string) => ({ json: { template: { name, template_type: 'generic' } } })
  assertProblem(t, await s.request('POST', '/templates', { token: s.user.token, ...template('Before') }), 403)

  const role = (await s.request('POST', '/roles', { token: s.admin.token, json: { role: { name: 'Template keepers', role_matrix: { 'templates.manage': true } } } })).body.role
  await assignRole(s, s.user.id, role.id)

  const created = await s.request('POST', '/templates', { token: s.user.token, ...template('Granted') })
  t.equal(created.status, 201, 'the capability lets the user create templates')
  t.equal(created.body.template.name, 'Granted')
  const session = await s.request('GET', '/session', { token: s.user.token })
  t.match(session.body.user, { role_id: role.id, role: 'Template keepers' })

  const revoked = await s.request('PUT', `/roles/${role.id}`, { token: s.admin.token, json: { role: { role_matrix: { 'templates.manage': false } } } })
  t.equal(revoked.status, 200)
  const denied = await s.request('POST', '/templates', { token: s.user.token, ...template('Too late') })
  assertProblem(t, denied, 403)
  t.match(denied.body.detail, /templates\.manage/)
  assertProblem(t, await s.request('DELETE', `/templates/${created.body.template.id}`, { token: s.user.token }), 403)

  // granting admin through the role works the same way, and so does taking it back
  await s.request('PUT', `/roles/${role.id}`, { token: s.admin.token, json: { role: { role_matrix: { admin: true } } } })
  t.equal((await s.request('GET', `/users/${s.admin.id}/api_keys`, { token: s.user.token })).status, 200, 'admin through the role')
  await s.request('PUT', `/roles/${role.id}`, { token: s.admin.token, json: { role: { role_matrix: {} } } })
  assertProblem(t, await s.request('GET', `/users/${s.admin.id}/api_keys`, { token: s.user.token }), 403)

  // and moving the user back to the plain role
  await s.request('PUT', `/roles/${role.id}`, { token: s.admin.token, json: { role: { role_matrix: { 'templates.manage': true } } } })
  t.equal((await s.request('POST', '/templates', { token: s.user.token, ...template('Again') })).status, 201)
  const [, userRole] = (await s.request('GET', '/roles', { token: s.admin.token })).body.array
  await assignRole(s, s.user.id, userRole.id)
  assertProblem(t, await s.request('POST', '/templates', { token: s.user.token, ...template('Not any more') }), 403)
})
