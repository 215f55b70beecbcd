import { realpath } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, grant } from '../../../core/testing/index.js'
import { createEdit, exists, linkTarget, mountPath, runJob, sessions } from './fixtures.js'

const parentOf = async (s: any, id: number) => (await s.runtime.db.knex('projects').where({ id }).first()).parent_id

onEachDatabase(t, 'add, mount, unmount and remove subprojects', async (t, s) => {
  const user = s.user.token
  await createEdit(s, 'EDIT-A')
  const parent = await createProject(s, s.user, 'Parent')
  const child = await createProject(s, s.user, 'Child')
  const grandchild = await createProject(s, s.user, 'Grandchild')
  const other = await createProject(s, s.user, 'Other')
  const put = (id: number, route: string, body: object, method = 'PUT') => s.request(method, `/projects/${id}/${route}`, { token: user, json: body, headers: { 'X-APP-EDIT': 'EDIT-A' } })

  const added = await put(parent.id, 'addsubproject', { subproject_id: child.id })
  t.equal(added.status, 200)
  t.match(added.body, { project: { id: child.id, parent_id: parent.id } })
  t.equal(Number(await parentOf(s, child.id)), parent.id)
  t.equal((await put(parent.id, 'addsubproject', { subproject_id: child.id })).status, 200, 'adding again is harmless')
  t.equal((await put(child.id, 'addsubproject', { subproject_id: grandchild.id })).status, 200)

  // no cycles, not itself, not two parents
  assertProblem(t, await put(grandchild.id, 'addsubproject', { subproject_id: parent.id }), 422, ['subproject_id'])
  assertProblem(t, await put(child.id, 'addsubproject', { subproject_id: parent.id }), 422, ['subproject_id'])
  assertProblem(t, await put(parent.id, 'addsubproject', { subproject_id: parent.id }), 422, ['subproject_id'])
  assertProblem(t, await put(parent.id, 'addsubproject', {}), 422, ['subproject_id'])
  assertProblem(t, await put(other.id, 'addsubproject', { subproject_id: child.id }), 409)
  t.equal(await parentOf(s, parent.id), null, 'nothing changed by refused calls')
  t.equal(Number(await parentOf(s, child.id)), parent.id)

  // a subproject mounts inside its parent's mount, once the parent is mounted
  assertProblem(t, await put(parent.id, 'mountsubproject', { subproject_id: child.id }), 409)
  await runJob(s, 'PUT', `/projects/${parent.id}/mount`, user, { edit: 'EDIT-A' })
  assertProblem(t, await put(parent.id, 'mountsubproject', { subproject_id: other.id }), 422, ['subproject_id'])
  assertProblem(t, await put(parent.id, 'mountsubproject', { subproject_id: grandchild.id }), 422, ['subproject_id'])
  const mounted = await runJob(s, 'PUT', `/projects/${parent.id}/mountsubproject`, user, { edit: 'EDIT-A', json: { subproject_id: child.id } })
  t.equal(mounted.job.state, 'finished')
  const inner = path.join(parent.path, 'Child')
  t.equal(await linkTarget(inner), child.path, "a symlink below the parent's tree")
  t.equal(await realpath(path.join(mountPath(s, 'EDIT-A', 'Parent'), 'Child')), await realpath(child.path), "seen through the parent's mount")
  t.match(await sessions(s, { project_id: child.id }), [{ kind: 'subproject', parent_id: parent.id, state: 'ready', link: inner }])
  const status = (await s.request('GET', '/edit/status', { token: user, headers: { 'X-APP-EDIT': 'EDIT-A' } })).body.hash
  t.match(status.projects_mounted, [{ id: parent.id, mounted_in: null }, { id: child.id, mount_kind: 'subproject', mounted_in: parent.id }])

  // while mounted: not renamed, not removed from the parent
  assertProblem(t, await s.request('PUT', `/projects/${child.id}/rename`, { token: user, json: { name: 'Kid' } }), 409)
  assertProblem(t, await put(parent.id, 'removesubproject', { subproject_id: child.id }, 'DELETE'), 409)

  const unmounted = await runJob(s, 'DELETE', `/projects/${parent.id}/umountsubproject`, user, { edit: 'EDIT-A', json: { subproject_id: child.id } })
  t.equal(unmounted.job.state, 'finished')
  t.equal(await linkTarget(inner), null, 'the inner link is gone')
  t.ok(await exists(child.path), 'the subproject tree stays')
  t.equal(await linkTarget(mountPath(s, 'EDIT-A', 'Parent')), parent.path, 'the parent stays mounted')
  assertProblem(t, await put(parent.id, 'umountsubproject', { subproject_id: child.id }, 'DELETE'), 409)

  // unmounting the parent takes its subproject mounts along
  await runJob(s, 'PUT', `/projects/${parent.id}/mountsubproject`, user, { edit: 'EDIT-A', json: { subproject_id: child.id } })
  t.equal(await linkTarget(inner), child.path)
  await runJob(s, 'DELETE', `/projects/${parent.id}/umount`, user, { edit: 'EDIT-A' })
  t.same([await linkTarget(inner), await linkTarget(mountPath(s, 'EDIT-A', 'Parent'))], [null, null])
  t.same(await sessions(s), [])

  const removed = await put(parent.id, 'removesubproject', { subproject_id: child.id }, 'DELETE')
  t.equal(removed.status, 200)
  t.match(removed.body, { project: { id: child.id, parent_id: null } })
  t.equal(await parentOf(s, child.id), null)
  assertProblem(t, await put(parent.id, 'removesubproject', { subproject_id: child.id }, 'DELETE'), 422, ['subproject_id'])
})

