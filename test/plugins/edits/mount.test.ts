import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, grant } from '../../../core/testing/index.js'
import { describePlugins } from '../../../core/runtime.js'
import { builtinPlugins } from '../../../plugins/index.js'
import { createEdit, exists, linkTarget, mountPath, runJob, sessions } from './fixtures.js'

onEachDatabase(t, 'mount, refresh and unmount a project on an edit', async (t, s) => {
  const user = s.user.token
  const edit = await createEdit(s, 'EDIT-A')
  const project = await createProject(s, s.user, 'Feature')
  const link = mountPath(s, 'EDIT-A', 'Feature')

  const { reply, job } = await runJob(s, 'PUT', `/projects/${project.id}/mount`, user, { edit: 'EDIT-A' })
  t.match(reply.body, { job: { id: Number, action: 'edits.workspace', project_id: project.id, edit_id: edit.id } })
  t.equal(job.state, 'finished', 'the job ran')
  t.equal(await linkTarget(link), project.path, 'the workspace holds a symlink to the project tree')
  const [row] = await sessions(s, { project_id: project.id })
  t.match(row, { kind: 'mount', state: 'ready', link, edit_id: edit.id, opened_at: null })
  t.equal(Number(row.mounted_by_id), s.user.id, 'who mounted it is recorded')

  const status = await s.request('GET', '/edit/status', { token: user, headers: { 'X-APP-EDIT': 'EDIT-A' } })
  t.equal(status.status, 200)
  t.match(status.body.hash, {
    edit: { id: edit.id, name: 'EDIT-A' },
    projects_open: [],
    projects_mounted: [{ id: project.id, name: 'Feature', mount_path: 'Feature', mount_state: 'ready', mounted_by: s.user.id, locked_by: null }],
  })
  t.ok(status.body.hash.jobs.some((j: any) => j.id === job.id && j.state === 'finished'), 'the edit lists its job')

  // mounting again is harmless; the `edit` parameter takes the name (or the id)
  t.equal((await runJob(s, 'PUT', `/projects/${project.id}/mount`, user, { json: { edit: 'EDIT-A' } })).job.state, 'finished')
  t.equal((await runJob(s, 'PUT', `/projects/${project.id}/mount`, user, { json: { edit: edit.id } })).job.state, 'finished')
  t.equal((await sessions(s)).length, 1, 'still one mount')

  // refresh puts back a link that went missing
  await rm(link)
  const refreshed = await runJob(s, 'PUT', `/projects/${project.id}/refreshmountedproject`, user, { edit: 'EDIT-A' })
  t.equal(refreshed.job.state, 'finished')
  t.equal(await linkTarget(link), project.path, 'refresh restored the link')

  // a mounted project is neither renamed nor deleted
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/rename`, { token: user, json: { name: 'Feature 2' } }), 409)
  assertProblem(t, await s.request('DELETE', `/projects/${project.id}`, { token: user }), 409)
  t.ok(await exists(project.path), 'tree in place')
  t.equal((await s.request('GET', `/projects/${project.id}`, { token: user })).body.project.name, 'Feature')

  const unmounted = await runJob(s, 'DELETE', `/projects/${project.id}/umount`, user, { edit: 'EDIT-A' })
  t.equal(unmounted.job.state, 'finished')
  t.equal(await linkTarget(link), null, 'the link is gone')
  t.notOk(await exists(path.dirname(link)), "the edit's empty workspace folder is gone")
  t.ok(await exists(project.path), 'the project tree is untouched')
  t.same(await sessions(s), [], 'no row left')
  assertProblem(t, await s.request('DELETE', `/projects/${project.id}/umount`, { token: user, headers: { 'X-APP-EDIT': 'EDIT-A' } }), 409)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/refreshmountedproject`, { token: user, headers: { 'X-APP-EDIT': 'EDIT-A' } }), 409)
  t.equal((await s.request('PUT', `/projects/${project.id}/rename`, { token: user, json: { name: 'Feature 2' } })).status, 200, 'rename works once unmounted')
})

