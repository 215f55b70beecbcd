import t from 'tap'
import { assertProblem, onEachDatabase, createProject, readerAndStranger, teamWith, type TestServer } from '../../../core/testing/index.js'

const rightsOf = async (s: TestServer, projectId: number) =>
  (await s.runtime.db.knex('access_rights').where({ object_type: 'project', object_id: projectId }).orderBy('team_id').select('team_id', 'read', 'write')).map((r: any) => [
    Number(r.team_id),
    Boolean(r.read),
    Boolean(r.write),
  ])

onEachDatabase(t, 'team rights on a project: list, effective, set, remove, replace, bulk per team', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Shared' })
  const q = await createProject(s, s.user, { name: 'Other' })
  const { reader, stranger, readersTeam } = await readerAndStranger(s, p.id)
  const ownTeam = Number((await s.runtime.db.knex('teams').where({ owner_id: s.user.id }).first()).id)
  const guest = await s.createUser('guest')
  const guests = await teamWith(s, 'guests', guest)

  // GET /projects/:id/teams
  const teams = await s.request('GET', `/projects/${p.id}/teams`, { token: reader.token })
  t.equal(teams.status, 200)
  t.match(teams.body.teams, [
    { team_id: ownTeam, name: 'editor', user_owned: true, read: true, write: true },
    { team_id: readersTeam, name: 'readers', user_owned: false, read: true, write: false },
  ])
  assertProblem(t, await s.request('GET', `/projects/${p.id}/teams`), 401)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/teams`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/projects/99999/teams', { token: s.admin.token }), 404)

  // GET /projects/:id/effective_access_rights
  const effective = await s.request('GET', `/projects/${p.id}/effective_access_rights`, { token: s.user.token })
  t.equal(effective.status, 200)
  t.same(effective.body.hash, {
    [s.user.id]: { team_id: ownTeam, read: true, write: true },
    [reader.id]: { team_id: readersTeam, read: true, write: false },
  })
  assertProblem(t, await s.request('GET', `/projects/${p.id}/effective_access_rights`), 401)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/effective_access_rights`, { token: stranger.token }), 404)

  // PUT /projects/:id/teams: writers grant, readers may not
  assertProblem(t, await s.request('GET', `/projects/${p.id}`, { token: guest.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { json: { team_id: guests, read: true } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { token: reader.token, json: { team_id: guests, read: true } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { token: stranger.token, json: { team_id: guests, read: true } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, json: { team_id: 99999, read: true } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, json: { read: true } }), 422, ['team_id'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, json: { team_id: guests, read: 'sometimes' } }), 422, ['read'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, json: { team_id: guests, admin: true } }), 422, ['admin'])
  t.same(await rightsOf(s, p.id), [[ownTeam, true, true], [readersTeam, true, false]], 'refused requests change nothing')

  const granted = await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, form: { team_id: String(guests), write: 'true' } })
  t.equal(granted.status, 200)
  t.ok(granted.body.teams.some((x: any) => x.team_id === guests && x.read && x.write), 'write implies read')
  t.same(await rightsOf(s, p.id), [[ownTeam, true, true], [readersTeam, true, false], [guests, true, true]])
  t.equal((await s.request('PUT', `/projects/${p.id}/create_folder`, { token: guest.token, json: { path: 'by-guest' } })).status, 200, 'the new right takes effect at once')
  await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, json: { team_id: guests, read: true, write: false } })
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/create_folder`, { token: guest.token, json: { path: 'again' } }), 403)
  await s.request('PUT', `/projects/${p.id}/teams`, { token: s.user.token, json: { team_id: guests, read: false, write: false } })
  t.same(await rightsOf(s, p.id), [[ownTeam, true, true], [readersTeam, true, false]], 'no read and no write removes the right')
  assertProblem(t, await s.request('GET', `/projects/${p.id}`, { token: guest.token }), 404)

  // DELETE /projects/:id/teams/:team_id
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/teams/${readersTeam}`), 401)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/teams/${readersTeam}`, { token: reader.token }), 403)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/teams/${readersTeam}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/teams/${guests}`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/teams/99999`, { token: s.user.token }), 404)
  const removed = await s.request('DELETE', `/projects/${p.id}/teams/${readersTeam}`, { token: s.user.token })
  t.equal(removed.status, 200)
  t.same(removed.body.teams.map((x: any) => x.team_id), [ownTeam])
  assertProblem(t, await s.request('GET', `/projects/${p.id}`, { token: reader.token }), 404)

  // PUT /projects/:id/update_teams replaces everything
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/update_teams`, { json: { teams: [] } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/update_teams`, { token: stranger.token, json: { teams: [] } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/update_teams`, { token: s.user.token, json: { teams: [{ team_id: 99999, read: true }] } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/update_teams`, { token: s.user.token, json: { teams: [{ read: true }] } }), 422, ['teams[0][team_id]'])
  t.same(await rightsOf(s, p.id), [[ownTeam, true, true]])
  const replaced = await s.request('PUT', `/projects/${p.id}/update_teams`, {
    token: s.user.token,
    json: { teams: [{ team_id: ownTeam, write: true }, { team_id: readersTeam, read: true }, { team_id: guests, read: true }] },
  })
  t.equal(replaced.status, 200)
  t.same(await rightsOf(s, p.id), [[ownTeam, true, true], [readersTeam, true, false], [guests, true, false]])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/update_teams`, { token: reader.token, json: { teams: [] } }), 403)

  // PUT /projects/update_teams/:team_id: one team's rights on many projects, administrators only
  assertProblem(t, await s.request('PUT', `/projects/update_teams/${guests}`, { json: { access_rights: [] } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/update_teams/${guests}`, { token: s.user.token, json: { access_rights: [{ id: q.id, read: true }] } }), 403)
  assertProblem(t, await s.request('PUT', '/projects/update_teams/99999', { token: s.admin.token, json: { access_rights: [] } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/update_teams/${guests}`, { token: s.admin.token, json: { access_rights: [{ id: 99999, read: true }] } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/update_teams/${guests}`, { token: s.admin.token, json: { access_rights: [{ id: 'x' }] } }), 422, ['access_rights[0][id]'])
  const bulk = await s.request('PUT', `/projects/update_teams/${guests}`, { token: s.admin.token, json: { access_rights: [{ id: p.id, write: true }, { id: q.id, read: true }] } })
  t.equal(bulk.status, 200)
  t.match(bulk.body.access_rights, [
    { team_id: guests, object_type: 'project', object_id: p.id, read: true, write: true },
    { team_id: guests, object_type: 'project', object_id: q.id, read: true, write: false },
  ])
  t.same(
    (await s.request('GET', '/projects', { token: guest.token })).body.projects.map((x: any) => x.name),
    ['Other', 'Shared'],
  )

  // a deleted project has no team routes
  await s.request('DELETE', `/projects/${q.id}`, { token: s.user.token })
  assertProblem(t, await s.request('GET', `/projects/${q.id}/teams`, { token: s.admin.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${q.id}/teams`, { token: s.admin.token, json: { team_id: guests, read: true } }), 404)
})
