import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, grant, waitForJob } from '../../../core/testing/index.js'
import { createEdit, linkTarget, mountPath, runJob, sessions } from './fixtures.js'

onEachDatabase(t, 'open for write keeps other edits out until closed or force-closed', async (t, s) => {
  const user = s.user.token
  const a = await createEdit(s, 'EDIT-A')
  const b = await createEdit(s, 'EDIT-B')
  const project = await createProject(s, s.user, 'Series')
  const onA = mountPath(s, 'EDIT-A', 'Series')
  const onB = mountPath(s, 'EDIT-B', 'Series')
  const A = { 'X-APP-EDIT': 'EDIT-A' }
  const B = { 'X-APP-EDIT': 'EDIT-B' }

  const opened = await runJob(s, 'PUT', `/projects/${project.id}/open`, user, { edit: 'EDIT-A' })
  t.match(opened.reply.body.job, { project_id: project.id, edit_id: a.id })
  t.equal(opened.job.state, 'finished')
  t.equal(await linkTarget(onA), project.path, 'opening mounts the project on the edit')
  const shown = (await s.request('GET', `/projects/${project.id}`, { token: user })).body.project
  t.match(shown, { last_opened_by: s.user.id, last_opened_by_edit: 'EDIT-A', last_used_at: /Z$/ })
  const [row] = await sessions(s)
  t.equal(Number(row.opened_by_id), s.user.id)
  t.ok(row.opened_at, 'open for write recorded')
  const status = (await s.request('GET', '/edit/status', { token: user, headers: A })).body.hash
  t.match(status.projects_open, [{ id: project.id, locked_by: s.user.id, mount_path: path.basename(onA) }])
  t.equal(status.projects_mounted.length, 1)

  // a second edit can neither open nor mount it
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/open`, { token: user, headers: B }), 409)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/mount`, { token: s.admin.token, headers: B }), 409)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/sync`, { token: user, headers: B }), 409)
  assertProblem(t, await s.request('DELETE', `/projects/${project.id}/close`, { token: user, headers: B }), 409)
  t.equal(await linkTarget(onB), null, 'nothing on the second edit')
  t.equal((await sessions(s)).length, 1)

  // sync renews the mounts
  const synced = await runJob(s, 'PUT', `/projects/${project.id}/sync`, user, { edit: 'EDIT-A' })
  t.equal(synced.job.state, 'finished')
  t.equal(await linkTarget(onA), project.path)

  // close: the mount goes with it
  t.equal((await runJob(s, 'DELETE', `/projects/${project.id}/close`, user, { edit: 'EDIT-A' })).job.state, 'finished')
  t.equal(await linkTarget(onA), null, 'closed and unmounted')
  t.same(await sessions(s), [])
  assertProblem(t, await s.request('DELETE', `/projects/${project.id}/close`, { token: user, headers: A }), 409)

  // mounted (not open) on A: B still cannot open it for write, until a force close
  await runJob(s, 'PUT', `/projects/${project.id}/mount`, user, { edit: 'EDIT-A' })
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/open`, { token: user, headers: B }), 409)
  const forced = await runJob(s, 'DELETE', `/projects/${project.id}/forceclose`, user)
  t.match(forced.job, { state: 'finished', project_id: project.id, edit_id: null })
  t.equal(await linkTarget(onA), null, 'force close took the mount away from A')
  t.same(await sessions(s), [])
  t.equal((await runJob(s, 'PUT', `/projects/${project.id}/open`, user, { edit: 'EDIT-B' })).job.state, 'finished', 'B opens it now')
  t.equal(await linkTarget(onB), project.path)
  t.equal((await s.request('GET', `/projects/${project.id}`, { token: user })).body.project.last_opened_by_edit, 'EDIT-B')

  // frozen: no opening for write (423), closing still works
  t.equal((await s.request('PUT', `/projects/${project.id}/freeze`, { token: user })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/open`, { token: user, headers: B }), 423)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/sync`, { token: user, headers: B }), 423)
  t.equal((await runJob(s, 'DELETE', `/projects/${project.id}/close`, user, { edit: 'EDIT-B' })).job.state, 'finished')
  t.equal(await linkTarget(onB), null)

  // two edits opening one project at the same instant: exactly one wins
  const race = await createProject(s, s.user, 'Race')
  const replies = await Promise.all([A, B].map((headers) => s.request('PUT', `/projects/${race.id}/open`, { token: user, headers })))
  t.same(replies.map((r) => r.status).sort(), [202, 409])
  await waitForJob(s, user, replies.find((r) => r.status === 202)!.body.job.id)
  const [holder, ...others] = await sessions(s, { project_id: race.id })
  t.same(others, [], 'one holder')
  const { id: _id, ...copy } = holder
  await t.rejects(s.runtime.db.knex('edit_sessions').insert({ ...copy, edit_id: holder.edit_id === a.id ? b.id : a.id }), 'the database itself refuses a second writer')
})