onEachDatabase(t, 'subproject calls refuse bad calls', async (t, s) => {
  const user = s.user.token
  await createEdit(s, 'EDIT-A')
  const parent = await createProject(s, s.user, 'Parent')
  const child = await createProject(s, s.user, 'Child')
  const reader = await s.createUser('reader')
  const stranger = await s.createUser('stranger')
  await grant(s, parent.id, reader, { read: true })
  await grant(s, child.id, reader, { read: true })
  const header = { 'X-APP-EDIT': 'EDIT-A' }
  t.equal((await s.request('PUT', `/projects/${parent.id}/addsubproject`, { token: user, json: { subproject_id: child.id } })).status, 200)

  for (const [method, route] of [
    ['PUT', 'addsubproject'],
    ['DELETE', 'removesubproject'],
    ['PUT', 'mountsubproject'],
    ['DELETE', 'umountsubproject'],
  ] as const) {
    const url = `/projects/${parent.id}/${route}`
    const json = { subproject_id: child.id }
    assertProblem(t, await s.request(method, url, { json, headers: header }), 401)
    assertProblem(t, await s.request(method, `/projects/9999/${route}`, { token: user, json, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: user, json: { subproject_id: 9999 }, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: stranger.token, json, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: reader.token, json, headers: header }), 403)
    assertProblem(t, await s.request(method, url, { token: user, json: { subproject_id: 'x' }, headers: header }), 422, ['subproject_id'])
  }
  assertProblem(t, await s.request('PUT', `/projects/${parent.id}/mountsubproject`, { token: user, json: { subproject_id: child.id } }), 400, ['X-APP-EDIT', 'edit'])
  assertProblem(t, await s.request('DELETE', `/projects/${parent.id}/umountsubproject`, { token: user, json: { subproject_id: child.id } }), 400, ['X-APP-EDIT', 'edit'])

  // a real folder where the link would go: 409, the folder untouched
  await runJob(s, 'PUT', `/projects/${parent.id}/mount`, user, { edit: 'EDIT-A' })
  t.equal((await s.request('PUT', `/projects/${parent.id}/create_folder`, { token: user, json: { path: 'Child' } })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${parent.id}/mountsubproject`, { token: user, json: { subproject_id: child.id }, headers: header }), 409)
  t.equal(await linkTarget(path.join(parent.path, 'Child')), null)
  t.ok(await exists(path.join(parent.path, 'Child')), 'the folder stays')

  // frozen subproject: 423
  t.equal((await s.request('PUT', `/projects/${child.id}/freeze`, { token: user })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${parent.id}/mountsubproject`, { token: user, json: { subproject_id: child.id }, headers: header }), 423)
})
