import t from 'tap'
import sharp from 'sharp'
import { createHash, randomBytes } from 'node:crypto'
import { deflateSync } from 'node:zlib'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { assertProblem, onEachDatabase, type TestServer } from '../../../core/testing/index.js'
import type { LoginThrottle } from '../../../core/auth/throttle.js'

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

/**
 * Pins the login throttle's clock, so that "blocked for a second" does not depend on how fast the
 * test machine answers the attempts before. Returns a function that moves the pinned clock.
 */
function pinThrottleClock(s: TestServer) {
  const throttle = s.runtime.container.resolve<LoginThrottle>('loginThrottle')
  let now = Date.now()
  const check = throttle.check.bind(throttle)
  const fail = throttle.fail.bind(throttle)
  throttle.check = (keys: string[]) => check(keys, now)
  throttle.fail = (keys: string[]) => fail(keys, now)
  return (ms: number) => (now += ms)
}

onEachDatabase(t, 'containers/sessions: list, create, rename, end (DELETE and DESTROY)', async (t, s) => {
  const me = s.user
  const login = await s.request('POST', '/session', { json: { login: me.username, password: me.password, name: 'Browser' } })
  const browser = login.body.authentication_token as string

  // create with the desktop app's headers: the session says which app and edit opened it
  const created = await s.request('POST', '/containers/sessions', {
    token: browser,
    json: { session: { name: 'Edit bay 3' } },
    headers: { 'X-APP-CLIENT': '1', 'X-APP-EDIT': 'bay-3', 'X-APP-UIDGIDS': '1000:1000' },
  })
  t.equal(created.status, 201)
  t.match(created.body.session, { id: Number, name: 'Edit bay 3', app: 'app (bay-3)', current: false, authentication_token: /^mt_\d+_/, expires_at: ISO, created_at: ISO })
  const second = created.body.session.authentication_token as string
  const secondId = created.body.session.id as number
  const who = await s.request('GET', '/session', { token: second })
  t.equal(who.status, 200, 'the new token works')
  t.equal(who.body.user.id, me.id)
  const viaForm = await s.request('POST', '/containers/sessions', { token: me.token, form: { name: 'Phone' }, headers: { 'user-agent': 'TestPhone/1.0' } })
  t.equal(viaForm.status, 201)
  t.match(viaForm.body.session, { name: 'Phone', app: 'TestPhone/1.0' })

  // the list: this user's sessions only, no secrets, the calling one marked
  const list = await s.request('GET', '/containers/sessions', { token: second })
  t.equal(list.status, 200)
  t.same(
    list.body.sessions.map((x: any) => [x.name, x.current]),
    [
      ['Phone', false],
      ['Edit bay 3', true],
      ['Browser', false],
    ],
  )
  for (const x of list.body.sessions) t.notOk('authentication_token' in x, 'the list shows no token')
  t.notMatch(list.text, /secret_hash|mt_\d+_/, 'no secret in the list')
  const others = await s.request('GET', '/containers/sessions', { token: s.admin.token })
  t.same(others.body.sessions, [], 'another user sees none of them')

  // rename
  const renamed = await s.request('PUT', `/containers/sessions/${secondId}`, { token: browser, json: { session: { name: 'Edit bay 4' } } })
  t.equal(renamed.status, 200)
  t.match(renamed.body.session, { id: secondId, name: 'Edit bay 4' })
  t.equal((await s.runtime.db.knex('auth_tokens').where({ id: secondId }).first()).name, 'Edit bay 4')
  assertProblem(t, await s.request('PUT', `/containers/sessions/${secondId}`, { token: browser, json: { session: { name: 'x', expires_at: null } } }), 422, ['session[expires_at]'])

  // another user's session is not there for them
  const admins = await s.request('POST', '/containers/sessions', { token: s.admin.token, json: { name: 'Admin laptop' } })
  const adminSession = admins.body.session.id as number
  assertProblem(t, await s.request('PUT', `/containers/sessions/${adminSession}`, { token: browser, json: { name: 'mine now' } }), 404)
  assertProblem(t, await s.request('DELETE', `/containers/sessions/${adminSession}`, { token: browser }), 404)
  assertProblem(t, await s.request('POST', `/containers/sessions/${adminSession}`, { token: browser, headers: { 'X-HTTP-Method-Override': 'DESTROY' } }), 404)
  t.equal((await s.request('GET', '/session', { token: admins.body.session.authentication_token })).status, 200, 'their session still works')
  t.equal((await s.runtime.db.knex('auth_tokens').where({ id: adminSession }).first()).name, 'Admin laptop')
  assertProblem(t, await s.request('PUT', '/containers/sessions/99999', { token: browser, json: { name: 'x' } }), 404)
  for (const [method, p] of [
    ['GET', '/containers/sessions'],
    ['POST', '/containers/sessions'],
    ['PUT', `/containers/sessions/${secondId}`],
    ['DELETE', `/containers/sessions/${secondId}`],
  ])
    assertProblem(t, await s.request(method, p), 401)

  // end a session: DELETE
  const ended = await s.request('DELETE', `/containers/sessions/${secondId}`, { token: browser })
  t.equal(ended.status, 200)
  t.match(ended.body.session, { id: secondId })
  assertProblem(t, await s.request('GET', '/session', { token: second }), 401)
  assertProblem(t, await s.request('DELETE', `/containers/sessions/${secondId}`, { token: browser }), 404)
  t.notOk(
    (await s.request('GET', '/containers/sessions', { token: browser })).body.sessions.some((x: any) => x.id === secondId),
    'an ended session leaves the list',
  )

  // DESTROY through POST: the header, and the _method parameter
  const make = async () => (await s.request('POST', '/containers/sessions', { token: browser, json: { name: 'tmp' } })).body.session
  const a = await make()
  t.equal((await s.request('POST', `/containers/sessions/${a.id}`, { token: browser, headers: { 'X-HTTP-Method-Override': 'DESTROY' } })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: a.authentication_token }), 401)
  const b = await make()
  t.equal((await s.request('POST', `/containers/sessions/${b.id}.json`, { token: browser, query: { _method: 'DESTROY' } })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: b.authentication_token }), 401)
  const c = await make()
  t.equal((await s.request('POST', `/containers/sessions/${c.id}`, { token: browser, query: { _method: 'destroy' } })).status, 200, 'the method token in any case')
  assertProblem(t, await s.request('GET', '/session', { token: c.authentication_token }), 401)
  const revoked = await s.runtime.db.knex('auth_tokens').whereIn('id', [a.id, b.id, c.id]).whereNotNull('revoked_at')
  t.equal(revoked.length, 3, 'revoked in the database')

  // a session can end itself
  t.equal((await s.request('DELETE', `/containers/sessions/${login.body.authentication_token.split('_')[1]}`, { token: browser })).status, 200)
  assertProblem(t, await s.request('GET', '/session', { token: browser }), 401)
})

