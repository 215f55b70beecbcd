import net from 'node:net'
import t from 'tap'
import { Type } from 'typebox'
import { definePlugin } from '../../core/plugin/contract.js'
import type { MamContext } from '../../core/http/context.js'
import { created } from '../../core/http/responses.js'
import { MamError } from '../../core/errors.js'
import { directJson, jsonText } from '../../core/http/respond.js'
import { onEachDatabase } from '../../core/testing/index.js'

/**
 * Plain JSON answers are written by mamkit itself (core/http/respond.ts), everything else by Koa:
 * the bytes on the wire must be the same either way (Date aside), for every kind of answer.
 */
const respondPlugin = definePlugin({
  name: 'respond-check',
  version: '0.0.1',
  register({ routes }) {
    routes.get('/respond/json', { access: 'authenticated' }, (ctx: MamContext) => {
      ctx.set('ETag', '"v1"')
      ctx.set('Cache-Control', 'private, max-age=0')
      ctx.set('Vary', 'Authorization')
      return { thing: { id: 1, name: 'Äpfel ✓ «ü»', tags: ['a', 'b'], none: null }, list: [1, 2, 3] }
    })
    routes.get('/respond/array', { access: 'public' }, () => [{ id: 1 }, { id: 2 }])
    routes.get('/respond/async', { access: 'authenticated' }, async () => {
      await new Promise((resolve) => setTimeout(resolve, 1))
      return { later: true }
    })
    routes.post('/respond/things', { access: 'authenticated', input: Type.Object({ name: Type.String() }) }, (ctx: MamContext) => {
      ctx.set('Location', '/api/v1/respond/things/7')
      return created(ctx, { thing: { id: 7, name: ctx.input.name } })
    })
    routes.get('/respond/text', { access: 'authenticated' }, () => jsonText('{"spelled":["by the database","Äpfel"]}'))
    routes.get('/respond/vendor', { access: 'authenticated' }, (ctx: MamContext) => {
      ctx.type = 'application/vnd.mamkit+json'
      return { vendor: true }
    })
    routes.get('/respond/plain', { access: 'authenticated' }, (ctx: MamContext) => {
      ctx.type = 'text/plain'
      return { typed: 'text' }
    })
    routes.get('/respond/download', { access: 'authenticated' }, (ctx: MamContext) => {
      ctx.attachment('notes.txt')
      ctx.body = Buffer.from('hello, file\n')
    })
    routes.get('/respond/empty', { access: 'authenticated' }, (ctx: MamContext) => {
      ctx.status = 204
      return {}
    })
    routes.get('/respond/boom', { access: 'authenticated' }, () => {
      throw new MamError('conflict', 'It clashes')
    })
  },
})

/** one request on its own connection; the raw answer with its Date header blanked */
function raw(base: string, request: string): Promise<string> {
  const { port } = new URL(base)
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request))
    const chunks: Buffer[] = []
    socket.on('data', (d) => chunks.push(d))
    socket.on('error', reject)
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1').replace(/\r\nDate: [^\r]*\r\n/, '\r\nDate: -\r\n')))
  })
}

onEachDatabase(
  t,
  'direct JSON answers: the same bytes as Koa’s',
  async (t, s) => {
    t.teardown(() => {
      directJson.enabled = true
    })
    const auth = `Authorization: Bearer ${s.admin.token}\r\n`
    const form = 'name=Bob+%C3%A4'
    const requests: Record<string, [string, boolean]> = {
      'JSON GET with ETag, Cache-Control, Vary': [`GET /api/v1/respond/json HTTP/1.1\r\nHost: x\r\n${auth}`, true],
      'JSON GET, .json suffix, keep-alive': [`GET /api/v1/respond/json.json HTTP/1.1\r\nHost: x\r\n${auth}`, true],
      'an array, anonymous': [`GET /api/v1/respond/array HTTP/1.1\r\nHost: x\r\n`, true],
      'an answer after a wait': [`GET /api/v1/respond/async HTTP/1.1\r\nHost: x\r\n${auth}`, true],
      'JSON text (jsonText)': [`GET /api/v1/respond/text HTTP/1.1\r\nHost: x\r\n${auth}`, true],
      'HEAD of JSON text': [`HEAD /api/v1/respond/text HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      'HTTP/1.0': [`GET /api/v1/respond/json HTTP/1.0\r\nHost: x\r\n${auth}`, true],
      'a core route (GET /session)': [`GET /api/v1/session HTTP/1.1\r\nHost: x\r\n${auth}`, true],
      '201 with Location': [`POST /api/v1/respond/things HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${form.length}\r\n`, true],
      'HEAD of a JSON GET': [`HEAD /api/v1/respond/json HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      'a JSON type of the handler’s own': [`GET /api/v1/respond/vendor HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      'a non-JSON type the handler set': [`GET /api/v1/respond/plain HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      'a download': [`GET /api/v1/respond/download HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      '204 with a returned body': [`GET /api/v1/respond/empty HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      'a problem (409)': [`GET /api/v1/respond/boom HTTP/1.1\r\nHost: x\r\n${auth}`, false],
      'a problem (401)': [`GET /api/v1/respond/json HTTP/1.1\r\nHost: x\r\n`, false],
      'no route (404)': [`GET /api/v1/respond/nothing HTTP/1.1\r\nHost: x\r\n${auth}`, false],
    }
    for (const [name, [head, direct]] of Object.entries(requests)) {
      const body = head.startsWith('POST') ? form : ''
      const request = `${head}X-Request-Id: respond-check\r\nConnection: close\r\n\r\n${body}`
      directJson.enabled = false
      const viaKoa = await raw(s.base, request)
      directJson.enabled = true
      const before = directJson.written
      const viaMamkit = await raw(s.base, request)
      t.equal(viaMamkit, viaKoa, `${name}: same status line, headers (and their order) and body`)
      t.equal(directJson.written - before, direct ? 1 : 0, `${name}: ${direct ? 'written directly' : 'left to Koa'}`)
      t.match(viaMamkit, /^HTTP\/1\.[01] \d{3} [A-Za-z ]+\r\nX-Request-Id: respond-check\r\n/, `${name}: a status line and the request id first`)
    }
    // the JSON answer as a client reads it
    const reply = await s.request('GET', '/respond/json', { token: s.admin.token })
    t.equal(reply.status, 200)
    t.equal(reply.headers.get('content-type'), 'application/json; charset=utf-8')
    t.equal(Number(reply.headers.get('content-length')), reply.buffer.length, 'Content-Length counts bytes, not characters')
    t.equal(reply.body.thing.name, 'Äpfel ✓ «ü»')
    t.equal(reply.headers.get('etag'), '"v1"')
    const text = await s.request('GET', '/respond/text', { token: s.admin.token })
    t.equal(text.headers.get('content-type'), 'application/json; charset=utf-8')
    t.same(text.body, { spelled: ['by the database', 'Äpfel'] }, 'JSON text answers as JSON')
    // keep-alive: several direct answers on one connection
    const agentReplies = await Promise.all([1, 2, 3].map(() => s.request('GET', '/respond/array')))
    t.same(
      agentReplies.map((r) => r.body),
      [1, 2, 3].map(() => [{ id: 1 }, { id: 2 }]),
    )
  },
  { extraPlugins: [respondPlugin] },
)
