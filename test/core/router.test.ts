import { Writable } from 'node:stream'
import http from 'node:http'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import pino from 'pino'
import { RouteTable, routePathProblem, routeShape } from '../../core/http/router.js'
import { nextRequestId } from '../../core/http/request-id.js'
import { MamRuntime } from '../../core/runtime.js'
import { definePlugin } from '../../core/plugin/contract.js'
import { IdParams } from '../../core/http/schemas.js'
import { builtinPlugins } from '../../plugins/index.js'
import { assertProblem, onEachDatabase } from '../../core/testing/index.js'

/** a table of the given `METHOD /path` routes under /api/v1; each route's value is its own line */
function tree(...routes: string[]) {
  const r = new RouteTable<string>('/api/v1')
  for (const line of routes) {
    const [method, p] = line.split(' ')
    r.add(method, p, line)
  }
  return r
}

t.test('static segments before parameters, segment by segment, with backtracking', async (t) => {
  // registered in the "wrong" order on purpose: the table does not depend on it
  const r = tree('GET /projects/:id', 'PUT /projects/:id', 'GET /projects/search', 'GET /projects/:id/teams', 'GET /projects/update_teams/:team_id', 'GET /projects')
  t.same(r.find('GET', '/api/v1/projects/search'), { value: 'GET /projects/search', pattern: '/api/v1/projects/search', params: {} }, 'a literal beats a parameter')
  t.same(r.find('GET', '/api/v1/projects/7'), { value: 'GET /projects/:id', pattern: '/api/v1/projects/:id', params: { id: '7' } })
  t.same(r.find('PUT', '/api/v1/projects/search')?.params, { id: 'search' }, 'no PUT on the literal: the parameter route takes it')
  t.equal(r.find('GET', '/api/v1/projects/update_teams/teams')?.value, 'GET /projects/update_teams/:team_id', 'the leftmost literal decides')
  t.same(r.find('GET', '/api/v1/projects/update_teams/teams')?.params, { team_id: 'teams' })
  t.equal(r.find('GET', '/api/v1/projects/9/teams')?.value, 'GET /projects/:id/teams')
  t.equal(r.find('GET', '/api/v1/projects//teams'), undefined, 'a parameter needs a non-empty segment')
  t.same(r.find('GET', '/api/v1/projects/update_teams/')?.params, { id: 'update_teams' }, 'with its trailing slash dropped, the path is /projects/:id')
  t.equal(r.find('GET', '/api/v1/projects')?.value, 'GET /projects')
  t.equal(r.find('GET', '/api/v1/projects/7/teams/8'), undefined, 'more segments than any route: no match')
  t.equal(r.find('DELETE', '/api/v1/projects/7'), undefined)
})

t.test('paths as @koa/router read them: prefix, case, trailing slash, HEAD, decoding', async (t) => {
  const r = tree('GET /', 'GET /templates', 'POST /templates', 'DELETE /templates/:id', 'GET /files/:name/meta')
  t.equal(r.find('GET', '/api/v1/templates/')?.value, 'GET /templates', 'one trailing slash is allowed')
  t.equal(r.find('GET', '/api/v1/templates//'), undefined, 'two are not')
  t.equal(r.find('GET', '/api/v1//templates'), undefined, 'nor an empty segment')
  t.equal(r.find('GET', '/API/V1/Templates')?.value, 'GET /templates', 'literals match without regard to case')
  t.equal(r.find('HEAD', '/api/v1/templates')?.value, 'GET /templates', 'HEAD finds the GET route')
  t.equal(r.find('GET', '/api/v1')?.value, 'GET /', 'the prefix alone is the root route')
  t.equal(r.find('GET', '/api/v1/')?.value, 'GET /')
  t.equal(r.find('GET', '/api/v1/')?.pattern, '/api/v1')
  t.equal(r.find('GET', '/api/v1x/templates'), undefined, 'the prefix ends at a slash')
  t.equal(r.find('GET', '/templates'), undefined, 'nothing outside the prefix')
  t.equal(r.find('GET', '/api/v2/templates'), undefined)
  t.same(r.find('DELETE', '/api/v1/templates/Reel%201')?.params, { id: 'Reel 1' }, 'parameters are URI-decoded')
  t.same(r.find('DELETE', '/api/v1/templates/a%2Fb')?.params, { id: 'a/b' }, 'an encoded slash stays inside its parameter')
  t.same(r.find('DELETE', '/api/v1/templates/%E0%A4%A')?.params, { id: '%E0%A4%A' }, 'a malformed escape is left as it is')
  t.same(r.find('GET', '/api/v1/files/Clip.MOV/meta')?.params, { name: 'Clip.MOV' }, 'parameters keep their case')
  t.equal(r.find('GET', '/api/v1/templates%2F1'), undefined, 'an encoded slash does not separate segments')
})

t.test('allowed methods of a path (the Allow list of a 405)', async (t) => {
  const r = tree('GET /echo', 'POST /echo', 'PUT /echo/:id', 'DELETE /echo/:id', 'GET /echo/public', 'POST /echo/upload')
  t.same(r.allowed('/api/v1/echo'), ['HEAD', 'GET', 'POST'], 'HEAD beside GET, registration order')
  t.same(r.allowed('/api/v1/echo/7'), ['PUT', 'DELETE'])
  t.same(r.allowed('/api/v1/echo/public'), ['HEAD', 'GET', 'PUT', 'DELETE'], 'every pattern that fits the path counts: /echo/public and /echo/:id')
  t.same(r.allowed('/api/v1/echo/upload/'), ['POST', 'PUT', 'DELETE'])
  t.same(r.allowed('/api/v1/nothing'), [])
  t.same(r.allowed('/elsewhere'), [])
})

