import t from 'tap'
import { onEachDatabase, createProject } from '../../../core/testing/index.js'
import { preparedReadIn } from '../../../core/index.js'

/** the read paths of project lists: decorators from prepared in-lists, the total from the page when it tells it */

onEachDatabase(t, 'project pages: mounted_by and locked_by of every size of page, X-Total-Count with and without its count query', async (t, s) => {
  const knex = s.runtime.db.knex
  const ids: number[] = []
  for (const name of ['P1', 'P2', 'P3', 'P4', 'P5']) ids.push((await createProject(s, s.admin, name)).id)
  // edit sessions written as the edits plugin writes them: P2 mounted by the user, P5 opened by the admin; a releasing one does not count
  const [edit] = await knex('edits').insert({ name: 'EDIT-L', password_sealed: 'x', created_at: new Date(), updated_at: new Date() }).returning('id')
  const editId = Number(typeof edit === 'object' ? edit.id : edit)
  const session = (projectId: number, kind: string, state: string, mountedBy: number | null, openedBy: number | null) => ({ edit_id: editId, project_id: projectId, kind, link: `/m/${projectId}/${kind}`, state, mounted_by_id: mountedBy, mounted_at: new Date(), opened_by_id: openedBy, opened_at: openedBy ? new Date() : null, created_at: new Date(), updated_at: new Date() })
  await knex('edit_sessions').insert([session(ids[1], 'mount', 'ready', s.user.id, null), session(ids[4], 'open', 'ready', null, s.admin.id), session(ids[2], 'mount', 'releasing', s.user.id, null)])

  const holders = (reply: any) => reply.body.projects.map((p: any) => [p.name, p.mounted_by, p.locked_by, p.archived, p.archive_strategy_state])
  const expected = [['P1', null, null, false, null], ['P2', s.user.id, null, false, null], ['P3', null, null, false, null], ['P4', null, null, false, null], ['P5', null, s.admin.id, false, null]]
  // pages of 1, 2, 3 (padded to 4) and 5 (padded to 8) projects: each statement size answers the same
  for (const per of [1, 2, 3, 5]) {
    for (let page = 1; (page - 1) * per < 5; page++) {
      const reply = await s.request('GET', '/projects', { token: s.admin.token, query: { per_page: String(per), page: String(page) } })
      t.equal(reply.status, 200)
      t.same(holders(reply), expected.slice((page - 1) * per, page * per), `page ${page} of ${per}`)
      t.equal(reply.headers.get('x-total-count'), '5', `page ${page} of ${per}: the total, counted or told by the page`)
    }
  }
  t.same(holders(await s.request('GET', `/projects/${ids[4]}`, { token: s.admin.token }).then((r) => ({ body: { projects: [r.body.project] } }))), [expected[4]], 'one project')
  // past the end the page tells nothing: the count runs
  const past = await s.request('GET', '/projects', { token: s.admin.token, query: { per_page: '5', page: '3' } })
  t.same(past.body.projects, [])
  t.equal(past.headers.get('x-total-count'), '5')
  const none = await s.request('GET', '/projects', { token: s.admin.token, query: { name: 'nothing like it' } })
  t.equal(none.headers.get('x-total-count'), '0')

  // longer lists than one statement binds run in several, and repeated values match once
  const read = preparedReadIn<{ id: number }>(knex, (list) => `select id from projects where id in (${list}) order by id`)
  const many = [...Array.from({ length: 1100 }, (_, i) => 100_000 + i), ...ids, ids[0], ids[0]]
  t.same((await read(many)).map((r) => Number(r.id)), ids, '1,107 values: three statements, each project once')
  t.same(await read([]), [], 'no values, no query')
})
