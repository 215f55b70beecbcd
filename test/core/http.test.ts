import { readdir } from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer } from '../../core/testing/index.js'
import { ECHO_MAX_FILE, echoPlugin } from '../fixtures/echo-plugin.js'

const options = { extraPlugins: [echoPlugin] }

/** polls a condition that another party makes true (a file written, a file removed); false if it never does */
async function eventually(condition: () => Promise<boolean>, tries = 100): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return false
}

const uploadsLeft = async (s: TestServer) => (await readdir(path.join(s.dataDir, 'tmp', 'uploads')).catch(() => [] as string[])).length

onEachDatabase(
  t,
  'suffix, request id, unknown routes, method override',
  async (t, s) => {
    const token = s.user.token
    const plain = await s.request('GET', '/echo', { token, query: { page: '2' } })
    const suffixed = await s.request('GET', '/echo.json', { token, query: { page: '2' } })
    t.equal(suffixed.status, 200, '.json suffix reaches the same route')
    t.same(suffixed.body, plain.body, '.json suffix: same answer')
    t.same(suffixed.body.echo.input, { page: 2 })
    t.equal((await s.request('GET', '/session.json', { token })).body.user.id, s.user.id, '.json suffix on a core route')

    const id = plain.headers.get('x-request-id')
    t.match(id, /^[0-9a-f-]{36}$/, 'a request id is generated')
    t.not(suffixed.headers.get('x-request-id'), id, 'one id per request')
    const echoed = await s.request('GET', '/echo', { token, headers: { 'x-request-id': 'client-req.42:a' } })
    t.equal(echoed.headers.get('x-request-id'), 'client-req.42:a', 'a sane incoming id is echoed')
    const insane = await s.request('GET', '/echo', { token, headers: { 'x-request-id': 'x'.repeat(101) } })
    t.match(insane.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, 'an overlong incoming id is replaced')
    const spaced = await s.request('GET', '/echo', { token, headers: { 'x-request-id': 'a b<script>' } })
    t.match(spaced.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, 'an incoming id with odd characters is replaced')

    const unknown = await s.request('GET', '/no/such/route', { token })
    assertProblem(t, unknown, 404)
    t.equal(unknown.body.code, 'not_found')
    t.equal(unknown.body.request_id, unknown.headers.get('x-request-id'), 'the problem body carries the request id of the header')
    t.ok(unknown.headers.get('x-request-id'), 'errors carry a request id too')
    assertProblem(t, await s.request('GET', '/no/such/route'), 404)
    const outside = await fetch(`${s.base}/elsewhere`)
    t.equal(outside.status, 404, 'outside /api/v1: 404')
    t.match(outside.headers.get('content-type'), /problem\+json/)

    const wrongMethod = await s.request('PATCH', '/echo', { token })
    t.equal(wrongMethod.status, 405, 'a known path with another method: 405')
    t.equal(wrongMethod.body.code, 'method_not_allowed')
    t.match(wrongMethod.headers.get('allow') ?? '', /GET/, 'Allow lists the methods')
    const strange = await s.request('PURGE', '/echo', { token })
    t.equal(strange.status, 501, 'an unknown method: 501, not 500')
    t.equal(strange.body.code, 'not_implemented')
    t.equal((await s.request('PURGE', '/no/such/route', { token })).status, 501, 'an unknown method on an unknown path: 501 too')

    t.equal(wrongMethod.headers.get('allow'), 'HEAD, GET, POST', 'Allow: every method of the path, HEAD beside GET')
    const onId = await s.request('GET', '/echo/7', { token })
    assertProblem(t, onId, 405)
    t.equal(onId.headers.get('allow'), 'PUT, DELETE')
    t.match(onId.body.detail, /GET \/api\/v1\/echo\/7 is not allowed; allowed: PUT, DELETE/)
    const options = await s.request('OPTIONS', '/echo', { token })
    t.equal(options.status, 200, 'OPTIONS on a known path: 200')
    t.equal(options.headers.get('allow'), 'HEAD, GET, POST')
    t.equal(options.text, '')
    assertProblem(t, await s.request('OPTIONS', '/no/such/route', { token }), 404)
    const head = await fetch(`${s.url}/echo/public`, { method: 'HEAD' })
    t.equal(head.status, 200, 'HEAD reaches the GET route')
    t.equal((await head.arrayBuffer()).byteLength, 0, 'without a body')
    t.ok(head.headers.get('x-request-id'))
    t.equal((await s.request('GET', '/echo/', { token, query: { page: '2' } })).body?.echo?.input?.page, 2, 'a trailing slash reaches the route')
    t.equal((await s.request('GET', '/ECHO/Public')).status, 200, 'literal segments without regard to case')
    t.equal((await s.request('GET', '/echo/public.json')).status, 200, '.json after a literal')
    t.same((await s.request('DELETE', '/echo/5.json', { token })).body.echo.params, { id: 5 }, '.json after a parameter is not part of it')
    assertProblem(t, await s.request('GET', '/echo//public', { token }), 404)

    const destroyed = await s.request('POST', '/echo/7', { token, headers: { 'x-http-method-override': 'DESTROY' } })
    t.equal(destroyed.status, 200, 'POST + X-HTTP-Method-Override: DESTROY reaches the DELETE route')
    t.same(destroyed.body.echo, { input: {}, typed: false, params: { id: 7 }, method: 'DELETE' })
    const viaParam = await s.request('POST', '/echo/8', { token, query: { _method: 'put' }, json: { page: 3 } })
    // `_method` is a framework parameter: the JSON body stays typed
    t.same(viaParam.body.echo, { input: { page: 3 }, typed: true, params: { id: 8 }, method: 'PUT' }, '_method=put reaches the PUT route')
    const withToken = await s.request('POST', '/echo', { query: { auth_token: token }, json: { page: 3 } })
    t.equal(withToken.body.echo.typed, true, 'a credential in the query string keeps the JSON body typed')
    const notTunnelled = await s.request('POST', '/echo/9', { token, headers: { 'x-http-method-override': 'GET' } })
    t.equal(notTunnelled.status, 405, 'only DELETE/DESTROY/PUT/PATCH may be tunnelled')
    const getOverride = await s.request('GET', '/echo/9', { token, headers: { 'x-http-method-override': 'DELETE' } })
    t.equal(getOverride.status, 405, 'a GET is never turned into a DELETE')

    const invalidId = await s.request('DELETE', '/echo/abc', { token })
    assertProblem(t, invalidId, 422, ['id'])
  },
  options,
)

