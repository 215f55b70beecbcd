import path from 'node:path'
import t from 'tap'
import { onEachDatabase, createProject, grant, readerAndStranger, teamWith, waitFor } from '../../../core/testing/index.js'
import { coreServices, type Outbox } from '../../../core/index.js'
import { makeTemplate } from './fixtures.js'
import { createEdit, runJob } from '../edits/fixtures.js'

/**
 * Issue 18 items 13 and 22: absolute server paths (project `path`, template `directory`, mount paths,
 * the media tools' install paths) are shown to administrators only; others get the path inside the
 * storage. Anonymous `GET /version` names the server and API versions only. Project JSON carries
 * `mounted_by` and `locked_by`, filled by the edits plugin with one query per page.
 */

onEachDatabase(t, 'server paths for administrators only; versions by caller; mounted_by and locked_by on projects', async (t, s) => {
  const storageRoot = path.join(s.dataDir, 'storage', 'default')
  const tpl = await makeTemplate(s, { name: 'Promo' })
  const p = await createProject(s, s.user, { name: 'Exposed', template_id: tpl.id })
  const others = [await createProject(s, s.user, { name: 'Other 1' }), await createProject(s, s.user, { name: 'Other 2' })]
  const { reader } = await readerAndStranger(s, p.id)
  const noServerPath = (reply: { text: string }, what: string) => t.notOk(reply.text.includes(s.dataDir), `${what}: no server path`)

  // projects: the path inside the storage for users, the absolute path for administrators
  for (const who of [s.user, reader]) {
    const shown = await s.request('GET', `/projects/${p.id}`, { token: who.token })
    t.match(shown.body.project, { storage: 'default', folder: 'Exposed', path: 'Exposed' }, `${who.username}: the folder inside the storage`)
    noServerPath(shown, `GET /projects/:id as ${who.username}`)
    const listed = await s.request('GET', '/projects', { token: who.token })
    t.ok(listed.body.projects.every((x: any) => x.path === x.folder), `${who.username}: the list too`)
    noServerPath(listed, `GET /projects as ${who.username}`)
  }
  t.match((await s.request('GET', `/projects/${p.id}`, { token: s.admin.token })).body.project, { storage: 'default', folder: 'Exposed', path: path.join(storageRoot, 'Exposed') })
  t.ok((await s.request('GET', '/projects', { token: s.admin.token })).body.projects.every((x: any) => x.path === path.join(storageRoot, x.folder)), 'administrators: absolute paths in the list')

  // templates: the folder below the templates folder, absolute for administrators
  for (const route of ['/templates', `/templates/${tpl.id}`]) {
    const asUser = await s.request('GET', route, { token: s.user.token })
    noServerPath(asUser, `GET ${route} as a user`)
    const asAdmin = await s.request('GET', route, { token: s.admin.token })
    t.ok(asAdmin.text.includes(path.join(s.dataDir, 'templates', 'Promo')), `GET ${route} as an administrator: the absolute directory`)
  }
  t.equal((await s.request('GET', `/templates/${tpl.id}`, { token: s.user.token })).body.template.directory, 'Promo')

  // GET /version: anonymous callers learn the versions of the server and API, nothing about the machine
  const anonymous = await s.request('GET', '/version')
  t.same(Object.keys(anonymous.body.hash).sort(), ['api', 'release', 'server'])
  const asUser = await s.request('GET', '/version', { token: s.user.token })
  t.same(Object.keys(asUser.body.hash).sort(), ['api', 'plugins', 'release', 'server'], 'signed in: the plugins too')
  t.match(asUser.body.hash.plugins, { core: { active: true }, projects: { active: true } })
  const asAdmin = await s.request('GET', '/version', { token: s.admin.token })
  t.match(asAdmin.body.hash, { server: String, api: 1, node: process.versions.node, plugins: Object, tools: { ffmpeg: String, ffprobe: String } }, 'administrators: Node.js and the tools in use')

  // mounted_by and locked_by: null until an edit holds the project
  t.match((await s.request('GET', `/projects/${p.id}`, { token: s.user.token })).body.project, { mounted_by: null, locked_by: null })
  await createEdit(s, 'EDIT-A')
  await createEdit(s, 'EDIT-B')
  const colleague = await s.createUser('colleague')
  await grant(s, p.id, await teamWith(s, 'writers', colleague), { read: true, write: true })
  t.equal((await runJob(s, 'PUT', `/projects/${p.id}/mount`, colleague.token, { edit: 'EDIT-A' })).job.state, 'finished')
  t.match((await s.request('GET', `/projects/${p.id}`, { token: reader.token })).body.project, { mounted_by: colleague.id, locked_by: null }, 'mounted, not open')
  t.equal((await runJob(s, 'PUT', `/projects/${p.id}/open`, s.user.token, { edit: 'EDIT-A' })).job.state, 'finished')
  t.match((await s.request('GET', `/projects/${p.id}`, { token: reader.token })).body.project, { mounted_by: colleague.id, locked_by: s.user.id }, 'open for write by the user')
  t.equal((await runJob(s, 'PUT', `/projects/${others[0].id}/mount`, s.user.token, { edit: 'EDIT-B' })).job.state, 'finished')

  // a list decorates its page with one prepared query; the jobs' events are handed out first (their
  // consumers query users: notifications' audience) so that only the page's own queries are heard
  const outbox = s.runtime.container.resolve<Outbox>(coreServices.outbox.id)
  await waitFor('the events handed out', async () => (await outbox.pending()) === 0)
  const queries: string[] = []
  const listen = (q: { sql: string }) => queries.push(q.sql)
  s.runtime.db.knex.on('query', listen)
  const listed = await s.request('GET', '/projects', { token: s.user.token })
  s.runtime.db.knex.off('query', listen)
  const byId = Object.fromEntries(listed.body.projects.map((x: any) => [x.id, x]))
  t.match(byId[p.id], { mounted_by: colleague.id, locked_by: s.user.id })
  t.match(byId[others[0].id], { mounted_by: s.user.id, locked_by: null })
  t.match(byId[others[1].id], { mounted_by: null, locked_by: null })
  // the page's holders come from one prepared statement (preparedReadIn, list-reads.test.ts), which
  // knex never sees: no knex query per project, nor one for the page. Background work of the server
  // (job claims, sweepers) may query through knex meanwhile: only the tables the page reads count
  t.equal(queries.filter((q) => q.includes('edit_sessions')).length, 0, 'no knex query on edit_sessions for the page')
  const pageTables = /\b(projects|edit_sessions|archive_states|access_rights|team_memberships|teams|users)\b/
  t.same(queries.filter((q) => pageTables.test(q)), [], 'the whole list without knex')

  // the edit's status: mount paths inside the edit's share for users, absolute for administrators
  const status = (token: string) => s.request('GET', '/edit/status', { token, headers: { 'X-APP-EDIT': 'EDIT-A' } })
  const mine = await status(s.user.token)
  t.match(mine.body.hash.projects_mounted, [{ id: p.id, path: 'Exposed', mount_path: 'Exposed', mounted_by: colleague.id, locked_by: s.user.id }])
  noServerPath(mine, 'GET /edit/status as a user')
  t.match((await status(s.admin.token)).body.hash.projects_mounted, [{ id: p.id, path: path.join(storageRoot, 'Exposed'), mount_path: path.join(s.dataDir, 'mounts', 'EDIT-A', 'Exposed') }])

  // once closed and unmounted, nobody holds it
  t.equal((await runJob(s, 'DELETE', `/projects/${p.id}/forceclose`, s.user.token)).job.state, 'finished')
  t.match((await s.request('GET', `/projects/${p.id}`, { token: s.user.token })).body.project, { mounted_by: null, locked_by: null })
})
