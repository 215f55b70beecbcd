import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import t from 'tap'
import { assertProblem, databaseKinds, onEachDatabase, scratchDatabase, startTestServer, type TestServer } from '../../core/testing/index.js'
import { echoPlugin } from '../fixtures/echo-plugin.js'

const options = { extraPlugins: [echoPlugin] }
const uploadsLeft = async (s: TestServer) => (await readdir(path.join(s.dataDir, 'tmp', 'uploads')).catch(() => [] as string[])).length
const JSON_TYPE = { 'content-type': 'application/json' }
const FORM_TYPE = { 'content-type': 'application/x-www-form-urlencoded' }

onEachDatabase(
  t,
  'Content-Encoding: decoded when it decodes, 400 when it does not, 415 when unknown; never a 500 (issue 18 item 6)',
  async (t, s) => {
    const token = s.user.token
    const body = JSON.stringify({ thing: { name: 'Reel 1' } })
    for (const [coding, encode] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
    ] as const) {
      const ok = await s.request('POST', '/echo', { token, raw: encode(body), headers: { ...JSON_TYPE, 'content-encoding': coding } })
      t.equal(ok.status, 200, `${coding}: decoded`)
      t.same(ok.body.echo.input, { thing: { name: 'Reel 1' } })

      const garbage = await s.request('POST', '/echo', { token, raw: body, headers: { ...JSON_TYPE, 'content-encoding': coding } })
      assertProblem(t, garbage, 400)
      t.equal(garbage.body.code, 'bad_request')
      t.match(garbage.body.detail, new RegExp(`not valid ${coding} data`), `${coding}: says the body does not decompress`)

      const form = await s.request('POST', '/echo', { token, raw: 'thing[name]=x', headers: { ...FORM_TYPE, 'content-encoding': coding } })
      assertProblem(t, form, 400)
    }
    const upper = await s.request('POST', '/echo', { token, raw: gzipSync(body), headers: { ...JSON_TYPE, 'content-encoding': 'GZIP' } })
    t.equal(upper.status, 200, 'the coding name is case-insensitive')
    const truncated = await s.request('POST', '/echo', { token, raw: gzipSync(body).subarray(0, 20), headers: { ...JSON_TYPE, 'content-encoding': 'gzip' } })
    assertProblem(t, truncated, 400)
    t.match(truncated.body.detail, /gzip/)

    const unknown = await s.request('POST', '/echo', { token, raw: body, headers: { ...JSON_TYPE, 'content-encoding': 'compress' } })
    assertProblem(t, unknown, 415)
    t.match(unknown.body.detail, /"compress" is not supported/)

    // the login route reads its body before anyone is signed in
    const login = await s.request('POST', '/session', { raw: 'not gzip at all', headers: { ...JSON_TYPE, 'content-encoding': 'gzip' } })
    assertProblem(t, login, 400)
    const loginGzip = await s.request('POST', '/session', {
      raw: gzipSync(JSON.stringify({ login: s.user.username, password: s.user.password })),
      headers: { ...JSON_TYPE, 'content-encoding': 'gzip' },
    })
    t.equal(loginGzip.status, 200, 'a gzipped login works')

    // an upload is stored as sent: a compressed multipart body is refused rather than stored compressed
    const form = new FormData()
    form.append('file', new Blob(['hello media']), 'clip.txt')
    const multipart = new Response(form)
    const raw = Buffer.from(await multipart.arrayBuffer())
    const refused = await s.request('POST', '/echo/upload', { token, raw: gzipSync(raw), headers: { 'content-type': multipart.headers.get('content-type')!, 'content-encoding': 'gzip' } })
    assertProblem(t, refused, 415)
    t.match(refused.body.detail, /without Content-Encoding/)
    t.equal(await uploadsLeft(s), 0, 'nothing written')
    t.equal((await s.request('GET', '/echo/public')).status, 200, 'the server carries on')
  },
  options,
)

