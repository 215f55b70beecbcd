import t from 'tap'
import { assertProblem, onEachDatabase, type Reply, type TestServer, type TestUser } from '../../../core/testing/index.js'
import { widgetsPlugin } from '../../fixtures/widgets-plugin.js'

type Tap = typeof t
type Role = 'admin' | 'writer' | 'reader' | 'outsider'
const ROLES: Role[] = ['admin', 'writer', 'reader', 'outsider']

/** what each kind of route answers to each caller */
const EXPECT = {
  /** reading one object: who has no right must not learn it exists */
  read: { admin: 200, writer: 200, reader: 200, outsider: 404 },
  /** changing one object: read-only callers see it, but may not change it */
  write: { admin: 200, writer: 200, reader: 403, outsider: 404 },
  admin: { admin: 200, writer: 403, reader: 403, outsider: 403 },
  /** lists and creation: every signed-in user, the content is filtered */
  open: { admin: 200, writer: 200, reader: 200, outsider: 200 },
  create: { admin: 201, writer: 201, reader: 201, outsider: 201 },
} as const

interface Fixture {
  /** a fresh widget: the writer's team may write it, the reader's team read it, team X read it */
  widget: number
  writers: number
  readers: number
  x: number
}

interface RouteCase {
  kind: keyof typeof EXPECT
  call(s: TestServer, f: Fixture, token: string): Promise<Reply>
}

/**
 * Every route under /widgets, keyed like the route table. The test fails when the plugin (or the
 * identity plugin's mounted routes) gains a route that is not listed here.
 */
const CASES: Record<string, RouteCase> = {
  'GET /widgets': { kind: 'open', call: (s, f, token) => s.request('GET', '/widgets', { token }) },
  'POST /widgets': { kind: 'create', call: (s, f, token) => s.request('POST', '/widgets', { token, json: { widget: { name: 'new' } } }) },
  'GET /widgets/:id': { kind: 'read', call: (s, f, token) => s.request('GET', `/widgets/${f.widget}`, { token }) },
  'PUT /widgets/:id': { kind: 'write', call: (s, f, token) => s.request('PUT', `/widgets/${f.widget}`, { token, json: { widget: { name: 'renamed' } } }) },
  'DELETE /widgets/:id': { kind: 'write', call: (s, f, token) => s.request('DELETE', `/widgets/${f.widget}`, { token }) },
  'GET /widgets/:id/teams': { kind: 'read', call: (s, f, token) => s.request('GET', `/widgets/${f.widget}/teams`, { token }) },
  'GET /widgets/:id/effective_access_rights': { kind: 'read', call: (s, f, token) => s.request('GET', `/widgets/${f.widget}/effective_access_rights`, { token }) },
  'PUT /widgets/:id/teams': { kind: 'write', call: (s, f, token) => s.request('PUT', `/widgets/${f.widget}/teams`, { token, json: { team_id: f.x, read: true, write: true } }) },
  'DELETE /widgets/:id/teams/:team_id': { kind: 'write', call: (s, f, token) => s.request('DELETE', `/widgets/${f.widget}/teams/${f.x}`, { token }) },
  'PUT /widgets/:id/update_teams': {
    kind: 'write',
    call: (s, f, token) => s.request('PUT', `/widgets/${f.widget}/update_teams`, { token, json: { teams: [{ team_id: f.writers, write: true }, { team_id: f.x, read: true }] } }),
  },
  'PUT /widgets/update_teams/:team_id': {
    kind: 'admin',
    call: (s, f, token) => s.request('PUT', `/widgets/update_teams/${f.x}`, { token, json: { access_rights: [{ id: f.widget, read: true, write: true }] } }),
  },
}

const widgetRoutes = (s: TestServer) =>
  s.runtime.loaded.routes.filter((r) => r.path === '/widgets' || r.path.startsWith('/widgets/')).map((r) => `${r.method} ${r.path}`)

