import t from 'tap'
import { describePlugins } from '../../../core/runtime.js'
import { builtinPlugins } from '../../../plugins/index.js'
import { parseMail, startMailCatcher, assertProblem, onEachDatabase, startTestServer, databaseKinds, type TestServer } from '../../../core/testing/index.js'

// invitations must not find a developer's SMTP settings in the environment
for (const name of ['MAMKIT_SMTP_HOST', 'MAMKIT_SMTP_PORT', 'MAMKIT_SMTP_SECURE', 'MAMKIT_SMTP_FROM', 'MAMKIT_PUBLIC_URL']) delete process.env[name]

type Tap = typeof t

const USER_FIELDS = ['id', 'username', 'firstname', 'lastname', 'role_id', 'role', 'own_team_id', 'teams', 'created_at', 'updated_at']
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

/** the user JSON of wire.md, with nothing secret in it */
function assertUser(t: Tap, json: any, expected: Record<string, unknown> = {}) {
  for (const field of USER_FIELDS) t.ok(field in json, `user has ${field}`)
  t.match(json, { id: Number, role_id: Number, role: String, own_team_id: Number, teams: Array, created_at: ISO, updated_at: ISO, ...expected })
  t.ok(json.teams.some((team: { id: number }) => team.id === json.own_team_id), 'teams include the own team')
  const secret = Object.keys(json).filter((k) => /password|hash|secret|digest/i.test(k))
  t.same(secret, [], 'no password hash or secret in the user')
  t.notMatch(JSON.stringify(json), /scrypt\$/, 'no hash anywhere in the user')
}

const roleIds = async (s: TestServer) => {
  const rows = await s.runtime.db.knex('roles').select('id', 'name')
  const byName = Object.fromEntries(rows.map((r: { id: number; name: string }) => [r.name, Number(r.id)]))
  return { admin: byName.Administrator as number, user: byName.User as number }
}

const login = (s: TestServer, username: string, password: string) => s.request('POST', '/session', { json: { login: username, password } })

onEachDatabase(t, 'users: list, show, create', async (t, s) => {
  const list = await s.request('GET', '/users', { token: s.user.token })
  t.equal(list.status, 200)
  t.same(
    list.body.users.map((u: { username: string }) => u.username),
    ['admin', 'editor'],
  )
  for (const u of list.body.users) assertUser(t, u)
  t.equal(list.headers.get('x-total-count'), '2')

  const shown = await s.request('GET', `/users/${s.user.id}.json`, { token: s.user.token })
  t.equal(shown.status, 200)
  assertUser(t, shown.body.user, { id: s.user.id, username: 'editor', role: 'User' })

  const created = await s.request('POST', '/users', {
    token: s.admin.token,
    json: { user: { username: 'carol', password: 'a-long-password', firstname: 'Carol', lastname: 'Cutter', email: 'carol@example.test' } },
  })
  t.equal(created.status, 201)
  assertUser(t, created.body.user, { username: 'carol', firstname: 'Carol', lastname: 'Cutter', role: 'User' })
  const carol = created.body.user
  const ownTeam = await s.runtime.db.knex('teams').where({ id: carol.own_team_id }).first()
  t.equal(Number(ownTeam.owner_id), carol.id, 'the new user owns a team of their own')
  t.equal(ownTeam.name, 'carol')
  const row = await s.runtime.db.knex('users').where({ username: 'carol' }).first()
  t.match(row.password_hash, /^scrypt\$/, 'the password is stored hashed')
  t.equal((await login(s, 'carol', 'a-long-password')).status, 200, 'the new user can log in')

  // a form body with bracket names works the same
  const viaForm = await s.request('POST', '/users', { token: s.admin.token, form: { 'user[username]': 'dave', 'user[password]': 'another-password', 'user[role_id]': String((await roleIds(s)).admin) } })
  t.equal(viaForm.status, 201)
  assertUser(t, viaForm.body.user, { username: 'dave', role: 'Administrator' })

  // errors
  assertProblem(t, await s.request('GET', '/users'), 401)
  assertProblem(t, await s.request('GET', `/users/${s.user.id}`), 401)
  assertProblem(t, await s.request('POST', '/users', { json: { user: { username: 'x', password: 'a-long-password' } } }), 401)
  assertProblem(t, await s.request('GET', '/users/99999', { token: s.user.token }), 404)
  assertProblem(t, await s.request('POST', '/users', { token: s.user.token, json: { user: { username: 'eve', password: 'a-long-password' } } }), 403)
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'carol', password: 'a-long-password' } } }), 409)
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'frank', password: 'short' } } }), 422, ['user[password]'])
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'frank', password: 'a-long-password', admin: true } } }), 422, ['user[admin]'])
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'frank' } } }), 422, ['user[password]'])
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'frank', password: 'a-long-password' }, extra: 1 } }), 422, ['extra'])
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'fr ank', password: 'a-long-password' } } }), 422, ['user[username]'])
  t.equal(await s.runtime.db.knex('users').whereIn('username', ['eve', 'frank', 'fr ank']).count({ n: '*' }).first().then((r: any) => Number(r.n)), 0, 'no refused user was created')
  const short = await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'frank', password: 'short' } } })
  t.match(short.body.errors, [{ param: 'user[password]', message: /8 characters/ }], 'the password policy is named')

  // pages by username, every page with the total; emails only for administrators (and oneself)
  const page = async (n: number, token = s.user.token) => s.request('GET', '/users', { token, query: { page: String(n), per_page: '2' } })
  const [one, two, three] = [await page(1), await page(2), await page(3)]
  t.same([one, two, three].map((p) => p.body.users.map((u: { username: string }) => u.username)), [['admin', 'carol'], ['dave', 'editor'], []])
  t.same([one, two, three].map((p) => p.headers.get('x-total-count')), ['4', '4', '4'], 'the total on full, last and past-the-end pages')
  for (const u of [...one.body.users, ...two.body.users]) assertUser(t, u)
  t.same(two.body.users.map((u: { email?: string }) => 'email' in u), [false, true], "another user's email is hidden, one's own shown")
  t.ok((await page(1, s.admin.token)).body.users.every((u: object) => 'email' in u), 'administrators see every email')
  assertProblem(t, await s.request('GET', '/users', { token: s.user.token, query: { per_page: '0' } }), 422, ['per_page'])
})