onEachDatabase(t, 'mount and unmount refuse bad calls', async (t, s) => {
  const user = s.user.token
  await createEdit(s, 'EDIT-A')
  const project = await createProject(s, s.user, 'Promo')
  const reader = await s.createUser('reader')
  const stranger = await s.createUser('stranger')
  await grant(s, project.id, reader, { read: true })
  const header = { 'X-APP-EDIT': 'EDIT-A' }

  for (const [method, route] of [
    ['PUT', 'mount'],
    ['DELETE', 'umount'],
    ['PUT', 'refreshmountedproject'],
  ] as const) {
    const url = `/projects/${project.id}/${route}`
    assertProblem(t, await s.request(method, url, { headers: header }), 401)
    assertProblem(t, await s.request(method, url, { token: user }), 400, ['X-APP-EDIT', 'edit'])
    assertProblem(t, await s.request(method, url, { token: user, headers: { 'X-APP-EDIT': 'EDIT-Z' } }), 422, ['X-APP-EDIT'])
    assertProblem(t, await s.request(method, url, { token: user, json: { edit: 'EDIT-Z' } }), 422, ['edit'])
    assertProblem(t, await s.request(method, url, { token: user, json: { edit: { name: 'x' } } }), 422, ['edit'])
    assertProblem(t, await s.request(method, `/projects/9999/${route}`, { token: user, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: stranger.token, headers: header }), 404)
    assertProblem(t, await s.request(method, url, { token: reader.token, headers: header }), 403)
  }
  t.same(await sessions(s), [], 'nothing recorded by refused calls')

  // frozen: no new mount (423), but an existing one can still be taken away
  await runJob(s, 'PUT', `/projects/${project.id}/mount`, user, { edit: 'EDIT-A' })
  t.equal((await s.request('PUT', `/projects/${project.id}/freeze`, { token: user })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/mount`, { token: user, headers: header }), 423)
  assertProblem(t, await s.request('PUT', `/projects/${project.id}/refreshmountedproject`, { token: user, headers: header }), 423)
  t.equal((await runJob(s, 'DELETE', `/projects/${project.id}/umount`, user, { edit: 'EDIT-A' })).job.state, 'finished')
  t.equal(await linkTarget(mountPath(s, 'EDIT-A', 'Promo')), null)
})

onEachDatabase(t, 'a real folder in the way fails the mount job and is left alone', async (t, s) => {
  const user = s.user.token
  await createEdit(s, 'EDIT-A')
  const project = await createProject(s, s.user, 'Blocked')
  const spot = mountPath(s, 'EDIT-A', 'Blocked')
  await mkdir(spot, { recursive: true })
  await writeFile(path.join(spot, 'keep.txt'), 'mine')

  const { job } = await runJob(s, 'PUT', `/projects/${project.id}/mount`, user, { edit: 'EDIT-A' })
  t.equal(job.state, 'failed')
  t.match(job.error, /not a mount/)
  t.equal(job.attempts, 1, 'not retried: retrying cannot help')
  t.equal(await readFile(path.join(spot, 'keep.txt'), 'utf8'), 'mine', 'the folder is untouched')
  const status = (await s.request('GET', '/edit/status', { token: user, headers: { 'X-APP-EDIT': 'EDIT-A' } })).body.hash
  t.match(status.projects_mounted, [{ id: project.id, mount_state: 'failed', mount_error: /not a mount/ }])

  // unmounting the failed mount removes the row and still leaves the folder
  t.equal((await runJob(s, 'DELETE', `/projects/${project.id}/umount`, user, { edit: 'EDIT-A' })).job.state, 'finished')
  t.same(await sessions(s), [])
  t.ok(await exists(path.join(spot, 'keep.txt')))
})

const workspaces = await mkdtemp(path.join(tmpdir(), 'mamkit-workspaces-'))
t.teardown(() => rm(workspaces, { recursive: true, force: true }))

onEachDatabase(
  t,
  'the setting mountRoot (plugins.edits.mountRoot) places the workspaces',
  async (t, s) => {
    await createEdit(s, 'EDIT-R')
    const project = await createProject(s, s.user, 'Elsewhere')
    t.equal((await runJob(s, 'PUT', `/projects/${project.id}/mount`, s.user.token, { edit: 'EDIT-R' })).job.state, 'finished')
    const [row] = await sessions(s, { project_id: project.id })
    t.equal(row.link, path.join(path.resolve(s.runtime.config.plugins.edits.mountRoot as string), 'EDIT-R', 'Elsewhere'))
    t.equal(await linkTarget(row.link), project.path, 'the link is below the configured folder')
    t.notOk(await exists(mountPath(s, 'EDIT-R', 'Elsewhere')), 'nothing below <dataDir>/mounts')
    t.equal((await runJob(s, 'DELETE', `/projects/${project.id}/umount`, s.user.token, { edit: 'EDIT-R' })).job.state, 'finished')
    t.notOk(await exists(row.link), 'unmounting removes it there')
  },
  { config: { plugins: { edits: { mountRoot: path.join(workspaces, String(process.pid)) } } } },
)

t.test('a mountRoot that is not a folder name stops the boot naming the setting', async (t) => {
  for (const mountRoot of ['', 42]) {
    const err = await describePlugins({ plugins: builtinPlugins, config: { dataDir: t.testdir(), plugins: { edits: { mountRoot } } } }).then(
      () => null,
      (e) => e,
    )
    t.equal(err?.code, 'SETTINGS_INVALID', JSON.stringify(mountRoot))
    t.match(err?.message, /setting plugins\.edits\.mountRoot /)
  }
})