const verifier = () => randomBytes(48).toString('base64url') // 64 characters of the RFC 7636 alphabet
const challengeOf = (v: string) => createHash('sha256').update(v).digest('base64url')

onEachDatabase(t, 'proof keys: the PKCE flow, single use, expiry and what failures say', async (t, s) => {
  const knex = s.runtime.db.knex
  const v = verifier()
  t.ok(v.length >= 43)
  const registered = await s.request('POST', '/proof_keys', { token: s.user.token, json: { code_challenge: challengeOf(v), code_challenge_method: 'S256' } })
  t.equal(registered.status, 201)
  t.match(registered.body.proof_key, { id: Number, code_challenge_method: 'S256', expires_at: ISO })
  t.notMatch(registered.text, v, 'the verifier never travels to the server at registration')

  const exchanged = await s.request('DELETE', `/proof_keys/${v}`, { headers: { 'X-APP-CLIENT': '1', 'X-APP-EDIT': 'bay-1' } })
  t.equal(exchanged.status, 200)
  t.match(exchanged.body, { authentication_token: /^mt_\d+_/, user: { id: s.user.id, username: s.user.username } })
  const token = exchanged.body.authentication_token
  t.equal((await s.request('GET', '/session', { token })).body.user.id, s.user.id, 'the token signs in as the user who registered the challenge')
  const session = (await s.request('GET', '/containers/sessions', { token })).body.sessions.find((x: any) => x.current)
  t.match(session, { name: 'proof key login', app: 'app (bay-1)' })

  // what does not work: all answer the same 401, whatever the reason
  const again = await s.request('DELETE', `/proof_keys/${v}`)
  assertProblem(t, again, 401)
  const wrong = await s.request('DELETE', `/proof_keys/${verifier()}`)
  assertProblem(t, wrong, 401)
  const late = verifier()
  await s.request('POST', '/proof_keys', { token: s.user.token, json: { code_challenge: challengeOf(late), code_challenge_method: 'S256' } })
  await knex('proof_keys').where({ code_challenge: challengeOf(late) }).update({ expires_at: new Date(Date.now() - 1000) })
  const expired = await s.request('DELETE', `/proof_keys/${late}`)
  assertProblem(t, expired, 401)
  t.equal(wrong.body.detail, again.body.detail, 'a used verifier reads like a wrong one')
  t.equal(expired.body.detail, again.body.detail, 'an expired verifier reads like a wrong one')
  for (const reply of [again, wrong, expired]) {
    t.notOk('authentication_token' in reply.body)
    t.notOk('user' in reply.body)
    t.same(Object.keys(reply.body).sort(), ['code', 'detail', 'request_id', 'status', 'title', 'type'], 'nothing but the problem')
  }
  t.equal((await knex('auth_tokens').where({ name: 'proof key login' })).length, 1, 'one token from one exchange')

  // malformed verifiers and challenges
  assertProblem(t, await s.request('DELETE', '/proof_keys/too-short'), 422, ['code_verifier'])
  assertProblem(t, await s.request('DELETE', `/proof_keys/${'a'.repeat(42)}`), 422, ['code_verifier'])
  assertProblem(t, await s.request('DELETE', `/proof_keys/${'a'.repeat(129)}`), 422, ['code_verifier'])
  assertProblem(t, await s.request('DELETE', `/proof_keys/${'a'.repeat(42)}%2B`), 422, ['code_verifier'])
  assertProblem(t, await s.request('POST', '/proof_keys', { json: { code_challenge: challengeOf(verifier()), code_challenge_method: 'S256' } }), 401)
  assertProblem(t, await s.request('POST', '/proof_keys', { token: s.user.token, json: { code_challenge: challengeOf(verifier()), code_challenge_method: 'plain' } }), 422, ['code_challenge_method'])
  assertProblem(t, await s.request('POST', '/proof_keys', { token: s.user.token, json: { code_challenge: 'short', code_challenge_method: 'S256' } }), 422, ['code_challenge'])
  assertProblem(t, await s.request('POST', '/proof_keys', { token: s.user.token, json: { code_challenge: challengeOf(verifier()), user_id: s.admin.id } }), 422, ['user_id'])
  const twice = challengeOf(verifier())
  t.equal((await s.request('POST', '/proof_keys', { token: s.user.token, form: { code_challenge: twice, code_challenge_method: 'S256' } })).status, 201)
  assertProblem(t, await s.request('POST', '/proof_keys', { token: s.admin.token, json: { code_challenge: twice, code_challenge_method: 'S256' } }), 409)

  // guessing verifiers is throttled like password logins
  const advance = pinThrottleClock(s)
  const pending = verifier()
  await s.request('POST', '/proof_keys', { token: s.user.token, json: { code_challenge: challengeOf(pending), code_challenge_method: 'S256' } })
  let status = 401
  for (let i = 0; i < 10 && status === 401; i++) status = (await s.request('DELETE', `/proof_keys/${verifier()}`)).status
  t.equal(status, 429, 'guessing stops with 429')
  const blocked = await s.request('DELETE', `/proof_keys/${pending}`)
  assertProblem(t, blocked, 429)
  t.match(blocked.headers.get('retry-after'), /^[1-9]\d*$/)
  t.equal((await knex('proof_keys').where({ code_challenge: challengeOf(pending) }).first()).used_at, null, 'a throttled exchange does not use the key')
  advance(60 * 60_000)
  t.equal((await s.request('DELETE', `/proof_keys/${pending}`)).status, 200, 'the right verifier works once the block has passed')
})

