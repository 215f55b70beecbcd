import t from 'tap'
import { assertProblem, onEachDatabase } from '../../core/testing/index.js'

onEachDatabase(t, 'session login, check and logout', async (t, s) => {
  const login = await s.request('POST', '/session.json', { form: { login: s.user.username, password: s.user.password } })
  t.equal(login.status, 200)
  t.match(login.body, { authentication_token: /^mt_\d+_/, user: { id: s.user.id, username: 'editor', role: 'User' } })
  t.notOk('password_hash' in login.body.user, 'no password hash in the user')
  const token = login.body.authentication_token

  const me = await s.request('GET', '/session', { headers: { cookie: `_auth_token=${token}` } })
  t.equal(me.status, 200)
  t.equal(me.body.user.id, s.user.id)
  t.equal((await s.request('GET', '/session', { query: { auth_token: token } })).status, 200, 'auth_token parameter')
  t.same((await s.request('GET', '/session/user_id', { token })).body, { hash: { user_id: s.user.id } })

  t.equal((await s.request('DELETE', '/session', { token })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token }), 401)

  assertProblem(t, await s.request('POST', '/session', { json: { login: 'editor', password: 'wrong-password' } }), 401)
  assertProblem(t, await s.request('POST', '/session', { json: { login: 'nobody', password: 'wrong-password' } }), 401)
  assertProblem(t, await s.request('POST', '/session', { json: { login: 'editor' } }), 422, ['password'])
  assertProblem(t, await s.request('GET', '/session'), 401)
  assertProblem(t, await s.request('GET', '/session', { token: 'mk_1_' + 'x'.repeat(43) }), 401)
  assertProblem(t, await s.request('POST', '/session', { raw: '{"login":', headers: { 'content-type': 'application/json' } }), 400)
})