/** the widget row and every right on it: what a refused call must leave as it was */
async function stateOf(s: TestServer, widget: number) {
  const knex = s.runtime.db.knex
  const row = await knex('widgets').where({ id: widget }).first('id', 'name')
  const rights = await knex('access_rights').where({ object_type: 'widget' }).orderBy(['object_id', 'team_id']).select('object_id', 'team_id', 'read', 'write')
  return JSON.stringify({ row, count: (await knex('widgets').count({ n: '*' }).first())?.n, rights: rights.map((r: any) => [r.object_id, r.team_id, Boolean(r.read), Boolean(r.write)]) })
}

async function setUp(t: Tap, s: TestServer) {
  const admin = s.admin.token
  const team = async (name: string) => (await s.request('POST', '/teams', { token: admin, json: { team: { name } } })).body.teams.id as number
  const writers = await team('Writers')
  const readers = await team('Readers')
  const x = await team('X')
  const users: Record<Role, TestUser> = {
    admin: s.admin,
    writer: await s.createUser('writer'),
    reader: await s.createUser('reader'),
    outsider: await s.createUser('outsider'),
  }
  t.equal((await s.request('POST', `/teams/${writers}/users/${users.writer.id}`, { token: admin })).status, 200)
  t.equal((await s.request('POST', `/users/${users.reader.id}/teams/${readers}`, { token: admin })).status, 200)
  const fresh = async (): Promise<Fixture> => {
    const created = await s.request('POST', '/widgets', { token: admin, json: { widget: { name: 'w' } } })
    const widget = created.body.widget.id as number
    const set = await s.request('PUT', `/widgets/${widget}/update_teams`, {
      token: admin,
      json: { teams: [{ team_id: writers, write: true }, { team_id: readers, read: true }, { team_id: x, read: true }] },
    })
    t.equal(set.status, 200, 'fixture rights set')
    return { widget, writers, readers, x }
  }
  return { users, writers, readers, x, fresh }
}

onEachDatabase(
  t,
  'access matrix: every widget route × admin, writer, reader, outsider',
  async (t, s) => {
    const routes = widgetRoutes(s)
    t.same(routes.filter((r) => !(r in CASES)), [], 'every route under /widgets has a case')
    t.same(Object.keys(CASES).filter((c) => !routes.includes(c)), [], 'every case is a route')
    t.equal(routes.length, 11, 'five widget routes and six mounted access-right routes')

    const { users, fresh } = await setUp(t, s)
    // calls that change nothing share one widget; the others get a fresh one each
    const shared = await fresh()

    for (const [route, c] of Object.entries(CASES)) {
      // anonymous callers learn nothing, whatever the route, and change nothing
      const before = await stateOf(s, shared.widget)
      assertProblem(t, await c.call(s, shared, ''), 401)
      t.equal(await stateOf(s, shared.widget), before, `${route} anonymous: nothing changed`)
      for (const role of ROLES) {
        const f = c.kind === 'read' || c.kind === 'open' ? shared : await fresh()
        const before = await stateOf(s, f.widget)
        const reply = await c.call(s, f, users[role].token)
        const want = EXPECT[c.kind][role]
        t.equal(reply.status, want, `${route} as ${role}: ${want}`)
        if (want >= 400) {
          assertProblem(t, reply, want)
          t.equal(await stateOf(s, f.widget), before, `${route} as ${role}: nothing changed`)
          // a 404 must read exactly like a widget that does not exist
          if (want === 404) t.notMatch(reply.body.detail, /right|read|team/i, `${route} as ${role}: the 404 does not hint at rights`)
        } else if (reply.headers.get('content-type')?.includes('json')) {
          t.equal(Object.keys(reply.body).length, 1, `${route} as ${role}: one root key`)
        }
      }
    }

    // unknown widgets are 404 for everyone, administrators included
    const f = await fresh()
    for (const [route, c] of Object.entries(CASES)) {
      if (c.kind !== 'read' && c.kind !== 'write') continue
      assertProblem(t, await c.call(s, { ...f, widget: 99999 }, s.admin.token), 404)
      t.pass(`${route}: unknown widget`)
    }
    assertProblem(t, await CASES['PUT /widgets/update_teams/:team_id'].call(s, { ...f, widget: 99999 }, s.admin.token), 404)
    assertProblem(t, await CASES['PUT /widgets/update_teams/:team_id'].call(s, { ...f, x: 99999 }, s.admin.token), 404)
  },
  { extraPlugins: [widgetsPlugin] },
)