onEachDatabase(t, 'users: update own profile, password and privileges', async (t, s) => {
  const roles = await roleIds(s)
  const me = s.user

  const renamed = await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { firstname: 'Ed', lastname: 'Itor' } } })
  t.equal(renamed.status, 200)
  assertUser(t, renamed.body.user, { id: me.id, firstname: 'Ed', lastname: 'Itor', username: 'editor' })

  // a non-admin cannot raise their privileges or rename themselves, and nothing of the request is applied
  for (const user of [{ role_id: roles.admin }, { username: 'boss' }, { role_id: roles.admin, firstname: 'Sneaky' }]) {
    assertProblem(t, await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user } }), 403)
  }
  const row = await s.runtime.db.knex('users').where({ id: me.id }).first()
  t.match(row, { username: 'editor', role_id: roles.user, firstname: 'Ed' }, 'nothing changed')
  t.equal((await s.request('GET', '/roles', { token: me.token })).status, 200)
  assertProblem(t, await s.request('POST', '/users', { token: me.token, json: { user: { username: 'eve', password: 'a-long-password' } } }), 403, undefined)

  // another user's profile
  const other = await s.createUser('other')
  assertProblem(t, await s.request('PUT', `/users/${other.id}`, { token: me.token, json: { user: { firstname: 'Hacked' } } }), 403)
  assertProblem(t, await s.request('PUT', `/users/${other.id}`, { token: me.token, json: { user: { password: 'a-new-password', current_password: me.password } } }), 403)
  t.equal((await s.runtime.db.knex('users').where({ id: other.id }).first()).firstname, null, 'the other user is unchanged')
  assertProblem(t, await s.request('PUT', '/users/99999', { token: s.admin.token, json: { user: { firstname: 'X' } } }), 404)
  assertProblem(t, await s.request('PUT', `/users/${me.id}`, { json: { user: { firstname: 'X' } } }), 401)

  // own password: the current one is required and must match
  assertProblem(t, await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { password: 'a-new-password' } } }), 422, ['user[current_password]'])
  assertProblem(t, await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { password: 'a-new-password', current_password: 'wrong-password' } } }), 422, [
    'user[current_password]',
  ])
  assertProblem(t, await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { password: 'short', current_password: me.password } } }), 422, ['user[password]'])
  assertProblem(t, await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { nickname: 'ed' } } }), 422, ['user[nickname]'])
  t.equal((await login(s, me.username, me.password)).status, 200, 'the old password still works after refused changes')
  const changed = await s.request('PUT', `/users/${me.id}`, { token: me.token, form: { 'user[password]': 'a-new-password', 'user[current_password]': me.password } })
  t.equal(changed.status, 200)
  assertUser(t, changed.body.user)
  assertProblem(t, await login(s, me.username, me.password), 401)
  t.equal((await login(s, me.username, 'a-new-password')).status, 200, 'the new password works')

  // an administrator changes everything of anyone, without the current password
  const promoted = await s.request('PUT', `/users/${other.id}`, { token: s.admin.token, json: { user: { username: 'other2', role_id: roles.admin, password: 'set-by-admin' } } })
  t.equal(promoted.status, 200)
  assertUser(t, promoted.body.user, { id: other.id, username: 'other2', role: 'Administrator', role_id: roles.admin })
  t.equal((await login(s, 'other2', 'set-by-admin')).status, 200)
  // the promotion is effective at once for the user's key
  t.equal((await s.request('POST', '/users', { token: other.token, json: { user: { username: 'made-by-other', password: 'a-long-password' } } })).status, 201)

  assertProblem(t, await s.request('PUT', `/users/${other.id}`, { token: s.admin.token, json: { user: { username: 'editor' } } }), 409)
  assertProblem(t, await s.request('PUT', `/users/${other.id}`, { token: s.admin.token, json: { user: { role_id: 99999 } } }), 422, ['user[role_id]'])
  t.equal((await s.runtime.db.knex('users').where({ id: other.id }).first()).username, 'other2', 'a refused rename changes nothing')
})