onEachDatabase(t, 'open, close, sync and forceclose refuse bad calls', async (t, s) => {
  const user = s.user.token
  await createEdit(s, 'EDIT-A')
  const project = await createProject(s, s.user, 'Doc')
  const reader = await s.createUser('reader')
  const stranger = await s.createUser('stranger')
  await grant(s, project.id, reader, { read: true })
  const header = { 'X-APP-EDIT': 'EDIT-A' }

  for (const [method, route, needsEdit] of [
    ['PUT', 'open', true],
    ['PUT', 'sync', true],
    ['DELETE', 'close', true],
    ['DELETE', 'forceclose', false],
  ] as const) {
    const url = `/projects/${project.id}/${route}`
    assertProblem(t, await s.request(method, url, { headers: header }), 401)
    if (needsEdit) assertProblem(t, await s.request(method, url, { token: user }), 400, ['X-APP-EDIT', 'edit'])
    assertProblem(t, await s.request(method, url, { token: user, json: { edit: 'EDIT-Z' } }), 422, ['edit'])
    assertProblem(t, await s.request(method, `/projects/9999/${route}`, { token: user, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: stranger.token, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: reader.token, headers: header }), 403)
  }
  t.same(await sessions(s), [], 'nothing recorded')
  const shown = (await s.request('GET', `/projects/${project.id}`, { token: user })).body.project
  t.equal(shown.last_opened_by, null, 'a refused open records nothing')
})

onEachDatabase(t, 'clear, unlock and delete take an edit’s mounts away', async (t, s) => {
  const user = s.user.token
  const edit = await createEdit(s, 'EDIT-A')
  const one = await createProject(s, s.user, 'One')
  const two = await createProject(s, s.user, 'Two')
  const links = [mountPath(s, 'EDIT-A', 'One'), mountPath(s, 'EDIT-A', 'Two')]
  const mountBoth = async () => {
    await runJob(s, 'PUT', `/projects/${one.id}/open`, user, { edit: 'EDIT-A' })
    await runJob(s, 'PUT', `/projects/${two.id}/mount`, user, { edit: 'EDIT-A' })
    t.same(await Promise.all(links.map(linkTarget)), [one.path, two.path], 'both mounted')
  }
  const latestJob = async () => (await s.runtime.db.knex('jobs').where({ edit_id: edit.id }).orderBy('id', 'desc').first()).id as number

  // clear by a reader of one project leaves that one alone
  await mountBoth()
  const reader = await s.createUser('reader')
  await grant(s, one.id, reader, { read: true })
  const partial = await runJob(s, 'PUT', '/edit/clear', reader.token, { edit: 'EDIT-A' })
  t.equal(partial.job.state, 'finished')
  t.equal((await sessions(s)).length, 2, 'a reader clears nothing')
  const readerStatus = (await s.request('GET', '/edit/status', { token: reader.token, headers: { 'X-APP-EDIT': 'EDIT-A' } })).body.hash
  t.same(readerStatus.projects_mounted.map((p: any) => p.id), [one.id], 'the reader sees only what they can read')
  t.same(readerStatus.jobs.map((j: any) => j.id), [partial.job.id], 'and only their own jobs')

  const cleared = await runJob(s, 'PUT', '/edit/clear', user, { edit: 'EDIT-A' })
  t.equal(cleared.job.state, 'finished')
  t.same(await Promise.all(links.map(linkTarget)), [null, null], 'clear closed and unmounted everything')
  t.same(await sessions(s), [])

  // unlock (admin): closes everything and reports the edit
  await mountBoth()
  const unlocked = await s.request('PUT', `/edits/${edit.id}/unlock`, { token: s.admin.token })
  t.equal(unlocked.status, 200)
  t.match(unlocked.body, { edit: { id: edit.id, name: 'EDIT-A' } })
  t.equal((await waitForJob(s, s.admin.token, await latestJob())).state, 'finished')
  t.same(await Promise.all(links.map(linkTarget)), [null, null], 'unlock released the mounts')
  t.same(await sessions(s), [])
  const status = (await s.request('GET', '/edit/status', { token: s.admin.token, headers: { 'X-APP-EDIT': 'EDIT-A' } })).body.hash
  t.same([status.projects_open, status.projects_mounted], [[], []])
  t.notOk(status.jobs.some((j: any) => ['queued', 'running'].includes(j.state)), 'no unfinished job left')
  t.equal((await s.request('PUT', `/projects/${one.id}/open`, { token: user, headers: { 'X-APP-EDIT': 'EDIT-A' } })).status, 202, 'the edit works again')
  await waitForJob(s, user, await latestJob())

  // deleting the edit takes its workspace away
  await runJob(s, 'PUT', `/projects/${two.id}/mount`, user, { edit: 'EDIT-A' })
  t.equal((await s.request('DELETE', `/edits/${edit.id}`, { token: s.admin.token })).status, 200)
  t.equal((await waitForJob(s, s.admin.token, await latestJob())).state, 'finished')
  t.same(await Promise.all(links.map(linkTarget)), [null, null], 'links gone with the edit')
  t.same(await sessions(s), [])
  t.equal((await s.request('PUT', `/projects/${one.id}/rename`, { token: user, json: { name: 'One bis' } })).status, 200, 'projects are free again')
})
