import t from 'tap'
import http from 'node:http'
import { assertProblem, onEachDatabase } from '../../core/testing/index.js'
import { tokenCalls, tokenPlugin } from '../fixtures/token-plugin.js'

onEachDatabase(
  t,
  'a plugin adds a way to authenticate (RegisterApi.credentials.add)',
  async (t, s) => {
    const asEditor = { 'x-test-token': `user:${s.user.username}` }
    const first = await s.request('GET', '/session/user_id', { headers: asEditor })
    t.equal(first.status, 200, 'the plugin credential reaches an authenticated core route')
    t.same(first.body, { hash: { user_id: s.user.id } })
    const resolved = tokenCalls.resolve
    const again = await s.request('GET', '/session', { headers: asEditor })
    t.equal(again.body.user.username, s.user.username)
    t.equal(tokenCalls.resolve, resolved, 'the second request is answered from the resolver cache')

    const unknown = await s.request('GET', '/session/user_id', { headers: { 'x-test-token': 'user:nobody' } })
    assertProblem(t, unknown, 401)
    t.match(unknown.body.detail, /invalid, expired or revoked/)
    assertProblem(t, await s.request('GET', '/users', { headers: asEditor, token: 'mk_1_garbage' }), 401)

    // the core's resolver comes first: with both credentials the API key decides
    const both = await s.request('GET', '/session/user_id', { headers: asEditor, token: s.admin.token })
    t.same(both.body, { hash: { user_id: s.admin.id } }, 'core credentials first')
    t.equal((await s.request('GET', '/users', { headers: asEditor })).status, 200, 'any authenticated route')
  },
  { extraPlugins: [tokenPlugin] },
)

onEachDatabase(
  t,
  'a principal limited to a scope reaches only the routes that list it',
  async (t, s) => {
    const guest = { 'x-test-token': 'guest:7' }
    const own = await s.request('GET', '/guest-things/7', { headers: guest })
    t.equal(own.status, 200)
    t.same(own.body.thing, { id: 7, via: 'test-guest', scope: { kind: 'test-guest', id: 7 }, guest: true })
    const bearer = await s.request('GET', '/guest-things/7', { headers: { authorization: 'Bearer tt-guest-7' } })
    t.equal(bearer.body.thing?.via, 'test-guest', 'a bearer credential the core does not recognise goes on to the plugin')

    for (const [method, path] of [
      ['GET', '/session/user_id'],
      ['GET', '/users'],
      ['GET', '/templates'],
      ['POST', '/users/1/api_keys'],
    ]) {
      const refused = await s.request(method, path, { headers: guest })
      assertProblem(t, refused, 403)
      t.match(refused.body.detail, /limited to a test-guest/, `${method} ${path}: a guest is not a user`)
    }
    t.equal((await s.request('GET', '/version', { headers: guest })).status, 200, 'public routes stay public')
    assertProblem(t, await s.request('GET', '/guest-things/7'), 401)
    t.equal((await s.request('GET', '/guest-things/7', { token: s.user.token })).body.thing.guest, false, 'a full user passes a scoped route too')
  },
  { extraPlugins: [tokenPlugin] },
)

onEachDatabase(t, 'credentials on one keep-alive connection: each request is the user of the credential it sends', async (t, s) => {
  // the digest of a connection's last credential is kept with the connection: a different one must not reuse it
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const sockets = new Set<unknown>()
  const get = (token: string) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.get(`${s.url}/session/user_id`, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
        sockets.add(res.socket)
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk) => (text += chunk))
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }))
      })
      req.on('error', reject)
    })
  try {
    const [prefix] = s.admin.token.match(/^mk_\d+_/)!
    for (const [token, expected] of [
      [s.admin.token, s.admin.id],
      [s.admin.token, s.admin.id],
      [s.user.token, s.user.id],
      [`${prefix}${'x'.repeat(s.admin.token.length - prefix.length)}`, 401],
      [s.admin.token, s.admin.id],
    ] as const) {
      const res = await get(token)
      if (expected === 401) t.equal(res.status, 401, 'a wrong secret for the same key id')
      else t.same([res.status, res.body], [200, { hash: { user_id: expected } }])
    }
    t.equal(sockets.size, 1, 'all on one connection')
  } finally {
    agent.destroy()
  }
})
