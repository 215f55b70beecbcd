import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, grant, readerAndStranger, teamWith } from '../../../core/testing/index.js'
import { exists, listTree, makeTemplate, row, writeTree } from './fixtures.js'

onEachDatabase(t, 'a frozen project refuses every write with 423 and keeps answering reads', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Extra', files: { 'Extra/': null } })
  const p = await createProject(s, s.user, { name: 'Locked', description: 'd', is_library_project: true })
  await writeTree(p.path, { 'Media/clip.mov': 'clip', 'a.txt': 'a' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const colleague = await s.createUser('colleague')
  await grant(s, p.id, await teamWith(s, 'writers', colleague), { read: true, write: true })
  const flag = await s.request('POST', '/status_flags', { token: s.admin.token, json: { status_flag: { name: 'Approved', color: '#00ff00' } } })

  // freeze: writers only
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/freeze`), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/freeze`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/freeze`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', '/projects/99999/freeze', { token: s.admin.token }), 404)
  const frozen = await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })
  t.equal(frozen.status, 200)
  t.match(frozen.body.project, { frozen: true, frozen_by_id: s.user.id, frozen_at: String })
  const r = await row(s, 'projects', { id: p.id })
  t.equal(Number(r.frozen_by_id), s.user.id)
  t.ok(r.frozen_at)

  const tree = await listTree(p.path)
  const writes: Array<[string, string, Record<string, unknown> | undefined]> = [
    ['PUT', `/projects/${p.id}`, { description: 'changed' }],
    ['DELETE', `/projects/${p.id}`, undefined],
    ['PUT', `/projects/${p.id}/rename`, { name: 'Unlocked' }],
    ['DELETE', `/projects/${p.id}/delete_description`, undefined],
    ['PUT', `/projects/${p.id}/flag_as_project`, undefined],
    ['POST', '/projects/encoding_priority', { project_ids: [p.id], encoding_priority: 9 }],
    ['PUT', `/projects/${p.id}/addtemplate`, { template_id: tpl.id }],
    ['PUT', `/projects/${p.id}/create_folder`, { path: 'New' }],
    ['PUT', `/projects/${p.id}/rename_folder`, { path: 'Media', name: 'Footage' }],
    ['PUT', `/projects/${p.id}/move_contents`, { source: 'a.txt', destination: 'Media' }],
    ['PUT', `/projects/${p.id}/status_flags/${flag.body.status_flag.id}`, undefined],
  ]
  for (const [method, route, json] of writes) {
    for (const who of [s.user, colleague, s.admin]) {
      const reply = await s.request(method, route, { token: who.token, json })
      assertProblem(t, reply, 423)
      t.match(reply.body, { code: 'locked', frozen_by: { id: s.user.id, username: 'editor' }, frozen_at: String }, `${method} ${route} by ${who.username}: the body names who froze it`)
      t.match(reply.body.detail, /frozen by editor/)
    }
  }
  // freezing a frozen project is a wrong state (409, naming who froze it), not a write to a frozen project (423)
  for (const who of [s.user, colleague, s.admin]) {
    const again = await s.request('PUT', `/projects/${p.id}/freeze`, { token: who.token })
    assertProblem(t, again, 409)
    t.match(again.body, { code: 'conflict', frozen_by: { id: s.user.id, username: 'editor' }, frozen_at: String }, `freeze again by ${who.username}`)
    t.match(again.body.detail, /frozen already, by editor/)
  }
  // read-only users still learn 403 first, strangers 404: the freeze reveals nothing
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: reader.token, json: { description: 'x' } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}`, { token: stranger.token, json: { description: 'x' } }), 404)

  const after = await row(s, 'projects', { id: p.id })
  t.equal(after.description, 'd')
  t.equal(after.name, 'Locked')
  t.ok(Boolean(after.is_library_project))
  t.notOk(Boolean(after.deleted))
  t.equal(Number(after.encoding_priority), 0)
  t.same(await listTree(p.path), tree, 'the tree is unchanged')
  t.notOk(await row(s, 'project_status_flags', { project_id: p.id }), 'no flag set')

  // reads keep working
  for (const route of [`/projects/${p.id}`, '/projects', `/projects/${p.id}/teams`, `/projects/${p.id}/effective_access_rights`, `/projects/${p.id}/status_flags`, '/total_project_size', '/projects_report']) {
    t.equal((await s.request('GET', route, { token: s.user.token })).status, 200, `GET ${route}`)
  }
  t.equal((await s.request('GET', `/projects/${p.id}`, { token: reader.token })).body.project.frozen, true)
  t.equal((await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: s.user.token })).status, 202, 'a frozen project may be measured (its tree does not change)')

  // unfreeze: who froze it, or an administrator
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/unfreeze`), 401)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: reader.token }), 403)
  const notYou = await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: colleague.token })
  assertProblem(t, notYou, 403)
  t.match(notYou.body.detail, /editor/)
  const thawed = await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })
  t.equal(thawed.status, 200)
  t.match(thawed.body.project, { frozen: false, frozen_by_id: null, frozen_at: null })
  t.equal((await row(s, 'projects', { id: p.id })).frozen_at, null)
  const notFrozen = await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })
  assertProblem(t, notFrozen, 409)
  t.match(notFrozen.body.detail, /is not frozen/)

  // writes work again; an administrator can thaw someone else's freeze
  t.equal((await s.request('PUT', `/projects/${p.id}/create_folder`, { token: colleague.token, json: { path: 'New' } })).status, 200)
  t.ok(await exists(path.join(p.path, 'New')))
  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: colleague.token })).status, 200)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token }), 403)
  t.equal((await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.admin.token })).status, 200)
  t.equal((await s.request('PUT', `/projects/${p.id}`, { token: s.user.token, json: { description: 'changed' } })).status, 200)
})

onEachDatabase(t, 'concurrent freezes: one 200, the others 409; concurrent unfreezes likewise', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Raced' })
  const colleague = await s.createUser('colleague')
  await grant(s, p.id, await teamWith(s, 'writers', colleague), { read: true, write: true })
  const who = [s.user, colleague, s.admin, s.user, colleague, s.admin]
  const freezes = await Promise.all(who.map((u) => s.request('PUT', `/projects/${p.id}/freeze`, { token: u.token })))
  t.same(freezes.map((r) => r.status).sort(), [200, 409, 409, 409, 409, 409])
  const winner = freezes.find((r) => r.status === 200)!.body.project.frozen_by_id
  t.equal(Number((await row(s, 'projects', { id: p.id })).frozen_by_id), winner, 'the winner is recorded')
  for (const r of freezes.filter((x) => x.status === 409)) t.equal(r.body.frozen_by.id, winner, 'every 409 names the winner')
  const thaws = await Promise.all([s.admin, s.admin, s.admin].map((u) => s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: u.token })))
  t.same(thaws.map((r) => r.status).sort(), [200, 409, 409])
  t.equal((await row(s, 'projects', { id: p.id })).frozen_at, null)
})