onEachDatabase(
  t,
  'access rights: what the routes answer, effective rights, lists, and membership changes',
  async (t, s) => {
    const { users, writers, readers, x, fresh } = await setUp(t, s)
    const admin = s.admin.token
    const f = await fresh()
    const adminOwn = (await s.request('GET', `/users/${s.admin.id}`, { token: admin })).body.user.own_team_id

    // the object's teams
    const teams = await s.request('GET', `/widgets/${f.widget}/teams`, { token: users.reader.token })
    t.equal(teams.status, 200)
    t.same(
      teams.body.teams.map((r: any) => [r.name, r.team_id, r.read, r.write]),
      [
        ['Readers', readers, true, false],
        ['Writers', writers, true, true],
        ['X', x, true, false],
      ],
      'update_teams replaced the creator’s right; write implies read',
    )

    // effective rights: user id → the team that gives the best right
    const effective = await s.request('GET', `/widgets/${f.widget}/effective_access_rights`, { token: users.writer.token })
    t.equal(effective.status, 200)
    t.same(effective.body, {
      hash: {
        [String(users.writer.id)]: { team_id: writers, read: true, write: true },
        [String(users.reader.id)]: { team_id: readers, read: true, write: false },
      },
    })
    // a user in two teams gets the better one
    await s.request('POST', `/teams/${x}/users/${users.writer.id}`, { token: admin })
    await s.request('POST', `/teams/${x}/users/${users.reader.id}`, { token: admin })
    await s.request('PUT', `/widgets/${f.widget}/teams`, { token: users.writer.token, json: { team_id: x, write: true } })
    const both = (await s.request('GET', `/widgets/${f.widget}/effective_access_rights`, { token: admin })).body.hash
    t.same(both[String(users.writer.id)], { team_id: writers, read: true, write: true })
    t.same(both[String(users.reader.id)], { team_id: x, read: true, write: true }, 'the reader now writes through X')
    t.equal((await s.request('PUT', `/widgets/${f.widget}`, { token: users.reader.token, json: { widget: { name: 'by reader' } } })).status, 200, 'and may write at once')
    await s.request('DELETE', `/teams/${x}/users/${users.reader.id}`, { token: admin })
    assertProblem(t, await s.request('PUT', `/widgets/${f.widget}`, { token: users.reader.token, json: { widget: { name: 'again' } } }), 403, undefined)
    await s.request('DELETE', `/teams/${x}/users/${users.writer.id}`, { token: admin })

    // both false removes the right; the reader no longer sees the widget at all
    const off = await s.request('PUT', `/widgets/${f.widget}/teams`, { token: users.writer.token, form: { team_id: String(readers), read: 'false', write: 'false' } })
    t.equal(off.status, 200)
    t.notOk(
      off.body.teams.some((r: any) => r.team_id === readers),
      'the readers’ right is gone',
    )
    assertProblem(t, await s.request('GET', `/widgets/${f.widget}`, { token: users.reader.token }), 404)
    // an outsider added to the writers' team may write at once
    await s.request('POST', `/teams/${writers}/users/${users.outsider.id}`, { token: admin })
    t.equal((await s.request('GET', `/widgets/${f.widget}`, { token: users.outsider.token })).status, 200)
    await s.request('DELETE', `/users/${users.outsider.id}/remove_from_all_teams`, { token: admin })
    assertProblem(t, await s.request('GET', `/widgets/${f.widget}`, { token: users.outsider.token }), 404)

    // lists show what one can read; administrators see everything
    const mine = await s.request('POST', '/widgets', { token: users.outsider.token, json: { widget: { name: 'outsiders own' } } })
    t.equal(mine.status, 201)
    const outsiderOwn = (await s.request('GET', `/users/${users.outsider.id}`, { token: admin })).body.user.own_team_id
    t.same(
      (await s.request('GET', `/widgets/${mine.body.widget.id}/teams`, { token: users.outsider.token })).body.teams.map((r: any) => [r.team_id, r.write]),
      [[outsiderOwn, true]],
      'the creator’s own team may write a new widget',
    )
    const ids = async (token: string) => (await s.request('GET', '/widgets', { token })).body.widgets.map((w: { id: number }) => w.id)
    t.same(await ids(users.outsider.token), [mine.body.widget.id], 'the outsider lists only their own widget')
    t.same(await ids(users.reader.token), [], 'the reader lost the only widget they could read')
    t.same(await ids(users.writer.token), [f.widget])
    t.same(await ids(admin), [f.widget, mine.body.widget.id], 'the administrator lists all')
    t.notOk(
      (await s.request('GET', `/widgets/${f.widget}/teams`, { token: admin })).body.teams.some((r: any) => r.team_id === adminOwn),
      'administrators need no team right',
    )

    // bulk for one team across widgets (administrators only)
    const other = (await s.request('POST', '/widgets', { token: admin, json: { widget: { name: 'second' } } })).body.widget.id
    const bulk = await s.request('PUT', `/widgets/update_teams/${readers}`, {
      token: admin,
      json: { access_rights: [{ id: f.widget, read: true }, { id: other, write: true }, { id: mine.body.widget.id, read: false }] },
    })
    t.equal(bulk.status, 200)
    t.match(bulk.body.access_rights, [
      { team_id: readers, object_type: 'widget', object_id: f.widget, read: true, write: false },
      { team_id: readers, object_type: 'widget', object_id: other, read: true, write: true },
    ])
    t.equal(bulk.body.access_rights.length, 2)
    t.same(await ids(users.reader.token), [f.widget, other])
    const viaTeam = await s.request('GET', `/teams/${readers}/access_rights`, { token: users.reader.token })
    t.same(
      viaTeam.body.access_rights.map((r: any) => [r.object_type, r.object_id, r.write]),
      [
        ['widget', f.widget, false],
        ['widget', other, true],
      ],
      'GET /teams/:id/access_rights shows the same rights',
    )

    // removing one team's right
    const removed = await s.request('DELETE', `/widgets/${other}/teams/${readers}`, { token: admin })
    t.equal(removed.status, 200)
    assertProblem(t, await s.request('DELETE', `/widgets/${other}/teams/${readers}`, { token: admin }), 404)
    assertProblem(t, await s.request('GET', `/widgets/${other}`, { token: users.reader.token }), 404)

    // invalid input
    assertProblem(t, await s.request('PUT', `/widgets/${f.widget}/teams`, { token: admin, json: { team_id: 99999, read: true } }), 404)
    assertProblem(t, await s.request('PUT', `/widgets/${f.widget}/teams`, { token: admin, json: { read: true } }), 422, ['team_id'])
    assertProblem(t, await s.request('PUT', `/widgets/${f.widget}/teams`, { token: admin, json: { team_id: x, read: 'maybe' } }), 422, ['read'])
    assertProblem(t, await s.request('PUT', `/widgets/${f.widget}/update_teams`, { token: admin, json: { teams: [{ team_id: x, admin: true }] } }), 422, ['teams[0][admin]'])
    assertProblem(t, await s.request('PUT', `/widgets/${f.widget}/update_teams`, { token: admin, json: { teams: [{ team_id: 99999, read: true }] } }), 404)
    t.equal((await s.request('GET', `/widgets/${f.widget}/teams`, { token: admin })).body.teams.length, 3, 'a refused bulk update changed nothing')
    assertProblem(t, await s.request('PUT', `/widgets/update_teams/${x}`, { token: admin, json: { access_rights: [{ id: 99999, read: true }] } }), 404)

    // deleting the widget forgets its rights
    t.equal((await s.request('DELETE', `/widgets/${f.widget}`, { token: users.writer.token })).status, 200)
    t.equal((await s.runtime.db.knex('access_rights').where({ object_type: 'widget', object_id: f.widget })).length, 0, 'rights of a deleted widget are gone')
  },
  { extraPlugins: [widgetsPlugin] },
)
