import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { assertProblem, databaseKinds, onEachDatabase, scratchDatabase, startTestServer, type Reply, type TestServer } from '../../core/testing/index.js'
import { LICENSE_KEY, licensedPlugins } from '../fixtures/licensed-plugins.js'
import { SERVER_VERSION } from '../../core/version.js'

const options = { extraPlugins: licensedPlugins }

const activeRow = async (s: TestServer, name: string) => {
  const row = await s.runtime.db.knex('features').where({ name }).first()
  return row ? Boolean(row.active) : undefined
}
const activate = (s: TestServer, module: string, extra: Record<string, string> = {}) =>
  s.request('PUT', '/settings/activate_module', { token: s.admin.token, json: { module, ...extra } })
const deactivate = (s: TestServer, module: string) => s.request('PUT', '/settings/deactivate_module', { token: s.admin.token, json: { module } })

/** a switched-off module's route: 404 whose problem body says so */
function assertInactive(t: Tap, reply: Reply, module: string) {
  assertProblem(t, reply, 404)
  t.equal(reply.body.code, 'module_inactive')
  t.match(reply.body.detail, `"${module}" is not active`)
}
type Tap = typeof t

onEachDatabase(
  t,
  'GET /features, /features/:id and /version',
  async (t, s) => {
    const token = s.user.token
    const list = await s.request('GET', '/features', { token })
    t.equal(list.status, 200)
    t.same(Object.keys(list.body), ['features'])
    const names = s.runtime.loaded.plugins.map((p) => p.name)
    t.same(list.body.features.map((f: { name: string }) => f.name).sort(), [...names].sort(), 'one feature per loaded plugin')
    for (const f of list.body.features) {
      t.match(f, { id: Number, name: String, active: Boolean, version: String, created_at: /Z$/, updated_at: /Z$/ }, `fields of ${f.name}`)
      t.equal(f.version, s.runtime.loaded.plugins.find((p) => p.name === f.name)!.version)
    }
    const byName = Object.fromEntries(list.body.features.map((f: { name: string }) => [f.name, f]))
    t.match(byName.core, { active: true, required: true, version: SERVER_VERSION })
    t.match(byName.licensed, { active: false, title: 'Licensed module', version: '2.3.4', required: false })
    t.match(byName['licensed-addon'], { active: false, dependencies: ['licensed'] }, 'a module whose dependency is off is off too')
    t.match(byName.roles, { active: true })

    const one = await s.request('GET', `/features/${byName.licensed.id}`, { token })
    t.same(one.body, { feature: byName.licensed }, 'by id')
    const named = await s.request('GET', '/features/licensed.json', { token })
    t.same(named.body, { feature: byName.licensed }, 'by name')
    assertProblem(t, await s.request('GET', '/features/999999', { token }), 404)
    assertProblem(t, await s.request('GET', '/features/no-such-module', { token }), 404)
    assertProblem(t, await s.request('GET', '/features'), 401)
    assertProblem(t, await s.request('GET', '/features/core'), 401)

    const version = await s.request('GET', '/version')
    t.equal(version.status, 200, 'public')
    t.same(Object.keys(version.body), ['hash'])
    t.same(version.body.hash, { server: SERVER_VERSION, api: 1, release: '7.0.5' }, 'anonymous: the server and API versions only')
    const signedIn = await s.request('GET', '/version', { token })
    t.same(Object.keys(signedIn.body.hash.plugins).sort(), [...names].sort(), 'every plugin')
    for (const p of s.runtime.loaded.plugins) t.equal(signedIn.body.hash.plugins[p.name].version, p.version, `version of ${p.name}`)
    t.equal(signedIn.body.hash.plugins.licensed.active, false)
    t.equal((await s.request('GET', '/version.json', { token })).status, 200)
  },
  options,
)