onEachDatabase(t, 'users: delete, the last administrator, and credentials that die with a user', async (t, s) => {
  const roles = await roleIds(s)
  // the only administrator can neither be deleted nor demoted
  assertProblem(t, await s.request('DELETE', `/users/${s.admin.id}`, { token: s.admin.token }), 409)
  assertProblem(t, await s.request('PUT', `/users/${s.admin.id}`, { token: s.admin.token, json: { user: { role_id: roles.user } } }), 409)
  t.equal(Number((await s.runtime.db.knex('users').where({ id: s.admin.id }).first()).role_id), roles.admin, 'still an administrator')

  const victim = await s.createUser('victim')
  assertProblem(t, await s.request('DELETE', `/users/${victim.id}`, { token: s.user.token }), 403)
  assertProblem(t, await s.request('DELETE', `/users/${victim.id}`), 401)
  assertProblem(t, await s.request('DELETE', '/users/99999', { token: s.admin.token }), 404)

  // the victim has an API key (from createUser), a login token and their own team
  const session = await login(s, 'victim', victim.password)
  const loginToken = session.body.authentication_token
  t.equal((await s.request('GET', '/session', { token: victim.token })).status, 200, 'the key works before')
  t.equal((await s.request('GET', '/session', { token: loginToken })).status, 200, 'the login token works before')
  const ownTeamId = session.body.user.own_team_id

  const deleted = await s.request('DELETE', `/users/${victim.id}`, { token: s.admin.token })
  t.equal(deleted.status, 200)
  assertUser(t, deleted.body.user, { id: victim.id, username: 'victim' })
  assertProblem(t, await s.request('GET', '/session', { token: victim.token }), 401)
  assertProblem(t, await s.request('GET', '/session', { token: loginToken }), 401)
  assertProblem(t, await s.request('GET', `/users/${victim.id}`, { token: s.admin.token }), 404)
  const knex = s.runtime.db.knex
  t.equal((await knex('api_keys').where({ user_id: victim.id })).length, 0, 'API keys deleted')
  t.equal((await knex('auth_tokens').where({ user_id: victim.id })).length, 0, 'login tokens deleted')
  t.equal((await knex('teams').where({ id: ownTeamId })).length, 0, 'own team deleted')
  t.equal((await knex('team_memberships').where({ user_id: victim.id })).length, 0, 'memberships deleted')

  // with a second administrator, the first can go, and can be demoted
  const second = await s.createUser('second-admin', { admin: true })
  t.equal((await s.request('PUT', `/users/${s.admin.id}`, { token: second.token, json: { user: { role_id: roles.user } } })).status, 200, 'demoted')
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'x1', password: 'a-long-password' } } }), 403)
  assertProblem(t, await s.request('DELETE', `/users/${second.id}`, { token: second.token }), 409, undefined)
  t.equal((await s.request('DELETE', `/users/${s.admin.id}`, { token: second.token })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: s.admin.token }), 401)
})


