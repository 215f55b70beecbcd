import t from 'tap'
import { onEachDatabase, type TestServer } from '../../core/testing/index.js'

/** `/teams/:team_id/users/:user_id` → `/teams/1/users/1` */
const concrete = (path: string) => path.replace(/:[A-Za-z_]+/g, '1')

async function grantedToPlainUsers(s: TestServer): Promise<Set<string>> {
  const row = await s.runtime.db.knex('roles').join('users', 'users.role_id', 'roles.id').where('users.id', s.user.id).first('roles.role_matrix')
  const matrix: Record<string, boolean> = typeof row.role_matrix === 'string' ? JSON.parse(row.role_matrix) : row.role_matrix
  return new Set(Object.keys(matrix).filter((k) => matrix[k] === true))
}

// SECURITY.md: every route declares access, and the route table is walked to prove it is enforced
onEachDatabase(t, 'every route is closed to the anonymous and every privileged route to plain users', async (t, s) => {
  const routes = s.runtime.loaded.routes
  t.ok(routes.length > 30, `${routes.length} routes walked`)
  const granted = await grantedToPlainUsers(s)
  t.notOk(granted.has('admin'), 'the plain user is no administrator')

  let anonymous = 0
  let privileged = 0
  for (const route of routes) {
    const path = concrete(route.path)
    const where = `${route.method} ${route.path} (${route.plugin})`
    if (route.access === 'public') {
      const reply = await s.request(route.method, path)
      t.ok(reply.status < 500, `${where} is public and answers the anonymous without a server error (${reply.status})`)
      continue
    }
    const reply = await s.request(route.method, path)
    t.equal(reply.status, 401, `${where} refuses the anonymous`)
    t.equal(reply.body?.code, 'unauthenticated', `${where}: problem body`)
    anonymous++

    const privilegedRoute = route.access === 'admin' || (route.access !== 'authenticated' && !granted.has(route.access))
    if (!privilegedRoute) continue
    const asUser = await s.request(route.method, path, { token: s.user.token })
    t.equal(asUser.status, 403, `${where} (access ${route.access}) refuses a plain user`)
    t.equal(asUser.body?.code, 'forbidden', `${where}: problem body`)
    privileged++
  }
  t.ok(anonymous > 20, `${anonymous} authenticated routes refused the anonymous`)
  t.ok(privileged > 10, `${privileged} privileged routes refused the plain user`)
})