onEachDatabase(
  t,
  'activate and deactivate modules',
  async (t, s) => {
    const token = s.user.token
    assertInactive(t, await s.request('GET', '/licensed/hello', { token }), 'licensed')
    assertInactive(t, await s.request('GET', '/licensed/addon', { token }), 'licensed-addon')
    t.equal(await activeRow(s, 'licensed'), false, 'stored as off at first start')

    // who may switch, and what they must send
    assertProblem(t, await s.request('PUT', '/settings/activate_module', { token, json: { module: 'licensed', key: LICENSE_KEY } }), 403)
    assertProblem(t, await s.request('PUT', '/settings/activate_module', { json: { module: 'licensed', key: LICENSE_KEY } }), 401)
    assertProblem(t, await s.request('PUT', '/settings/deactivate_module', { token, json: { module: 'roles' } }), 403)
    assertProblem(t, await s.request('PUT', '/settings/activate_module', { token: s.admin.token, json: {} }), 422, ['module'])
    assertProblem(t, await activate(s, 'no-such-module'), 422, ['module'])
    assertProblem(t, await deactivate(s, 'no-such-module'), 422, ['module'])
    assertProblem(t, await activate(s, 'licensed'), 422, ['key'])
    const wrongKey = await activate(s, 'licensed', { key: 'MAM-LICENSE-0002' })
    assertProblem(t, wrongKey, 403)
    t.notMatch(wrongKey.text, LICENSE_KEY, 'the right key is not revealed')
    assertProblem(t, await activate(s, 'licensed-addon'), 409)
    t.match((await activate(s, 'licensed-addon')).body.detail, /"licensed"/, 'names the dependency that is off')
    t.equal(await activeRow(s, 'licensed'), false, 'still off')
    assertInactive(t, await s.request('GET', '/licensed/hello', { token }), 'licensed')

    // the right key, sent as a form this time
    const on = await s.request('PUT', '/settings/activate_module', { token: s.admin.token, form: { module: 'licensed', key: LICENSE_KEY } })
    t.equal(on.status, 200)
    t.match(on.body, { feature: { name: 'licensed', active: true } })
    t.equal(await activeRow(s, 'licensed'), true)
    t.same((await s.request('GET', '/licensed/hello', { token })).body, { hash: { hello: 'licensed' } }, 'its routes answer at once')
    t.equal((await s.request('GET', '/licensed/addon', { token })).status, 200, 'and so do those of modules built on it')
    t.equal((await s.request('GET', '/features/licensed-addon', { token })).body.feature.active, true)
    assertProblem(t, await s.request('GET', '/licensed/hello'), 401, undefined)

    // a module others depend on stays on while they are on
    const inUse = await deactivate(s, 'licensed')
    assertProblem(t, inUse, 409)
    t.match(inUse.body.detail, /licensed-addon/)
    t.same(inUse.body.dependents, ['licensed-addon'])
    t.equal(await activeRow(s, 'licensed'), true)

    t.equal((await deactivate(s, 'licensed-addon')).status, 200)
    assertInactive(t, await s.request('GET', '/licensed/addon', { token }), 'licensed-addon')
    const off = await s.request('PUT', '/settings/deactivate_module', { token: s.admin.token, query: { module: 'licensed' } })
    t.equal(off.status, 200)
    t.match(off.body, { feature: { name: 'licensed', active: false } })
    t.equal(await activeRow(s, 'licensed'), false)
    assertInactive(t, await s.request('GET', '/licensed/hello', { token }), 'licensed')
    assertInactive(t, await s.request('GET', '/licensed/hello.json', { token: s.admin.token }), 'licensed')

    // the core cannot be switched off
    const core = await deactivate(s, 'core')
    assertProblem(t, core, 409)
    t.match(core.body.detail, /core/)
    t.equal((await s.request('GET', '/features', { token })).status, 200)

    // a built-in module without a key: off and on again
    t.equal((await deactivate(s, 'roles')).status, 200)
    assertInactive(t, await s.request('GET', '/roles', { token }), 'roles')
    assertInactive(t, await s.request('POST', '/roles', { token: s.admin.token, json: { role: { name: 'x', role_matrix: {} } } }), 'roles')
    t.equal((await s.request('GET', '/features/roles', { token })).body.feature.active, false)
    t.equal((await activate(s, 'roles')).status, 200)
    t.equal((await s.request('GET', '/roles', { token })).status, 200)
  },
  options,
)

t.test('module state survives a restart', async (t) => {
  for (const db of databaseKinds()) {
    await t.test(db, async (sub) => {
      const t = sub as unknown as Tap
      const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-features-'))
      const scratch = await scratchDatabase(db)
      const servers: TestServer[] = []
      t.teardown(async () => {
        for (const server of servers) await server.close()
        await scratch.drop()
        await rm(dataDir, { recursive: true, force: true })
      })
      const start = async () => {
        const server = await startTestServer({ ...options, db, dataDir, databaseUrl: scratch.databaseUrl })
        servers.push(server)
        return server
      }

      const first = await start()
      t.equal((await activate(first, 'licensed', { key: LICENSE_KEY })).status, 200)
      t.equal((await deactivate(first, 'licensed-addon')).status, 200)
      t.equal((await deactivate(first, 'roles')).status, 200)
      await first.close()

      const second = await start()
      const features = Object.fromEntries((await second.request('GET', '/features', { token: second.user.token })).body.features.map((f: { name: string; active: boolean }) => [f.name, f.active]))
      t.match(features, { licensed: true, 'licensed-addon': false, roles: false, templates: true, core: true })
      t.equal((await second.request('GET', '/licensed/hello', { token: second.user.token })).status, 200)
      assertInactive(t, await second.request('GET', '/roles', { token: second.user.token }), 'roles')
      assertInactive(t, await second.request('GET', '/licensed/addon', { token: second.user.token }), 'licensed-addon')
    })
  }
})