t.test('users: invitations through a real SMTP exchange', async (t) => {
  const mail = await startMailCatcher()
  t.teardown(mail.close)
  const config = { plugins: { identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mam@example.test', publicUrl: 'http://mam.example.test' } } } }
  for (const db of databaseKinds()) {
    await t.test(`invite and accept [${db}]`, async (sub) => {
      const t = sub as unknown as Tap
      const s = await startTestServer({ db, config })
      t.teardown(() => s.close())
      mail.messages.length = 0
      const knex = s.runtime.db.knex

      assertProblem(t, await s.request('POST', '/users/invite', { token: s.user.token, json: { user: { username: 'ivy', email: 'ivy@example.test' } } }), 403)
      assertProblem(t, await s.request('POST', '/users/invite', { json: { user: { username: 'ivy', email: 'ivy@example.test' } } }), 401)
      assertProblem(t, await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'ivy' } } }), 422, ['user[email]'])
      assertProblem(t, await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'ivy', email: 'not-an-address' } } }), 422, ['user[email]'])
      assertProblem(t, await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'editor', email: 'ed@example.test' } } }), 409)
      t.equal(mail.messages.length, 0, 'refused invitations send no mail')

      const invited = await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'ivy', email: 'ivy@example.test', firstname: 'Ivy' } } })
      t.equal(invited.status, 201)
      assertUser(t, invited.body.user, { username: 'ivy', firstname: 'Ivy', role: 'User' })
      t.equal((await knex('users').where({ username: 'ivy' }).first()).password_hash, null, 'no password until the invitation is accepted')
      assertProblem(t, await login(s, 'ivy', 'anything-at-all'), 401)

      t.equal(mail.messages.length, 1, 'one message reached the SMTP server')
      const message = mail.messages[0]
      t.same(message.to, ['ivy@example.test'], 'envelope recipient')
      t.equal(message.from, 'mam@example.test', 'envelope sender')
      const { headers, body } = parseMail(message.raw)
      t.match(headers.to, 'ivy@example.test')
      t.match(headers.from, 'mam@example.test')
      t.equal(headers.subject, 'You are invited to mamkit')
      const token = /Invitation token: ([A-Za-z0-9_-]+)/.exec(body)?.[1]
      t.ok(token, 'the message carries a token')
      t.match(body, `http://mam.example.test/api/v1/invitations/accept?token=${token}`, 'the link uses the public URL')
      const stored = await knex('invitations').where({ user_id: invited.body.user.id }).first()
      t.not(stored.token_hash, token, 'only a hash of the token is stored')

      assertProblem(t, await s.request('POST', '/invitations/accept', { json: { token, password: 'short' } }), 422, ['password'])
      assertProblem(t, await s.request('POST', '/invitations/accept', { json: { token: 'not-the-token', password: 'ivys-password' } }), 422, ['token'])
      const accepted = await s.request('POST', '/invitations/accept', { json: { token, password: 'ivys-password' } })
      t.equal(accepted.status, 200)
      assertUser(t, accepted.body.user, { username: 'ivy' })
      t.equal((await login(s, 'ivy', 'ivys-password')).status, 200, 'the chosen password logs in')
      assertProblem(t, await s.request('POST', '/invitations/accept', { json: { token, password: 'another-password' } }), 422, ['token'])
      t.equal((await login(s, 'ivy', 'ivys-password')).status, 200, 'a second accept did not change the password')

      // an expired invitation
      const late = await s.request('POST', '/users/invite', { token: s.admin.token, form: { 'user[username]': 'lou', 'user[email]': 'lou@example.test' } })
      t.equal(late.status, 201)
      t.equal(mail.messages.length, 2)
      const lateToken = /Invitation token: ([A-Za-z0-9_-]+)/.exec(parseMail(mail.messages[1].raw).body)![1]
      await knex('invitations').where({ user_id: late.body.user.id }).update({ expires_at: new Date(Date.now() - 60_000) })
      assertProblem(t, await s.request('POST', '/invitations/accept', { json: { token: lateToken, password: 'lous-password' } }), 422, ['token'])
      t.equal((await knex('users').where({ username: 'lou' }).first()).password_hash, null, 'an expired invitation sets nothing')

      // the SMTP server refuses the recipient: 503, and the user is gone again (nobody could accept)
      const refused = await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'ghost', email: 'nobody@example.test' } } })
      assertProblem(t, refused, 503)
      t.match(refused.body.detail, /SMTP server did not take the message/)
      t.equal((await knex('users').where({ username: 'ghost' })).length, 0, 'no user left behind')
      t.equal((await knex('teams').where({ name: 'ghost' })).length, 0, 'no own team left behind')
      t.equal(mail.messages.length, 2, 'nothing was delivered')
    })
  }
})