onEachDatabase(
  t,
  'bracket parameters nest alike from query strings, forms and JSON',
  async (t, s) => {
    const token = s.user.token
    const want = { thing: { name: 'Reel 1', count: 3, flag: true, tags: ['a', 'b'], nested: { deep: { value: 'v' } } }, enabled: false }
    const flat = {
      'thing[name]': 'Reel 1',
      'thing[count]': '3',
      'thing[flag]': 'true',
      'thing[tags][]': ['a', 'b'],
      'thing[nested][deep][value]': 'v',
      enabled: 'false',
    }
    const query = new URLSearchParams()
    for (const [k, v] of Object.entries(flat)) for (const item of Array.isArray(v) ? v : [v]) query.append(k, item)

    const fromQuery = await s.request('GET', `/echo?${query}`, { token })
    t.equal(fromQuery.status, 200)
    t.same(fromQuery.body.echo.input, want, 'query string nests and coerces')
    t.equal(fromQuery.body.echo.typed, false)

    const fromForm = await s.request('POST', '/echo', { token, form: flat })
    t.same(fromForm.body.echo.input, want, 'form body nests and coerces')

    const fromJson = await s.request('POST', '/echo', { token, json: want })
    t.same(fromJson.body.echo.input, want, 'JSON body carries the same nesting')
    t.equal(fromJson.body.echo.typed, true)

    const stringBooleans = await s.request('POST', '/echo', { token, json: { thing: { name: 'x', flag: 'false' }, enabled: 'true' } })
    t.equal(stringBooleans.status, 200, '"true"/"false" strings are booleans in JSON too')
    t.same(stringBooleans.body.echo.input, { thing: { name: 'x', flag: false }, enabled: true })

    const mixed = await s.request('POST', '/echo?page=4', { token, json: { thing: { name: 'y' } } })
    t.same(mixed.body.echo.input, { page: 4, thing: { name: 'y' } }, 'query string and JSON body merge')
    const bodyWins = await s.request('POST', '/echo?page=4', { token, form: { page: '5' } })
    t.same(bodyWins.body.echo.input, { page: 5 }, 'the body wins over the query string')

    const withToken = await s.request('GET', '/echo', { query: { auth_token: token, page: '1' } })
    t.same(withToken.body.echo.input, { page: 1 }, 'auth_token is not a route parameter')
    t.same((await s.request('GET', '/echo?page=1&format=json', { token })).body.echo.input, { page: 1 }, 'format is dropped where the route does not declare it')
    t.same((await s.request('GET', '/echo/format?format=avid', { token })).body.echo.input, { format: 'avid' }, 'a route that declares format gets it')

    // JSON is typed: a string is not an integer, and nothing is coerced
    const typed = await s.request('POST', '/echo', { token, json: { thing: { name: 'x', count: '3' } } })
    assertProblem(t, typed, 422, ['thing[count]'])
  },
  options,
)

