import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer } from '../../core/testing/index.js'

const keyRows = (s: TestServer, userId: number) => s.runtime.db.knex('api_keys').where({ user_id: userId }).orderBy('id')

onEachDatabase(t, 'create, list, use and delete API keys', async (t, s) => {
  const me = s.user
  const before = await s.request('GET', `/users/${me.id}/api_keys`, { token: me.token })
  t.equal(before.status, 200)
  t.same(Object.keys(before.body), ['api_keys'])
  t.equal(before.body.api_keys.length, 1, 'the key the test harness made')

  const created = await s.request('POST', `/users/${me.id}/api_keys`, { token: me.token, json: { api_key: { name: 'render farm' } } })
  t.equal(created.status, 201)
  t.same(Object.keys(created.body), ['apikey'], 'root key "apikey" (wire.md)')
  const key = created.body.apikey
  t.match(key, { id: Number, name: 'render farm', key: /^mk_\d+_[A-Za-z0-9_-]{43}$/, user_id: me.id, created_at: /Z$/, updated_at: /Z$/, last_used_at: null })
  t.notOk('secret_hash' in key, 'no digest in the answer')

  const viaForm = await s.request('POST', `/users/${me.id}/api_keys.json`, { token: me.token, form: { 'api_key[name]': 'laptop' } })
  t.equal(viaForm.status, 201)
  const viaTopLevel = await s.request('POST', `/users/${me.id}/api_keys`, { token: me.token, query: { name: 'script' } })
  t.equal(viaTopLevel.status, 201, 'a top-level name works too')
  t.not(viaForm.body.apikey.key, key.key, 'every key has its own secret')

  // the secret is shown once: never in the list
  const list = await s.request('GET', `/users/${me.id}/api_keys`, { token: me.token })
  t.same(
    list.body.api_keys.map((k: { name: string }) => k.name),
    ['test', 'render farm', 'laptop', 'script'],
    'several keys per user, oldest first',
  )
  const { key: _secret, ...listedAs } = key
  t.same(list.body.api_keys[1], listedAs, 'listed as created, but for the secret (plain rows on both databases: ids, dates)')
  for (const k of list.body.api_keys) {
    t.notOk('key' in k, `no secret in the list (${k.name})`)
    t.notOk('secret_hash' in k, `no digest in the list (${k.name})`)
  }
  t.notMatch(list.text, key.key.split('_')[2], 'the secret appears nowhere in the list')

  // each key authenticates as its user, on its own
  for (const token of [key.key, viaForm.body.apikey.key, me.token]) {
    const session = await s.request('GET', '/session', { token })
    t.equal(session.status, 200)
    t.equal(session.body.user.id, me.id)
  }
  t.equal((await s.request('GET', '/session', { headers: { authorization: `bearer ${key.key}` } })).status, 200, 'the scheme is case-insensitive')

  // the database holds a digest only
  const rows = await keyRows(s, me.id)
  t.equal(rows.length, 4)
  // the secret is base64url and may itself hold underscores
  const secret = key.key.replace(/^mk_\d+_/, '')
  for (const row of rows) {
    for (const [column, value] of Object.entries(row)) {
      const text = value instanceof Date ? value.toISOString() : String(value)
      t.notOk(text.includes(secret), `the secret is not stored (${column})`)
      t.notOk(text.includes(key.key), `the full key is not stored (${column})`)
    }
  }
  t.match(rows.find((r: { id: number }) => r.id === key.id), { name: 'render farm', secret_hash: /^[0-9a-f]{64}$/ })

  // deleting a key: 401 on the very next request, the other keys keep working
  t.equal((await s.request('GET', '/session', { token: key.key })).status, 200, 'the key is cached as valid')
  const deleted = await s.request('DELETE', `/user/${me.id}/api_keys/${key.id}`, { token: me.token })
  t.equal(deleted.status, 200)
  t.match(deleted.body, { apikey: { id: key.id, name: 'render farm', user_id: me.id } })
  t.notOk('key' in deleted.body.apikey)
  assertProblem(t, await s.request('GET', '/session', { token: key.key }), 401)
  t.equal((await s.request('GET', '/session', { token: viaForm.body.apikey.key })).status, 200, 'other keys of the user still work')
  t.equal((await keyRows(s, me.id)).length, 3, 'the row is gone')
  assertProblem(t, await s.request('DELETE', `/user/${me.id}/api_keys/${key.id}`, { token: me.token }), 404)

  // a key may delete itself; the next request with it is refused
  const self = viaTopLevel.body.apikey
  t.equal((await s.request('DELETE', `/user/${me.id}/api_keys/${self.id}`, { token: self.key })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: self.key }), 401)
})