onEachDatabase(t, 'users: invitation without an SMTP server is 503 and creates nobody', async (t, s) => {
  const reply = await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'nomail', email: 'nomail@example.test' } } })
  assertProblem(t, reply, 503)
  t.match(reply.body.detail, /SMTP/, 'the body says what is missing')
  t.equal((await s.runtime.db.knex('users').where({ username: 'nomail' })).length, 0, 'no user created')
  t.equal((await s.runtime.db.knex('invitations')).length, 0, 'no invitation stored')
})

t.test('users: the mail settings are typed settings: checked at boot, masked, changed live by PUT /settings', async (t) => {
  const boot = (mail: Record<string, unknown>) => describePlugins({ plugins: builtinPlugins, config: { dataDir: t.testdir(), plugins: { identity: { mail } } } })
  await t.rejects(boot({ port: 'twenty-five' }), { code: 'SETTINGS_INVALID', message: /setting plugins\.identity\.mail\.port / }, 'a bad value stops the boot naming it')
  await t.rejects(boot({ hots: 'smtp.example.test' }), { code: 'SETTINGS_INVALID', message: /setting plugins\.identity\.mail\.hots is not a known parameter/ }, 'a misspelt one too')
  const mail = await startMailCatcher()
  t.teardown(mail.close)
  for (const db of databaseKinds()) {
    await t.test(`mail settings [${db}]`, async (sub) => {
      const t = sub as unknown as Tap
      const s = await startTestServer({ db })
      t.teardown(() => s.close())
      mail.messages.length = 0
      assertProblem(t, await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'early', email: 'early@example.test' } } }), 503)
      const put = await s.request('PUT', '/settings', {
        token: s.admin.token,
        json: { settings: { identity: { mail: { host: '127.0.0.1', port: mail.port, pass: 'smtp-secret', from: 'live@example.test', publicUrl: 'http://live.example.test/' } } } },
      })
      t.equal(put.status, 200, put.text)
      t.equal(put.body.settings.identity.mail.pass, '********', 'the password is masked')
      t.equal((await s.request('GET', '/settings', { token: s.admin.token })).body.settings.identity.mail.host, '127.0.0.1')
      // the message goes out with the settings now in force
      const invited = await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'late', email: 'late@example.test' } } })
      t.equal(invited.status, 201, invited.text)
      t.equal(mail.messages.length, 1)
      t.equal(mail.messages[0].from, 'live@example.test')
      t.match(parseMail(mail.messages[0].raw).body, 'http://live.example.test/api/v1/invitations/accept?token=', 'the public URL without its trailing slash')
    })
  }
})

onEachDatabase(t, 'users: without an SMTP server, an invalid invitation is refused for what it is (422/409) before the 503', async (t, s) => {
  const invite = (user: Record<string, unknown>) => s.request('POST', '/users/invite', { token: s.admin.token, json: { user } })
  assertProblem(t, await invite({ username: 'nomail', email: 'nomail@example.test', role_id: 99999 }), 422, ['user[role_id]'])
  assertProblem(t, await invite({ username: s.user.username, email: 'taken@example.test' }), 409)
  assertProblem(t, await invite({ username: 'nomail', email: 'not-an-address' }), 422, ['user[email]'])
  assertProblem(t, await invite({ username: 'nomail', email: 'nomail@example.test' }), 503) // valid: then the missing mail server
  // the same check for POST /users: the parameter as the client sent it
  assertProblem(t, await s.request('POST', '/users', { token: s.admin.token, json: { user: { username: 'norole', password: 'a-long-password', role_id: 99999 } } }), 422, ['user[role_id]'])
  t.equal((await s.runtime.db.knex('users').whereIn('username', ['nomail', 'norole'])).length, 0, 'nobody created')
})

