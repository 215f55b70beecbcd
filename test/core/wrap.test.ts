import t from 'tap'
import { assertProblem, onEachDatabase } from '../../core/testing/index.js'
import { echoPlugin } from '../fixtures/echo-plugin.js'

const messages = (body: any) => Object.fromEntries(body.errors.map((e: { param: string; message: string }) => [e.param, e.message]))

onEachDatabase(
  t,
  'wrap: top-level attributes are taken as the wrapped model, from JSON, forms and query strings',
  async (t, s) => {
    const token = s.user.token
    const want = { thing: { name: 'Reel 1', count: 3, tags: ['a'] }, page: 2 }
    const json = await s.request('POST', '/echo/wrapped', { token, json: { name: 'Reel 1', count: 3, tags: ['a'], page: 2 } })
    t.equal(json.status, 200)
    t.same(json.body.echo.input, want, 'JSON: attributes wrapped, the route\'s own parameter (page) left at the top')
    const form = await s.request('POST', '/echo/wrapped', { token, form: { name: 'Reel 1', count: '3', 'tags[]': 'a', page: '2' } })
    t.same(form.body.echo.input, want, 'form')
    const query = await s.request('POST', '/echo/wrapped?name=Reel%201&count=3&tags[]=a&page=2', { token })
    t.same(query.body.echo.input, want, 'query string')
    const wrapped = await s.request('POST', '/echo/wrapped', { token, json: want })
    t.same(wrapped.body.echo.input, want, 'the wrapped form as before')

    // errors name the parameter as the client sent it
    const flat = await s.request('POST', '/echo/wrapped', { token, json: { name: '', count: -1 } })
    assertProblem(t, flat, 422, ['count', 'name'])
    t.match(flat.body.detail, /^(count|name) /)
    t.notMatch(flat.body.detail, /thing\[/)
    const missing = await s.request('POST', '/echo/wrapped', { token, json: { count: 1 } })
    assertProblem(t, missing, 422, ['name'])
    t.equal(messages(missing.body).name, 'is required', 'an attribute not sent is named the flat way too')
    const nested = await s.request('POST', '/echo/wrapped', { token, json: { name: 'x', nested: { deep: {} } } })
    assertProblem(t, nested, 422, ['nested[deep][value]'])
    const inside = await s.request('POST', '/echo/wrapped', { token, json: { thing: { name: '' } } })
    assertProblem(t, inside, 422, ['thing[name]'])

    // with the model key present nothing moves: a stray top-level attribute is an unknown parameter
    const both = await s.request('POST', '/echo/wrapped', { token, json: { thing: { name: 'x' }, count: 1 } })
    assertProblem(t, both, 422, ['count'])
    const unknown = await s.request('POST', '/echo/wrapped', { token, json: { name: 'x', colour: 'red' } })
    assertProblem(t, unknown, 422, ['colour'])
    assertProblem(t, await s.request('POST', '/echo/wrapped', { json: { name: 'x' } }), 401)
  },
  { extraPlugins: [echoPlugin] },
)

onEachDatabase(t, 'wrap on the create and update routes of identity, roles and the core', async (t, s) => {
  const admin = s.admin.token
  // teams: the issue's own example
  const team = await s.request('POST', '/teams', { token: admin, json: { name: 'Colour', quota: 1000 } })
  t.equal(team.status, 201, 'POST /teams {"name": …}')
  t.match(team.body.teams, { name: 'Colour', quota: 1000 })
  const renamed = await s.request('PUT', `/teams/${team.body.teams.id}`, { token: admin, form: { name: 'Grading' } })
  t.equal(renamed.body.team.name, 'Grading', 'PUT /teams/:id with a flat form')
  const noName = await s.request('POST', '/teams', { token: admin, json: { quota: 5 } })
  assertProblem(t, noName, 422, ['name'])
  t.equal(await s.em().count('Team', { name: 'Grading' }), 1, 'nothing else created')
  const badQuota = await s.request('POST', '/teams', { token: admin, json: { team: { name: 'x', quota: -1 } } })
  assertProblem(t, badQuota, 422, ['team[quota]'])

  // users: validation and handler errors alike follow the client's form
  const user = await s.request('POST', '/users', { token: admin, json: { username: 'flat-user', password: 'a-long-password', email: 'flat@example.com' } })
  t.equal(user.status, 201)
  t.match(user.body.user, { username: 'flat-user', email: 'flat@example.com' })
  assertProblem(t, await s.request('POST', '/users', { token: admin, json: { username: 'short', password: 'x' } }), 422, ['password'])
  assertProblem(t, await s.request('POST', '/users', { token: admin, json: { username: 'nopass' } }), 422, ['password'])
  assertProblem(t, await s.request('POST', '/users', { token: admin, json: { user: { username: 'nopass' } } }), 422, ['user[password]'])
  t.equal(await s.em().count('User', { username: { $in: ['short', 'nopass'] } }), 0)
  const profile = await s.request('PUT', `/users/${s.user.id}`, { token: s.user.token, json: { firstname: 'Ed' } })
  t.equal(profile.body.user.firstname, 'Ed')
  const wrongCurrent = await s.request('PUT', `/users/${s.user.id}`, { token: s.user.token, json: { password: 'another-long-one', current_password: 'wrong' } })
  assertProblem(t, wrongCurrent, 422, ['current_password'])

  // roles, API keys, login sessions, settings
  const role = await s.request('POST', '/roles', { token: admin, json: { name: 'Flat role', role_matrix: { 'templates.manage': true } } })
  t.equal(role.status, 201)
  t.same(role.body.role.role_matrix, { 'templates.manage': true })
  const badRole = await s.request('POST', '/roles', { token: admin, json: { name: 'Bad', role_matrix: { bogus: true } } })
  assertProblem(t, badRole, 422, ['role_matrix[bogus]'])
  const key = await s.request('POST', `/users/${s.user.id}/api_keys`, { token: s.user.token, form: { name: 'laptop' } })
  t.equal(key.status, 201)
  t.equal(key.body.apikey.name, 'laptop')
  assertProblem(t, await s.request('POST', `/users/${s.user.id}/api_keys`, { token: s.user.token, json: { name: '' } }), 422, ['name'])
  const session = await s.request('POST', '/containers/sessions', { token: s.user.token, json: { name: 'Tablet' } })
  t.equal(session.body.session.name, 'Tablet')
  const settings = await s.request('PUT', `/users/${s.user.id}/settings`, { token: s.user.token, json: { theme: 'dark' } })
  t.equal(settings.body.settings.theme, 'dark')
  assertProblem(t, await s.request('PUT', `/users/${s.user.id}/settings`, { token: s.user.token, json: { theme: 'purple' } }), 422, ['theme'])
})