onEachDatabase(
  t,
  'invalid parameters: 422 naming every one in bracket form; nothing reaches the handler',
  async (t, s) => {
    const token = s.user.token
    const many = await s.request('POST', '/echo', {
      token,
      json: { thing: { name: '', count: -1, flag: 'maybe', tags: 'a', nested: { deep: {} }, colour: 'red' }, extra: 1 },
    })
    assertProblem(t, many, 422, ['extra', 'thing[colour]', 'thing[count]', 'thing[flag]', 'thing[name]', 'thing[nested][deep][value]', 'thing[tags]'])
    t.equal(many.body.code, 'invalid_parameters')
    t.equal(many.body.title, 'Invalid parameters')
    const messages = Object.fromEntries(many.body.errors.map((e: { param: string; message: string }) => [e.param, e.message]))
    t.equal(messages.extra, 'is not a known parameter')
    t.equal(messages['thing[flag]'], 'must be true or false')
    t.equal(messages['thing[nested][deep][value]'], 'is required')
    t.match(many.body.detail, /thing\[name\]/, 'the detail names the parameters too')

    const required = await s.request('POST', '/echo', { token, form: { 'thing[count]': 'x' } })
    assertProblem(t, required, 422, ['thing[count]', 'thing[name]'])

    const unknownQuery = await s.request('GET', '/echo', { token, query: { colour: 'red', 'thing[name]': 'x', 'thing[size]': '1' } })
    assertProblem(t, unknownQuery, 422, ['colour', 'thing[size]'])

    const notObject = await s.request('POST', '/echo', { token, json: ['a'] })
    assertProblem(t, notObject, 400)

    // a JSON key named __proto__ must neither pass as a parameter nor change the shape of the input
    const proto = await s.request('POST', '/echo', { token, raw: '{"__proto__": {"thing": {"name": "sneaky"}}}', headers: { 'content-type': 'application/json' } })
    assertProblem(t, proto, 400)
    t.notMatch(proto.text, /sneaky/)
    t.equal(({} as any).thing, undefined, 'Object.prototype untouched')
  },
  options,
)

