import t from 'tap'
import { assertProblem, onEachDatabase, createProject, readerAndStranger, waitForJob, type TestServer } from '../../../core/testing/index.js'
import { row } from '../projects/fixtures.js'
import type { StatusFlagService } from '../../../plugins/status-flags/index.js'

const flagRows = async (s: TestServer) => (await s.runtime.db.knex('status_flags').orderBy('id').select('name', 'color', 'scope_project_id', 'position')).map((r: any) => ({ ...r, scope_project_id: r.scope_project_id === null ? null : Number(r.scope_project_id), position: Number(r.position) }))
const setRows = async (s: TestServer) => (await s.runtime.db.knex('project_status_flags').orderBy('id').select('project_id', 'status_flag_id')).map((r: any) => [Number(r.project_id), Number(r.status_flag_id)])

/** what a transfer from a remote site does: a flag scoped to the transferred project */
async function importScoped(s: TestServer, projectId: number, name: string, color: string) {
  const em = s.em()
  const flag = await s.runtime.container.resolve<StatusFlagService>('statusFlags').create(em, { name, color, scopeProjectId: projectId })
  return flag.id
}

onEachDatabase(t, 'status flags: administrators manage them', async (t, s) => {
  assertProblem(t, await s.request('GET', '/status_flags'), 401)
  assertProblem(t, await s.request('POST', '/status_flags', { json: { status_flag: { name: 'A', color: '#ff0000' } } }), 401)
  assertProblem(t, await s.request('POST', '/status_flags', { token: s.user.token, json: { status_flag: { name: 'A', color: '#ff0000' } } }), 403)
  t.same(await flagRows(s), [])

  const approved = await s.request('POST', '/status_flags', { token: s.admin.token, json: { status_flag: { name: 'Approved', color: '#00AA00' } } })
  t.equal(approved.status, 201)
  t.match(approved.body.status_flag, { id: Number, name: 'Approved', color: '#00aa00', scope: null, scoped: false, position: 0, created_at: String, updated_at: String })
  const review = await s.request('POST', '/status_flags', { token: s.admin.token, form: { 'status_flag[name]': 'In review', 'status_flag[color]': '#ffcc00' } })
  t.equal(review.status, 201)
  t.equal(review.body.status_flag.position, 1, 'new flags go last')
  const top = await s.request('POST', '/status_flags', { token: s.admin.token, json: { name: 'Urgent', color: '#ff0000', position: 0 } })
  t.equal(top.status, 201, 'top-level names work too')
  t.same(await flagRows(s), [
    { name: 'Approved', color: '#00aa00', scope_project_id: null, position: 0 },
    { name: 'In review', color: '#ffcc00', scope_project_id: null, position: 1 },
    { name: 'Urgent', color: '#ff0000', scope_project_id: null, position: 0 },
  ])

  // bad input names the parameter and writes nothing
  const bad: Array<[unknown, string[]]> = [
    [{ status_flag: { color: '#ff0000' } }, ['status_flag[name]']],
    [{ status_flag: { name: 'X' } }, ['status_flag[color]']],
    [{}, ['status_flag[name]', 'status_flag[color]']],
    [{ status_flag: { name: 'X', color: 'red' } }, ['status_flag[color]']],
    [{ status_flag: { name: 'X', color: '#ff00' } }, ['status_flag[color]']],
    [{ status_flag: { name: 'X', color: '#gg0000' } }, ['status_flag[color]']],
    [{ status_flag: { name: '', color: '#ff0000' } }, ['status_flag[name]']],
    [{ status_flag: { name: '   ', color: '#ff0000' } }, ['status_flag[name]']],
    [{ status_flag: { name: 'a\u0000b', color: '#ff0000' } }, ['status_flag[name]']],
    [{ status_flag: { name: 'x'.repeat(101), color: '#ff0000' } }, ['status_flag[name]']],
    [{ status_flag: { name: 'X', color: '#ff0000', scope: 1 } }, ['status_flag[scope]']],
    [{ status_flag: { name: 'X', color: '#ff0000', position: -1 } }, ['status_flag[position]']],
    [{ name: 'X', color: 'blue' }, ['color']],
  ]
  for (const [json, params] of bad) assertProblem(t, await s.request('POST', '/status_flags', { token: s.admin.token, json }), 422, params)
  assertProblem(t, await s.request('POST', '/status_flags', { token: s.admin.token, json: { status_flag: { name: 'Approved', color: '#123456' } } }), 409, ['status_flag[name]'])
  t.equal((await flagRows(s)).length, 3, 'refused requests write nothing')

  // list and show
  const list = await s.request('GET', '/status_flags', { token: s.user.token })
  t.equal(list.status, 200)
  t.same(Object.keys(list.body), ['array'], 'root key `array` (wire.md)')
  t.same(list.body.array.map((f: any) => f.name), ['Approved', 'Urgent', 'In review'], 'by position, then id')
  const shown = await s.request('GET', `/status_flags/${approved.body.status_flag.id}.json`, { token: s.user.token })
  t.equal(shown.status, 200)
  t.same(Object.keys(shown.body), ['status_flag'])
  t.equal(shown.body.status_flag.name, 'Approved')
  t.same(list.body.array[0], shown.body.status_flag, 'the list (plain rows) and the show (the entity) answer a flag alike on both databases')
  assertProblem(t, await s.request('GET', `/status_flags/${approved.body.status_flag.id}`), 401)
  assertProblem(t, await s.request('GET', '/status_flags/99999', { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', '/status_flags/abc', { token: s.user.token }), 422, ['id'])

  // update
  const id = review.body.status_flag.id
  assertProblem(t, await s.request('PUT', `/status_flags/${id}`, { json: { status_flag: { color: '#000000' } } }), 401)
  assertProblem(t, await s.request('PUT', `/status_flags/${id}`, { token: s.user.token, json: { status_flag: { color: '#000000' } } }), 403)
  assertProblem(t, await s.request('PUT', '/status_flags/99999', { token: s.admin.token, json: { status_flag: { color: '#000000' } } }), 404)
  assertProblem(t, await s.request('PUT', `/status_flags/${id}`, { token: s.admin.token, json: { status_flag: { color: 'black' } } }), 422, ['status_flag[color]'])
  assertProblem(t, await s.request('PUT', `/status_flags/${id}`, { token: s.admin.token, json: { status_flag: { name: 'Approved' } } }), 409, ['status_flag[name]'])
  t.equal((await row(s, 'status_flags', { id })).color, '#ffcc00', 'refused updates change nothing')
  const updated = await s.request('PUT', `/status_flags/${id}`, { token: s.admin.token, json: { status_flag: { name: 'Needs review', color: '#FFEE00', position: 5 } } })
  t.equal(updated.status, 200)
  t.match(updated.body.status_flag, { id, name: 'Needs review', color: '#ffee00', position: 5 })
  t.match(await row(s, 'status_flags', { id }), { name: 'Needs review', color: '#ffee00' })
  t.equal((await s.request('PUT', `/status_flags/${id}`, { token: s.admin.token, json: { status_flag: { name: 'Needs review' } } })).status, 200, 'keeping its own name is fine')

  // delete
  assertProblem(t, await s.request('DELETE', `/status_flags/${id}`), 401)
  assertProblem(t, await s.request('DELETE', `/status_flags/${id}`, { token: s.user.token }), 403)
  assertProblem(t, await s.request('DELETE', '/status_flags/99999', { token: s.admin.token }), 404)
  const deleted = await s.request('DELETE', `/status_flags/${id}`, { token: s.admin.token })
  t.equal(deleted.status, 200)
  t.equal(deleted.body.status_flag.name, 'Needs review')
  t.notOk(await row(s, 'status_flags', { id }))
  assertProblem(t, await s.request('GET', `/status_flags/${id}`, { token: s.admin.token }), 404)
})

onEachDatabase(t, 'status flags on projects: available flags with `set`, toggling needs write', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Flagged' })
  const other = await createProject(s, s.user, { name: 'Other' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const mk = async (name: string, color: string) => (await s.request('POST', '/status_flags', { token: s.admin.token, json: { status_flag: { name, color } } })).body.status_flag.id as number
  const approved = await mk('Approved', '#00ff00')
  const blocked = await mk('Blocked', '#ff0000')
  // flags that came with transferred projects: one for p, one for the other project
  const remote = await importScoped(s, p.id, 'Remote: graded', '#0000FF')
  const foreign = await importScoped(s, other.id, 'Remote: locked', '#333333')

  t.same((await s.request('GET', '/status_flags', { token: s.admin.token })).body.array.map((f: any) => f.name), ['Approved', 'Blocked'], 'the site list holds unscoped flags only')

  const available = await s.request('GET', `/projects/${p.id}/status_flags`, { token: reader.token })
  t.equal(available.status, 200)
  t.same(Object.keys(available.body), ['array'])
  t.same(
    available.body.array.map((f: any) => [f.id, f.name, f.scope, f.set]),
    [
      [approved, 'Approved', null, false],
      [blocked, 'Blocked', null, false],
      [remote, 'Remote: graded', p.id, false],
    ],
    "unscoped flags, then the project's own scoped ones",
  )
  t.equal(available.body.array[2].color, '#0000ff')
  t.same((await s.request('GET', `/projects/${other.id}/status_flags`, { token: s.user.token })).body.array.map((f: any) => f.id), [approved, blocked, foreign])
  assertProblem(t, await s.request('GET', `/projects/${p.id}/status_flags`), 401)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/status_flags`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/projects/99999/status_flags', { token: s.admin.token }), 404)

  // a scoped flag is visible to those who can read its project
  t.equal((await s.request('GET', `/status_flags/${remote}`, { token: reader.token })).body.status_flag.scoped, true)
  assertProblem(t, await s.request('GET', `/status_flags/${remote}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', `/status_flags/${foreign}`, { token: reader.token }), 404)

  // toggle
  const on = await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: s.user.token })
  t.equal(on.status, 200)
  t.match(on.body.status_flag, { id: approved, name: 'Approved', set: true, project_id: p.id })
  t.same(await setRows(s), [[p.id, approved]])
  const setBy = await row(s, 'project_status_flags', { project_id: p.id, status_flag_id: approved })
  t.equal(Number(setBy.set_by_id), s.user.id)
  t.equal((await s.request('PUT', `/projects/${p.id}/status_flags/${remote}`, { token: s.user.token })).body.status_flag.set, true, 'its own scoped flag')
  t.same(
    (await s.request('GET', `/projects/${p.id}/status_flags`, { token: s.user.token })).body.array.map((f: any) => [f.id, f.set]),
    [[approved, true], [blocked, false], [remote, true]],
  )
  const off = await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: s.user.token })
  t.equal(off.body.status_flag.set, false, 'the second toggle clears it')
  t.same(await setRows(s), [[p.id, remote]])

  // explicit set=true|false is idempotent
  for (let i = 0; i < 2; i++) t.equal((await s.request('PUT', `/projects/${p.id}/status_flags/${blocked}`, { token: s.user.token, json: { set: true } })).body.status_flag.set, true)
  t.equal((await s.request('PUT', `/projects/${p.id}/status_flags/${blocked}`, { token: s.user.token, query: { set: 'false' } })).body.status_flag.set, false)
  t.equal((await s.request('PUT', `/projects/${p.id}/status_flags/${blocked}`, { token: s.user.token, form: { set: 'false' } })).body.status_flag.set, false)
  t.same(await setRows(s), [[p.id, remote]])

  // refusals change nothing
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/99999/status_flags/${approved}`, { token: s.admin.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/99999`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${foreign}`, { token: s.user.token }), 404, undefined)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: s.user.token, json: { set: 'yes' } }), 422, ['set'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: s.user.token, json: { colour: 1 } }), 422, ['colour'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/x`, { token: s.user.token }), 422, ['status_flag_id'])
  t.same(await setRows(s), [[p.id, remote]])

  // frozen: 423, reads keep working
  await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })
  const locked = await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: s.user.token })
  assertProblem(t, locked, 423)
  t.match(locked.body.frozen_by, { id: s.user.id, username: 'editor' })
  t.equal((await s.request('GET', `/projects/${p.id}/status_flags`, { token: s.user.token })).status, 200)
  await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })
  t.same(await setRows(s), [[p.id, remote]])

  // deleting a flag takes it off every project
  await s.request('PUT', `/projects/${p.id}/status_flags/${approved}`, { token: s.user.token })
  await s.request('PUT', `/projects/${other.id}/status_flags/${approved}`, { token: s.user.token })
  t.equal((await setRows(s)).length, 3)
  t.equal((await s.request('DELETE', `/status_flags/${approved}`, { token: s.admin.token })).status, 200)
  t.same(await setRows(s), [[p.id, remote]])

  // administrators change and delete scoped flags too
  t.equal((await s.request('PUT', `/status_flags/${foreign}`, { token: s.admin.token, json: { status_flag: { color: '#444444' } } })).body.status_flag.color, '#444444')

  // a deleted project 404s; purging it removes its scoped flags and their settings
  await s.request('DELETE', `/projects/${p.id}`, { token: s.user.token })
  assertProblem(t, await s.request('GET', `/projects/${p.id}/status_flags`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/status_flags/${blocked}`, { token: s.user.token }), 404)
  const purge = await s.request('DELETE', '/trash', { token: s.admin.token })
  t.equal((await waitForJob(s, s.admin.token, purge.body.job.id)).state, 'finished')
  t.notOk(await row(s, 'status_flags', { id: remote }), 'scoped flags go with their project')
  t.same(await setRows(s), [])
  t.ok(await row(s, 'status_flags', { id: foreign }), "other projects' flags stay")
})

onEachDatabase(t, 'scoped flags: names are unique per scope', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'One' })
  const q = await createProject(s, s.user, { name: 'Two' })
  await s.request('POST', '/status_flags', { token: s.admin.token, json: { status_flag: { name: 'Done', color: '#00ff00' } } })
  await importScoped(s, p.id, 'Done', '#00ff00')
  await importScoped(s, q.id, 'Done', '#00ff00')
  await t.rejects(importScoped(s, p.id, 'Done', '#00ff00'), { status: 409 } as any)
  t.equal((await flagRows(s)).length, 3)
})