onEachDatabase(t, 'login throttle: 429 with Retry-After after five failures, even with the right password', async (t, s) => {
  const advance = pinThrottleClock(s)
  const attempt = (login: string, password: string) => s.request('POST', '/session', { json: { login, password } })
  for (let i = 1; i <= 5; i++) assertProblem(t, await attempt('editor', `wrong-password-${i}`), 401)
  const tokensBefore = (await s.runtime.db.knex('auth_tokens')).length

  const blocked = await attempt('editor', s.user.password)
  assertProblem(t, blocked, 429)
  t.match(blocked.headers.get('retry-after'), /^[1-9]\d*$/, 'Retry-After in whole seconds')
  t.notOk('authentication_token' in blocked.body, 'no token')
  t.notMatch(blocked.body.detail, /password|editor/i, 'the body does not say whether the password was right')
  assertProblem(t, await attempt('EDITOR', s.user.password), 429, undefined)
  assertProblem(t, await s.request('POST', '/session', { form: { username: 'editor', password: s.user.password } }), 429)
  t.equal((await s.runtime.db.knex('auth_tokens')).length, tokensBefore, 'no login token was issued while blocked')
  // API keys are not logins: they keep working
  t.equal((await s.request('GET', '/session', { token: s.user.token })).status, 200)

  // the block passes; a successful login clears the username's failures
  advance(2_000)
  t.equal((await attempt('editor', s.user.password)).status, 200)
  assertProblem(t, await attempt('editor', 'wrong-again-1'), 401)
})