onEachDatabase(
  t,
  'malformed and oversized bodies, limits on parameters',
  async (t, s) => {
    const token = s.user.token
    const asText = await s.request('POST', '/echo', { token, raw: '{"thing": {"name": "x"}}', headers: { 'content-type': 'text/plain' } })
    assertProblem(t, asText, 415)
    t.match(asText.body.detail, /JSON/)
    assertProblem(t, await s.request('POST', '/echo', { token, raw: Buffer.from('thing[name]=x') }), 415)
    const charset = await s.request('POST', '/echo', { token, raw: '{"thing": {"name": "x"}}', headers: { 'content-type': 'application/json; charset=utf-8' } })
    t.same(charset.body.echo.input, { thing: { name: 'x' } }, 'JSON with a charset')
    const vendor = await s.request('POST', '/echo', { token, raw: '{"page": 2}', headers: { 'content-type': 'application/vnd.api+json' } })
    t.same(vendor.body.echo, { input: { page: 2 }, typed: true, params: {}, method: 'POST' }, '+json types are JSON, and typed')
    const empty = await s.request('POST', '/echo', { token, raw: '', headers: { 'content-type': 'text/plain' } })
    t.equal(empty.status, 200, 'an empty body of any type is no body')

    const malformed = await s.request('POST', '/echo', { token, raw: '{"thing": {', headers: { 'content-type': 'application/json' } })
    assertProblem(t, malformed, 400)
    t.equal(malformed.body.code, 'bad_request')

    const big = await s.request('POST', '/echo', { token, json: { thing: { name: 'x'.repeat(2000) } } })
    assertProblem(t, big, 413)
    t.equal(big.body.code, 'payload_too_large')
    const bigForm = await s.request('POST', '/echo', { token, form: { 'thing[name]': 'x'.repeat(30_000) } })
    assertProblem(t, bigForm, 413, undefined)
    const anonymousBig = await s.request('POST', '/echo', { json: { thing: { name: 'x'.repeat(2000) } } })
    t.ok([401, 413].includes(anonymousBig.status), 'anonymous oversized body: refused')

    const manyParams = new URLSearchParams()
    for (let i = 0; i < 1001; i++) manyParams.append(`p${i}`, '1')
    assertProblem(t, await s.request('GET', `/echo?${manyParams}`, { token }), 413)
    const manyForm = Object.fromEntries([...manyParams.entries()])
    assertProblem(t, await s.request('POST', '/echo', { token, form: manyForm }), 413)

    const deep = `thing${'[a]'.repeat(10)}=1`
    const deepQuery = await s.request('GET', `/echo?${deep}`, { token })
    assertProblem(t, deepQuery, 400)
    t.match(deepQuery.body.detail, /nested too deeply/)
    assertProblem(t, await s.request('POST', '/echo', { token, raw: deep, headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 400)

    let json: any = { value: 'v' }
    for (let i = 0; i < 60; i++) json = { a: json }
    const deepJson = await s.request('POST', '/echo', { token, json: { thing: { name: 'x', nested: json } } })
    t.equal(deepJson.status, 422, 'deep JSON is refused by the schema, not a crash')

    const longArray = await s.request('POST', '/echo', { token, form: { 'thing[name]': 'x', 'thing[tags][]': Array(1001).fill('t') } })
    assertProblem(t, longArray, 413)
    const farIndex = await s.request('GET', '/echo?thing[name]=x&thing[tags][5000]=t', { token })
    assertProblem(t, farIndex, 413)
  },
  { ...options, config: { limits: { jsonBytes: 1000, formBytes: 20_000 } } },
)

onEachDatabase(
  t,
  'multipart uploads',
  async (t, s) => {
    const token = s.user.token
    const form = () => {
      const f = new FormData()
      f.append('note', 'first cut')
      return f
    }

    const ok = form()
    ok.append('file', new Blob(['hello media']), 'clip.txt')
    const uploaded = await s.request('POST', '/echo/upload', { token, multipart: ok })
    t.equal(uploaded.status, 200)
    t.same(uploaded.body.echo, { input: { note: 'first cut' }, files: [{ field: 'file', name: 'clip.txt', size: 11, content: 'hello media' }] })
    t.equal(await uploadsLeft(s), 0, 'the temp file is removed after the request')

    const exact = form()
    exact.append('file', new Blob(['x'.repeat(ECHO_MAX_FILE)]), 'exact.bin')
    t.equal((await s.request('POST', '/echo/upload', { token, multipart: exact })).status, 200, 'a file of exactly the limit is taken')

    const tooBig = form()
    tooBig.append('file', new Blob(['x'.repeat(ECHO_MAX_FILE * 20)]), 'big.bin')
    const refused = await s.request('POST', '/echo/upload', { token, multipart: tooBig })
    assertProblem(t, refused, 413)
    t.equal(refused.body.code, 'payload_too_large')
    t.equal(await uploadsLeft(s), 0, 'no temp file is left behind by a refused upload')

    const twoFiles = form()
    twoFiles.append('file', new Blob(['a']), 'a.txt')
    twoFiles.append('file', new Blob(['b']), 'b.txt')
    const tooMany = await s.request('POST', '/echo/upload', { token, multipart: twoFiles })
    t.equal(tooMany.status, 413, 'more files than the route takes: 413')
    t.equal(await uploadsLeft(s), 0, 'no temp file left after too many files')

    // malformed multipart bodies are the client's error
    for (const [raw, type] of [
      ['no boundary', 'multipart/form-data'],
      ['nothing like the boundary', 'multipart/form-data; boundary=b'],
      ['--b\r\nContent-Disposition: form-data; name="note"\r\n\r\nunterminated', 'multipart/form-data; boundary=b'],
    ]) {
      const malformed = await s.request('POST', '/echo/upload', { token, raw, headers: { 'content-type': type } })
      assertProblem(t, malformed, 400)
      t.equal(malformed.body.code, 'bad_request')
    }

    const bigField = form()
    bigField.set('note', 'n'.repeat(1.5 * (1 << 20)))
    assertProblem(t, await s.request('POST', '/echo/upload', { token, multipart: bigField }), 413)

    const badField = form()
    badField.append('colour', 'red')
    badField.append('file', new Blob(['x']), 'x.txt')
    assertProblem(t, await s.request('POST', '/echo/upload', { token, multipart: badField }), 422, ['colour'])
    t.equal(await uploadsLeft(s), 0, 'no temp file left after invalid fields')

    const anonymous = form()
    anonymous.append('file', new Blob(['x']), 'x.txt')
    assertProblem(t, await s.request('POST', '/echo/upload', { multipart: anonymous }), 401)
    t.equal(await uploadsLeft(s), 0, 'no temp file left after an anonymous upload')

    // a client that gives up half-way: the partial file goes too
    const boundary = 'mamkit-test-boundary'
    const aborted = http.request(`${s.url}/echo/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': '100000' },
    })
    aborted.on('error', () => {})
    aborted.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="half.bin"\r\nContent-Type: application/octet-stream\r\n\r\n${'x'.repeat(500)}`)
    t.ok(await eventually(async () => (await uploadsLeft(s)) === 1), 'the upload is being written')
    aborted.destroy()
    t.ok(await eventually(async () => (await uploadsLeft(s)) === 0), 'and removed once the client is gone')
    t.equal((await s.request('GET', '/echo/public')).status, 200, 'the server carries on')

    const elsewhere = form()
    elsewhere.append('file', new Blob(['x']), 'x.txt')
    const notHere = await s.request('POST', '/echo', { token, multipart: elsewhere })
    assertProblem(t, notHere, 415)
    t.equal(notHere.body.code, 'unsupported_media_type')
    t.equal(await uploadsLeft(s), 0)
  },
  options,
)

onEachDatabase(
  t,
  'server errors say nothing about internals',
  async (t, s) => {
    const boom = await s.request('GET', '/echo/boom', { token: s.user.token })
    assertProblem(t, boom, 500)
    t.equal(boom.body.code, 'internal')
    t.same(Object.keys(boom.body).sort(), ['code', 'detail', 'request_id', 'status', 'title', 'type'])
    t.notMatch(boom.text, /ECONNREFUSED|secret|SELECT|password|\/var\/|at .*\.js|stack/i, 'no message, path, SQL or stack in the body')
    t.equal(boom.body.request_id, boom.headers.get('x-request-id'), 'the request id ties the answer to the log')

    // the server keeps serving after an unhandled error
    t.equal((await s.request('GET', '/echo/public')).status, 200)
  },
  options,
)