onEachDatabase(t, 'a user manages their own keys, an administrator anyone', async (t, s) => {
  const other = await s.createUser('assistant')
  const otherKey = (await keyRows(s, other.id))[0]

  for (const [method, path] of [
    ['GET', `/users/${other.id}/api_keys`],
    ['POST', `/users/${other.id}/api_keys`],
    ['DELETE', `/user/${other.id}/api_keys/${otherKey.id}`],
  ] as const) {
    const denied = await s.request(method, path, { token: s.user.token, json: method === 'POST' ? { api_key: { name: 'stolen' } } : undefined })
    assertProblem(t, denied, 403)
    t.notMatch(denied.text, /mk_/, 'no key material in the refusal')
    assertProblem(t, await s.request(method, path), 401)
    assertProblem(t, await s.request(method, path, { token: 'mk_999_' + 'A'.repeat(43) }), 401)
  }
  // another user's key through one's own user id is unknown, not deleted
  assertProblem(t, await s.request('DELETE', `/user/${s.user.id}/api_keys/${otherKey.id}`, { token: s.user.token }), 404)
  t.equal((await keyRows(s, other.id)).length, 1, "the other user's key is untouched")
  t.equal((await s.request('GET', '/session', { token: other.token })).status, 200)

  // the administrator lists, creates and deletes keys of any user
  const listed = await s.request('GET', `/users/${other.id}/api_keys`, { token: s.admin.token })
  t.same(
    listed.body.api_keys.map((k: { id: number; user_id: number }) => [k.id, k.user_id]),
    [[otherKey.id, other.id]],
  )
  const made = await s.request('POST', `/users/${other.id}/api_keys`, { token: s.admin.token, json: { api_key: { name: 'for the assistant' } } })
  t.equal(made.status, 201)
  t.equal(made.body.apikey.user_id, other.id, 'the key belongs to the user in the path, not the administrator')
  const session = await s.request('GET', '/session', { token: made.body.apikey.key })
  t.equal(session.body.user.id, other.id, 'and acts as that user')
  assertProblem(t, await s.request('POST', '/roles', { token: made.body.apikey.key, json: { role: { name: 'x', role_matrix: {} } } }), 403, undefined)

  t.equal((await s.request('DELETE', `/user/${other.id}/api_keys/${otherKey.id}`, { token: s.admin.token })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: other.token }), 401)
  t.equal((await s.request('DELETE', `/user/${other.id}/api_keys/${made.body.apikey.id}`, { token: s.admin.token })).status, 200)
  t.same((await s.request('GET', `/users/${other.id}/api_keys`, { token: s.admin.token })).body, { api_keys: [] }, 'a user without keys: an empty list, not a 404')

  // unknown users and keys
  assertProblem(t, await s.request('GET', '/users/999999/api_keys', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('POST', '/users/999999/api_keys', { token: s.admin.token, json: { api_key: { name: 'x' } } }), 404)
  assertProblem(t, await s.request('DELETE', '/user/999999/api_keys/1', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('DELETE', `/user/${other.id}/api_keys/999999`, { token: s.admin.token }), 404)
  assertProblem(t, await s.request('GET', '/users/abc/api_keys', { token: s.admin.token }), 422, ['user_id'])
})

onEachDatabase(t, 'bad input creates no key', async (t, s) => {
  const path = `/users/${s.user.id}/api_keys`
  const count = async () => (await keyRows(s, s.user.id)).length
  const before = await count()
  assertProblem(t, await s.request('POST', path, { token: s.user.token }), 422, ['api_key[name]'])
  assertProblem(t, await s.request('POST', path, { token: s.user.token, json: { api_key: {} } }), 422, ['api_key[name]'])
  assertProblem(t, await s.request('POST', path, { token: s.user.token, json: { api_key: { name: '' } } }), 422, ['api_key[name]'])
  assertProblem(t, await s.request('POST', path, { token: s.user.token, json: { api_key: { name: 'x'.repeat(201) } } }), 422, ['api_key[name]'])
  assertProblem(t, await s.request('POST', path, { token: s.user.token, json: { api_key: { name: 'x', user_id: s.admin.id } } }), 422, ['api_key[user_id]'])
  assertProblem(t, await s.request('POST', path, { token: s.user.token, json: { api_key: { name: 'x' }, admin: true } }), 422, ['admin'])
  t.equal(await count(), before, 'nothing stored')
})