onEachDatabase(
  t,
  'malformed bodies say what is wrong (issue 18 item 18)',
  async (t, s) => {
    const token = s.user.token
    const truncatedJson = await s.request('POST', '/echo', { token, raw: '{"thing": {', headers: JSON_TYPE })
    assertProblem(t, truncatedJson, 400)
    t.match(truncatedJson.body.detail, /^The JSON body is malformed: /)
    const misplaced = await s.request('POST', '/echo', { token, raw: '{\n  "thing": {"name": "x",}\n}', headers: JSON_TYPE })
    assertProblem(t, misplaced, 400)
    t.match(misplaced.body.detail, /position 26 \(line 2, column 25\)/, 'where the JSON goes wrong')

    const noBoundary = await s.request('POST', '/echo/upload', { token, raw: 'no boundary', headers: { 'content-type': 'multipart/form-data' } })
    assertProblem(t, noBoundary, 400)
    t.match(noBoundary.body.detail, /no boundary/)
    const truncated = await s.request('POST', '/echo/upload', {
      token,
      raw: '--b\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\nunterminated',
      headers: { 'content-type': 'multipart/form-data; boundary=b' },
    })
    assertProblem(t, truncated, 400)
    t.match(truncated.body.detail, /truncated/)
    t.equal(await uploadsLeft(s), 0, 'no temp file left by a truncated upload')
  },
  options,
)

onEachDatabase(
  t,
  'an empty file part is an upload of 0 bytes (issue 18 item 17)',
  async (t, s) => {
    const form = new FormData()
    form.append('note', 'sidecar')
    form.append('file', new Blob([]), 'empty.txt')
    const reply = await s.request('POST', '/echo/upload', { token: s.user.token, multipart: form })
    t.equal(reply.status, 200)
    t.same(reply.body.echo, { input: { note: 'sidecar' }, files: [{ field: 'file', name: 'empty.txt', size: 0, content: '' }] })
    t.equal(await uploadsLeft(s), 0)
  },
  options,
)

onEachDatabase(
  t,
  'a one-element array is no scalar; a scalar is a one-element array where one is declared (issue 18 item 19)',
  async (t, s) => {
    const token = s.user.token
    const arrayForScalar = await s.request('POST', '/echo', { token, form: { 'thing[name][]': 'a' } })
    assertProblem(t, arrayForScalar, 422, ['thing[name]'])
    t.equal(arrayForScalar.body.errors[0].message, 'must be a string')
    const inQuery = await s.request('GET', '/echo?thing[name][]=a&page[]=2', { token })
    assertProblem(t, inQuery, 422, ['page', 'thing[name]'])

    const scalarForArray = await s.request('POST', '/echo', { token, form: { 'thing[name]': 'x', 'thing[tags]': 'solo' } })
    t.equal(scalarForArray.status, 200)
    t.same(scalarForArray.body.echo.input, { thing: { name: 'x', tags: ['solo'] } }, 'one value where an array is declared')
    const numbers = await s.request('GET', '/echo?thing[name]=x&thing[count]=3&enabled=true', { token })
    t.same(numbers.body.echo.input, { thing: { name: 'x', count: 3 }, enabled: true }, 'strings still coerce to numbers and booleans')
    assertProblem(t, await s.request('POST', '/echo', { token, json: { thing: { name: ['a'] } } }), 422, ['thing[name]'])
  },
  options,
)

for (const db of databaseKinds()) {
  t.test(`upload temp files a killed process left are removed at start, and only those [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-stale-'))
    const scratch = await scratchDatabase(db)
    const uploads = path.join(dataDir, 'tmp', 'uploads')
    await mkdir(uploads, { recursive: true })
    await mkdir(path.join(dataDir, 'tmp', 'other'), { recursive: true })
    const hourAgo = new Date(Date.now() - 3_600_000)
    for (const file of [path.join(uploads, 'left-by-a-crash'), path.join(dataDir, 'tmp', 'other', 'old-but-not-ours')]) {
      await writeFile(file, 'partial upload')
      await utimes(file, hourAgo, hourAgo)
    }
    // written after this process started: another process's upload in progress, as far as the server can tell
    await writeFile(path.join(uploads, 'in-progress'), 'still arriving')
    await mkdir(path.join(uploads, 'a-folder'))

    const s = await startTestServer({ db, dataDir, databaseUrl: scratch.databaseUrl })
    t.teardown(async () => {
      await s.close()
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    t.same((await readdir(uploads)).sort(), ['a-folder', 'in-progress'], 'the stale file is gone; the newer one and folders stay')
    t.same(await readdir(path.join(dataDir, 'tmp', 'other')), ['old-but-not-ours'], 'nothing outside the upload folder is touched')
  })
}