onEachDatabase(t, 'users: a new password ends the other login sessions; API keys stay (issue 18 item 11)', async (t, s) => {
  const me = s.user
  const here = (await login(s, me.username, me.password)).body.authentication_token as string
  const elsewhere = (await login(s, me.username, me.password)).body.authentication_token as string
  t.equal((await s.request('GET', '/session', { token: elsewhere })).status, 200, 'the other session works before')

  const changed = await s.request('PUT', `/users/${me.id}`, { token: here, json: { user: { password: 'a-new-password', current_password: me.password } } })
  t.equal(changed.status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: elsewhere }), 401)
  t.equal((await s.request('GET', '/session', { token: here })).status, 200, 'the session that changed the password goes on')
  t.equal((await s.request('GET', '/session', { token: me.token })).status, 200, 'API keys stay')
  const tokens = await s.runtime.db.knex('auth_tokens').where({ user_id: me.id }).orderBy('id').select('revoked_at')
  t.same(tokens.map((r: { revoked_at: unknown }) => r.revoked_at !== null), [false, true], 'the other token is revoked in the database')

  // changed with an API key, or by an administrator: every login session of the user ends
  const fresh = (await login(s, me.username, 'a-new-password')).body.authentication_token as string
  t.equal((await s.request('PUT', `/users/${me.id}`, { token: s.admin.token, json: { user: { password: 'set-by-the-admin' } } })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: fresh }), 401)
  assertProblem(t, await s.request('GET', '/session', { token: here }), 401)
  t.equal((await s.request('GET', '/session', { token: me.token })).status, 200)

  // other changes keep the sessions
  const kept = (await login(s, me.username, 'set-by-the-admin')).body.authentication_token as string
  t.equal((await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { firstname: 'Ed' } } })).status, 200)
  t.equal((await s.request('GET', '/session', { token: kept })).status, 200, 'a profile change ends nothing')
  // a refused change ends nothing either
  assertProblem(t, await s.request('PUT', `/users/${me.id}`, { token: me.token, json: { user: { password: 'another-one', current_password: 'wrong' } } }), 422)
  t.equal((await s.request('GET', '/session', { token: kept })).status, 200)
})

onEachDatabase(t, 'users: emails are shown to administrators and to the user themself only (issue 18 item 13)', async (t, s) => {
  await s.request('PUT', `/users/${s.admin.id}`, { token: s.admin.token, json: { user: { email: 'admin@example.test' } } })
  await s.request('PUT', `/users/${s.user.id}`, { token: s.user.token, json: { user: { email: 'editor@example.test' } } })
  const emails = (users: Array<{ username: string; email?: string | null }>) => Object.fromEntries(users.map((u) => [u.username, 'email' in u ? u.email : '(hidden)']))

  const asUser = await s.request('GET', '/users', { token: s.user.token })
  t.same(emails(asUser.body.users), { admin: '(hidden)', editor: 'editor@example.test' }, 'a user sees their own email only')
  t.notMatch(asUser.text, /admin@example\.test/)
  const asAdmin = await s.request('GET', '/users', { token: s.admin.token })
  t.same(emails(asAdmin.body.users), { admin: 'admin@example.test', editor: 'editor@example.test' }, 'an administrator sees every email')
  t.notOk('email' in (await s.request('GET', `/users/${s.admin.id}`, { token: s.user.token })).body.user, 'GET /users/:id alike')
  t.equal((await s.request('GET', `/users/${s.user.id}`, { token: s.user.token })).body.user.email, 'editor@example.test')
  t.equal((await s.request('GET', `/users/${s.user.id}`, { token: s.admin.token })).body.user.email, 'editor@example.test')
  t.equal((await s.request('GET', '/session', { token: s.user.token })).body.user.email, 'editor@example.test', 'GET /session shows the own email')
  t.equal((await login(s, s.user.username, s.user.password)).body.user.email, 'editor@example.test', 'so does the login')
})