t.test('route paths the router takes, and shapes that clash', async (t) => {
  t.equal(routePathProblem('/projects/:id/teams/:team_id'), undefined)
  t.equal(routePathProblem('/'), undefined)
  t.equal(routePathProblem('/a.b/c~d/e_f-g'), undefined)
  t.match(routePathProblem('/files/*path'), /literal|parameter/, 'no wildcards')
  t.match(routePathProblem('/files{/:name}'), /literal|parameter/, 'no optional groups')
  t.match(routePathProblem('/files/:name.:ext'), /literal|parameter/, 'one parameter is a whole segment')
  t.match(routePathProblem('/files/'), /trailing slash/)
  t.match(routePathProblem('/files//x'), /empty segments/)
  t.match(routePathProblem('/a/:id/b/:id'), /twice/)
  t.match(routePathProblem('files'), /starts with \//)
  t.equal(routeShape('/Teams/:team_id/users/:user_id'), '/teams/:/users/:')
  t.throws(() => tree('GET /teams/:id', 'GET /Teams/:team_id'), /registered already/, 'the table refuses a second route of one shape and method')
  t.throws(() => tree('GET /files/*path'), /literal/)
  t.doesNotThrow(() => tree('GET /teams/:id', 'PUT /teams/:team_id'), 'other methods may share a shape, whatever their parameters are called')
  const r = tree('GET /teams/:id', 'PUT /teams/:team_id')
  t.same(r.find('PUT', '/api/v1/teams/3')?.params, { team_id: '3' }, 'each route names its own parameters')
  t.same(r.find('GET', '/api/v1/teams/3')?.params, { id: '3' })
})

t.test('request ids: UUID-shaped, one per request', async (t) => {
  const ids = new Set<string>()
  for (let i = 0; i < 1000; i++) ids.add(nextRequestId())
  t.equal(ids.size, 1000, 'no repeats')
  for (const id of [...ids].slice(0, 3)) t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
})

/** a partner plugin that shares the templates plugin's path prefix */
const notesPlugin = definePlugin({
  name: 'template-notes',
  version: '0.0.1',
  dependsOn: ['templates'],
  register({ routes }) {
    routes.get('/templates/:id/notes', { access: 'authenticated', params: IdParams }, (ctx) => ({ notes: [], template_id: ctx.params.id }))
    routes.get('/templates/recent', { access: 'authenticated' }, () => ({ recent: [] }))
  },
})

onEachDatabase(
  t,
  'a partner plugin adds routes below a built-in prefix',
  async (t, s) => {
    const token = s.user.token
    const notes = await s.request('GET', '/templates/12/notes', { token })
    t.equal(notes.status, 200)
    t.same(notes.body, { notes: [], template_id: 12 }, 'its parameter validated and coerced')
    t.same((await s.request('GET', '/templates/recent.json', { token })).body, { recent: [] }, 'its literal wins over the built-in /templates/:id')
    const missing = await s.request('GET', '/templates/999999', { token })
    assertProblem(t, missing, 404)
    t.equal(missing.body.code, 'not_found', 'the built-in /templates/:id still answers (its own 404)')
    t.equal((await s.request('GET', '/templates', { token })).status, 200, 'and so does /templates')
    const wrong = await s.request('DELETE', '/templates/12/notes', { token })
    assertProblem(t, wrong, 405)
    t.equal(wrong.headers.get('allow'), 'HEAD, GET')
    assertProblem(t, await s.request('GET', '/templates/12/notes', {}), 401)
  },
  { extraPlugins: [notesPlugin] },
)

t.test('the request log names the route pattern, never the path', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-router-'))
  const lines: any[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line))
      done()
    },
  })
  const runtime = await MamRuntime.create({ plugins: builtinPlugins, config: { dataDir }, logger: pino({ level: 'info' }, sink), runJobs: false })
  const server = http.createServer(runtime.callback())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await runtime.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  const requests = lines.length
  const secret = 'pkce-verifier-that-must-not-be-logged'
  await fetch(`${base}/proof_keys/${secret}`, { method: 'DELETE', headers: { 'x-request-id': 'log-test-1' } })
  await fetch(`${base}/no/such/${secret}`, { headers: { 'x-request-id': 'log-test-2' } })
  await fetch(`${base}/version.json`, { headers: { 'x-request-id': 'log-test-3' } })
  const logged = lines.slice(requests).filter((l) => l.msg === 'request')
  const byId = Object.fromEntries(logged.map((l) => [l.req_id, l]))
  t.equal(byId['log-test-1']?.route, '/api/v1/proof_keys/:code_verifier', 'the pattern of the matched route')
  t.equal(byId['log-test-1']?.method, 'DELETE')
  t.equal(byId['log-test-2']?.route, `/api/v1/no/such/${secret}`, 'no route: the path (nothing matched, nothing to hide behind)')
  t.equal(byId['log-test-2']?.status, 404)
  t.equal(byId['log-test-3']?.route, '/api/v1/version', '.json suffix: the route it reached')
  t.equal(byId['log-test-3']?.status, 200)
  t.type(byId['log-test-3']?.ms, 'number')
  t.notMatch(JSON.stringify(byId['log-test-1']), secret, 'the secret in the path is not logged')
})