/** a valid 1×1 PNG, built chunk by chunk */
function tinyPng(): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    return c >>> 0
  })
  const crc32 = (buf: Buffer) => {
    let c = 0xffffffff
    for (const byte of buf) c = crcTable[(c ^ byte) & 0xff] ^ (c >>> 8)
    return (c ^ 0xffffffff) >>> 0
  }
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data])
    const out = Buffer.alloc(body.length + 8)
    out.writeUInt32BE(data.length, 0)
    body.copy(out, 4)
    out.writeUInt32BE(crc32(body), body.length + 4)
    return out
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(1, 0) // width
  ihdr.writeUInt32BE(1, 4) // height
  ihdr.set([8, 6, 0, 0, 0], 8) // 8-bit RGBA
  const pixels = deflateSync(Buffer.from([0, 0x33, 0x66, 0x99, 0xff])) // filter byte + one pixel
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', pixels), chunk('IEND', Buffer.alloc(0))])
}

const upload = (bytes: Buffer, name: string, type: string) => {
  const form = new FormData()
  form.append('background', new Blob([new Uint8Array(bytes)], { type }), name)
  return form
}

const filesIn = async (dir: string) => (await readdir(dir).catch(() => [] as string[])).sort()

onEachDatabase(t, 'settings: get, put, validation and whose they are', async (t, s) => {
  const me = s.user
  const empty = await s.request('GET', `/users/${me.id}/settings`, { token: me.token })
  t.equal(empty.status, 200)
  t.same(empty.body, { settings: { user_id: me.id, background_url: null } })

  const put = await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: { settings: { language: 'de', theme: 'dark', items_per_page: 50, email_notifications: false } } })
  t.equal(put.status, 200)
  t.same(put.body.settings, { user_id: me.id, language: 'de', theme: 'dark', items_per_page: 50, email_notifications: false, background_url: null })
  const more = await s.request('PUT', `/users/${me.id}/settings.json`, { token: me.token, form: { 'settings[timezone]': 'Europe/Berlin', 'settings[email_notifications]': 'true' } })
  t.equal(more.status, 200)
  t.match(more.body.settings, { language: 'de', timezone: 'Europe/Berlin', email_notifications: true }, 'settings merge; form values are typed')
  t.same((await s.request('GET', `/users/${me.id}/settings`, { token: me.token })).body, more.body, 'GET shows what PUT stored')
  const row = await s.runtime.db.knex('user_settings').where({ user_id: me.id }).first()
  const stored = typeof row.settings === 'string' ? JSON.parse(row.settings) : row.settings
  t.same(stored, { language: 'de', theme: 'dark', items_per_page: 50, email_notifications: true, timezone: 'Europe/Berlin' })

  // unknown keys and bad values are refused, and nothing is stored
  const unknown = await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: { settings: { foo: 1, theme: 'light' } } })
  assertProblem(t, unknown, 422, ['settings[foo]'])
  t.match(unknown.body.errors, [{ param: 'settings[foo]', message: /not a known parameter/ }])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: { settings: { items_per_page: 5 } } }), 422, ['settings[items_per_page]'])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: { settings: { language: 'xx' } } }), 422, ['settings[language]'])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: { settings: { timezone: '../../etc' } } }), 422, ['settings[timezone]'])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: {} }), 422, ['settings'])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/settings`, { token: me.token, json: { settings: { background_url: 'http://evil.test/x.png' } } }), 422, ['settings[background_url]'])
  t.equal((await s.request('GET', `/users/${me.id}/settings`, { token: me.token })).body.settings.theme, 'dark', 'unchanged')

  // someone else's settings
  assertProblem(t, await s.request('GET', `/users/${s.admin.id}/settings`, { token: me.token }), 403)
  assertProblem(t, await s.request('PUT', `/users/${s.admin.id}/settings`, { token: me.token, json: { settings: { theme: 'light' } } }), 403)
  assertProblem(t, await s.request('GET', `/users/${me.id}/settings`), 401)
  t.equal((await s.request('GET', `/users/${me.id}/settings`, { token: s.admin.token })).body.settings.theme, 'dark', 'administrators read them')
  t.equal((await s.request('PUT', `/users/${me.id}/settings`, { token: s.admin.token, json: { settings: { theme: 'system' } } })).status, 200, 'and change them')
  t.equal((await s.request('GET', `/users/${me.id}/settings`, { token: me.token })).body.settings.theme, 'system')
  assertProblem(t, await s.request('GET', '/users/99999/settings', { token: s.admin.token }), 404)
})

onEachDatabase(t, 'settings: background image upload', async (t, s) => {
  const me = s.user
  const dir = path.join(s.dataDir, 'users', String(me.id))
  const png = tinyPng()
  const uploads = path.join(s.dataDir, 'tmp', 'uploads')

  // refused uploads first: nothing may be stored by them
  const text = await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(Buffer.from('just some text, not an image\n'), 'background.png', 'image/png') })
  assertProblem(t, text, 415)
  const huge = Buffer.alloc(10 * 1024 * 1024 + 1)
  png.copy(huge)
  const tooBig = await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(huge, 'big.png', 'image/png') })
  assertProblem(t, tooBig, 413)
  // only the first bytes of a PNG: decoded, not just sniffed
  const truncated = Buffer.concat([png.subarray(0, 33), Buffer.alloc(200, 0x41)])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(truncated, 'b.png', 'image/png') }), 415)
  t.same(await filesIn(dir), [], 'nothing stored for refused uploads')
  t.same(await filesIn(uploads), [], 'no temporary files left behind')
  const noFile = new FormData()
  noFile.append('note', 'no file here')
  assertProblem(t, await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: noFile }), 422, ['background'])
  assertProblem(t, await s.request('PUT', `/users/${s.admin.id}/background`, { token: me.token, multipart: upload(png, 'b.png', 'image/png') }), 403)
  assertProblem(t, await s.request('PUT', `/users/${me.id}/background`, { multipart: upload(png, 'b.png', 'image/png') }), 401)
  assertProblem(t, await s.request('GET', `/users/${me.id}/background`, { token: me.token }), 404)
  t.same(await filesIn(path.join(s.dataDir, 'users', String(s.admin.id))), [], 'nothing stored for another user')

  // a real PNG, whatever name and type the client claims
  const stored = await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(png, 'holiday.jpg', 'application/octet-stream') })
  t.equal(stored.status, 200)
  t.match(stored.body.settings, { user_id: me.id, background_url: `/api/v1/users/${me.id}/background` })
  t.same(await filesIn(dir), ['background.png'], 'stored under <dataDir>/users/<id>/')
  t.same(await readFile(path.join(dir, 'background.png')), png, 'the same bytes on disk')
  const fetched = await s.request('GET', `/users/${me.id}/background`, { token: me.token })
  t.equal(fetched.status, 200)
  t.match(fetched.headers.get('content-type'), /^image\/png/)
  t.same(fetched.buffer, png, 'GET returns the same bytes')
  t.same((await s.request('GET', `/users/${me.id}/background`, { token: s.admin.token })).buffer, png, 'administrators fetch it too')
  assertProblem(t, await s.request('GET', `/users/${me.id}/background`, { token: (await s.createUser('nosy')).token }), 403)

  // a refused replacement keeps the old image
  assertProblem(t, await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(Buffer.from('GIF89a not accepted'), 'x.gif', 'image/gif') }), 415)
  t.same(await filesIn(dir), ['background.png'])

  // a JPEG replaces the PNG
  const fakeJpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), randomBytes(64), Buffer.from([0xff, 0xd9])])
  assertProblem(t, await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(fakeJpeg, 'b.jpg', 'image/jpeg') }), 415)
  t.same(await filesIn(dir), ['background.png'], 'a file that only starts like a JPEG changes nothing')
  const jpeg = await sharp({ create: { width: 16, height: 9, channels: 3, background: '#336699' } }).jpeg().toBuffer()
  t.equal((await s.request('PUT', `/users/${me.id}/background`, { token: me.token, multipart: upload(jpeg, 'b.jpg', 'image/jpeg') })).status, 200)
  t.same(await filesIn(dir), ['background.jpg'], 'the old image is removed')
  const again = await s.request('GET', `/users/${me.id}/background`, { token: me.token })
  t.match(again.headers.get('content-type'), /^image\/jpeg/)
  t.same(again.buffer, jpeg)
  t.same(await filesIn(uploads), [], 'no temporary files left behind')
})
