import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer } from '../../../core/testing/index.js'
import type { AccessRightService } from '../../../plugins/identity/access-rights.js'

type Tap = typeof t

const TEAM_FIELDS = ['id', 'name', 'quota', 'quota_mail_sent', 'space_used', 'users', 'created_at', 'updated_at']
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

function assertTeam(t: Tap, json: any, expected: Record<string, unknown> = {}) {
  for (const field of TEAM_FIELDS) t.ok(field in json, `team has ${field}`)
  t.match(json, { id: Number, name: String, quota_mail_sent: Boolean, space_used: Number, users: Array, created_at: ISO, updated_at: ISO, ...expected })
  t.ok(json.quota === null || typeof json.quota === 'number', 'quota is a number or null')
}

const memberIds = (team: { users: Array<{ id: number }> }) => team.users.map((u) => u.id).sort((a, b) => a - b)
const teamIds = (user: { teams: Array<{ id: number }> }) => user.teams.map((x) => x.id).sort((a, b) => a - b)
const ownTeamId = async (s: TestServer, userId: number) => (await s.request('GET', `/users/${userId}`, { token: s.admin.token })).body.user.own_team_id as number

onEachDatabase(t, 'teams: create, list, show, update, delete', async (t, s) => {
  const admin = s.admin.token
  const created = await s.request('POST', '/teams', { token: admin, json: { team: { name: 'Colorists', quota: 5_000_000_000 } } })
  t.equal(created.status, 201)
  t.notOk('team' in created.body, 'POST /teams answers under the plural key')
  assertTeam(t, created.body.teams, { name: 'Colorists', quota: 5_000_000_000, space_used: 0, quota_mail_sent: false, users: [], user_owned: false })
  const colorists = created.body.teams

  const viaForm = await s.request('POST', '/teams', { token: admin, form: { 'team[name]': 'Editors' } })
  t.equal(viaForm.status, 201)
  assertTeam(t, viaForm.body.teams, { name: 'Editors', quota: null })

  const list = await s.request('GET', '/teams', { token: s.user.token })
  t.equal(list.status, 200)
  for (const team of list.body.teams) assertTeam(t, team)
  t.same(
    list.body.teams.map((x: { name: string }) => x.name),
    ['Colorists', 'Editors', 'admin', 'editor'],
    'shared teams and every user’s own team, by name',
  )

  const shown = await s.request('GET', `/teams/${colorists.id}.json`, { token: s.user.token })
  t.equal(shown.status, 200)
  assertTeam(t, shown.body.team, { id: colorists.id, name: 'Colorists' })

  // quota and space used: bigints come back as numbers; a new quota re-arms the quota mail
  await s.runtime.db.knex('teams').where({ id: colorists.id }).update({ space_used: 4_900_000_000, quota_mail_sent: true })
  const full = await s.request('GET', `/teams/${colorists.id}`, { token: admin })
  t.match(full.body.team, { space_used: 4_900_000_000, quota_mail_sent: true })
  const raised = await s.request('PUT', `/teams/${colorists.id}`, { token: admin, json: { team: { name: 'Grading', quota: 8_000_000_000 } } })
  t.equal(raised.status, 200)
  assertTeam(t, raised.body.team, { id: colorists.id, name: 'Grading', quota: 8_000_000_000, space_used: 4_900_000_000, quota_mail_sent: false })
  const unlimited = await s.request('PUT', `/teams/${colorists.id}`, { token: admin, json: { team: { quota: null } } })
  t.match(unlimited.body.team, { name: 'Grading', quota: null })
  t.equal((await s.runtime.db.knex('teams').where({ id: colorists.id }).first()).quota, null, 'quota stored as null')

  // errors
  assertProblem(t, await s.request('GET', '/teams'), 401)
  assertProblem(t, await s.request('POST', '/teams', { json: { team: { name: 'X' } } }), 401)
  assertProblem(t, await s.request('POST', '/teams', { token: s.user.token, json: { team: { name: 'Mine' } } }), 403)
  assertProblem(t, await s.request('PUT', `/teams/${colorists.id}`, { token: s.user.token, json: { team: { name: 'Mine' } } }), 403)
  assertProblem(t, await s.request('DELETE', `/teams/${colorists.id}`, { token: s.user.token }), 403)
  assertProblem(t, await s.request('GET', '/teams/99999', { token: admin }), 404)
  assertProblem(t, await s.request('PUT', '/teams/99999', { token: admin, json: { team: { name: 'Y' } } }), 404)
  assertProblem(t, await s.request('DELETE', '/teams/99999', { token: admin }), 404)
  assertProblem(t, await s.request('POST', '/teams', { token: admin, json: { team: { name: 'Editors' } } }), 409)
  assertProblem(t, await s.request('POST', '/teams', { token: admin, json: { team: { name: 'editor' } } }), 409, undefined)
  assertProblem(t, await s.request('PUT', `/teams/${colorists.id}`, { token: admin, json: { team: { name: 'Editors' } } }), 409)
  assertProblem(t, await s.request('POST', '/teams', { token: admin, json: { team: {} } }), 422, ['team[name]'])
  assertProblem(t, await s.request('POST', '/teams', { token: admin, json: { team: { name: 'Q', quota: -1 } } }), 422, ['team[quota]'])
  assertProblem(t, await s.request('POST', '/teams', { token: admin, json: { team: { name: 'Q', owner_id: s.user.id } } }), 422, ['team[owner_id]'])
  assertProblem(t, await s.request('PUT', `/teams/${colorists.id}`, { token: admin, json: { team: { space_used: 0 } } }), 422, ['team[space_used]'])
  t.equal((await s.runtime.db.knex('teams').where({ name: 'Q' })).length, 0, 'refused teams are not created')

  // a user whose name is taken by a team still gets an own team
  await s.request('POST', '/teams', { token: admin, json: { team: { name: 'zed' } } })
  const zed = await s.request('POST', '/users', { token: admin, json: { user: { username: 'zed', password: 'a-long-password' } } })
  t.equal(zed.status, 201)
  const zedTeam = await s.request('GET', `/teams/${zed.body.user.own_team_id}`, { token: admin })
  t.match(zedTeam.body.team, { name: 'zed (2)', user_owned: true, owner_id: zed.body.user.id })

  // delete: a shared team goes with its memberships and rights; an own team stays
  await s.request('POST', `/teams/${colorists.id}/users/${s.user.id}`, { token: admin })
  const rights = s.runtime.container.resolve<AccessRightService>('accessRights')
  await rights.grant(s.em(), 'project', 7, colorists.id, { read: true })
  const deleted = await s.request('DELETE', `/teams/${colorists.id}`, { token: admin })
  t.equal(deleted.status, 200)
  assertTeam(t, deleted.body.team, { id: colorists.id, name: 'Grading' })
  assertProblem(t, await s.request('GET', `/teams/${colorists.id}`, { token: admin }), 404)
  const knex = s.runtime.db.knex
  t.equal((await knex('team_memberships').where({ team_id: colorists.id })).length, 0, 'memberships deleted')
  t.equal((await knex('access_rights').where({ team_id: colorists.id })).length, 0, 'rights deleted')
  const me = await s.request('GET', `/users/${s.user.id}`, { token: s.user.token })
  t.notOk(
    me.body.user.teams.some((x: { id: number }) => x.id === colorists.id),
    'the user is no longer in the deleted team',
  )

  const own = await ownTeamId(s, s.user.id)
  assertProblem(t, await s.request('DELETE', `/teams/${own}`, { token: admin }), 409)
  t.equal((await knex('teams').where({ id: own })).length, 1, 'the own team is still there')
})

onEachDatabase(t, 'teams: user_owned', async (t, s) => {
  await s.request('POST', '/teams', { token: s.admin.token, json: { team: { name: 'Shared' } } })
  const mine = await s.request('GET', '/teams/user_owned', { token: s.user.token })
  t.equal(mine.status, 200)
  t.equal(mine.body.teams.length, 1, 'a user sees their own team')
  assertTeam(t, mine.body.teams[0], { name: 'editor', user_owned: true, owner_id: s.user.id, users: [{ id: s.user.id, username: 'editor' }] })
  const all = await s.request('GET', '/teams/user_owned', { token: s.admin.token })
  t.same(
    all.body.teams.map((x: { owner_id: number }) => x.owner_id).sort(),
    [s.admin.id, s.user.id].sort(),
    'an administrator sees every user’s own team and no shared team',
  )
  assertProblem(t, await s.request('GET', '/teams/user_owned'), 401)
})

onEachDatabase(t, 'teams: membership from both sides, assign to and remove from all teams', async (t, s) => {
  const admin = s.admin.token
  const make = async (name: string) => (await s.request('POST', '/teams', { token: admin, json: { team: { name } } })).body.teams.id as number
  const a = await make('A')
  const b = await make('B')
  const c = await make('C')
  const u = s.user.id
  const own = await ownTeamId(s, u)

  // team side
  const added = await s.request('POST', `/teams/${a}/users/${u}`, { token: admin })
  t.equal(added.status, 200)
  assertTeam(t, added.body.team, { id: a })
  t.same(memberIds(added.body.team), [u])
  t.equal((await s.request('POST', `/teams/${a}/users/${u}`, { token: admin })).status, 200, 'adding twice is harmless')
  t.equal((await s.runtime.db.knex('team_memberships').where({ team_id: a, user_id: u })).length, 1, 'one membership row')

  // user side
  const joined = await s.request('POST', `/users/${u}/teams/${b}`, { token: admin })
  t.equal(joined.status, 200)
  t.same(teamIds(joined.body.user), [a, b, own].sort((x, y) => x - y), 'the user JSON lists the teams')
  t.equal(joined.body.user.own_team_id, own)

  const left = await s.request('DELETE', `/users/${u}/teams/${a}`, { token: admin })
  t.equal(left.status, 200)
  t.same(teamIds(left.body.user), [b, own].sort((x, y) => x - y))
  const removed = await s.request('DELETE', `/teams/${b}/users/${u}`, { token: admin })
  t.equal(removed.status, 200)
  t.same(removed.body.team.users, [])
  t.same(teamIds((await s.request('GET', `/users/${u}`, { token: s.user.token })).body.user), [own])

  // nobody leaves their own team
  assertProblem(t, await s.request('DELETE', `/teams/${own}/users/${u}`, { token: admin }), 409)
  assertProblem(t, await s.request('DELETE', `/users/${u}/teams/${own}`, { token: admin }), 409)
  // someone else may be added to a user's own team (to share with one person) and removed again
  t.equal((await s.request('POST', `/teams/${own}/users/${s.admin.id}`, { token: admin })).status, 200)
  t.equal((await s.request('DELETE', `/teams/${own}/users/${s.admin.id}`, { token: admin })).status, 200)

  // errors
  for (const [method, path] of [
    ['POST', `/teams/${a}/users/${u}`],
    ['DELETE', `/teams/${a}/users/${u}`],
    ['POST', `/users/${u}/teams/${a}`],
    ['DELETE', `/users/${u}/teams/${a}`],
    ['POST', `/users/${u}/assign_to_all_teams`],
    ['DELETE', `/users/${u}/remove_from_all_teams`],
  ]) {
    assertProblem(t, await s.request(method, path), 401)
    assertProblem(t, await s.request(method, path, { token: s.user.token }), 403)
  }
  t.same(teamIds((await s.request('GET', `/users/${u}`, { token: s.user.token })).body.user), [own], 'a user cannot join teams on their own')
  assertProblem(t, await s.request('POST', `/teams/99999/users/${u}`, { token: admin }), 404)
  assertProblem(t, await s.request('POST', `/teams/${a}/users/99999`, { token: admin }), 404)
  assertProblem(t, await s.request('POST', `/users/99999/teams/${a}`, { token: admin }), 404)
  assertProblem(t, await s.request('DELETE', `/users/${u}/teams/99999`, { token: admin }), 404)
  assertProblem(t, await s.request('POST', '/users/99999/assign_to_all_teams', { token: admin }), 404)
  assertProblem(t, await s.request('DELETE', '/users/99999/remove_from_all_teams', { token: admin }), 404)
  assertProblem(t, await s.request('POST', `/teams/x/users/${u}`, { token: admin }), 422, ['team_id'])

  // all teams: every shared team, never someone else's own team
  await s.request('POST', `/teams/${c}/users/${u}`, { token: admin })
  const everywhere = await s.request('POST', `/users/${u}/assign_to_all_teams`, { token: admin })
  t.equal(everywhere.status, 200)
  t.same(teamIds(everywhere.body.user), [a, b, c, own].sort((x, y) => x - y), 'in every shared team and the own one')
  const adminsOwn = await ownTeamId(s, s.admin.id)
  t.equal((await s.runtime.db.knex('team_memberships').where({ team_id: adminsOwn, user_id: u })).length, 0, 'not in another user’s own team')

  const nowhere = await s.request('DELETE', `/users/${u}/remove_from_all_teams`, { token: admin })
  t.equal(nowhere.status, 200)
  t.same(teamIds(nowhere.body.user), [own], 'only the own team is kept')
  const rows = await s.runtime.db.knex('team_memberships').where({ user_id: u })
  t.same(
    rows.map((r: { team_id: number }) => Number(r.team_id)),
    [own],
  )
})

onEachDatabase(t, 'teams: access rights of a team', async (t, s) => {
  const admin = s.admin.token
  const team = (await s.request('POST', '/teams', { token: admin, json: { team: { name: 'Reviewers' } } })).body.teams.id as number
  await s.request('POST', `/teams/${team}/users/${s.user.id}`, { token: admin })
  const rights = s.runtime.container.resolve<AccessRightService>('accessRights')
  await rights.grant(s.em(), 'project', 12, team, { read: true })
  await rights.grant(s.em(), 'gallery', 3, team, { write: true })
  await rights.grant(s.em(), 'project', 5, team, { read: true, write: true })
  await rights.grant(s.em(), 'project', 9, await ownTeamId(s, s.admin.id), { read: true })

  const seen = await s.request('GET', `/teams/${team}/access_rights`, { token: s.user.token })
  t.equal(seen.status, 200, 'a member sees the team’s rights')
  t.match(seen.body.access_rights, [
    { team_id: team, object_type: 'gallery', object_id: 3, read: true, write: true, id: Number, created_at: ISO },
    { team_id: team, object_type: 'project', object_id: 5, read: true, write: true },
    { team_id: team, object_type: 'project', object_id: 12, read: true, write: false },
  ])
  t.equal(seen.body.access_rights.length, 3, 'only this team’s rights')
  t.same((await s.request('GET', `/teams/${team}/access_rights`, { token: admin })).body, seen.body, 'administrators see them too')

  const outsider = await s.createUser('outsider')
  assertProblem(t, await s.request('GET', `/teams/${team}/access_rights`, { token: outsider.token }), 403)
  assertProblem(t, await s.request('GET', `/teams/${team}/access_rights`), 401)
  assertProblem(t, await s.request('GET', '/teams/99999/access_rights', { token: admin }), 404)
  const empty = await s.request('GET', `/teams/${await ownTeamId(s, outsider.id)}/access_rights`, { token: outsider.token })
  t.same(empty.body, { access_rights: [] }, 'a team without rights')

  // leaving the team takes the view away at once
  await s.request('DELETE', `/teams/${team}/users/${s.user.id}`, { token: admin })
  assertProblem(t, await s.request('GET', `/teams/${team}/access_rights`, { token: s.user.token }), 403)
})

onEachDatabase(t, 'teams: users the core creates get exactly one own team, even when first seen by parallel requests', async (t, s) => {
  // s.createUser goes through the core's createUser, as the CLI does: no own team yet
  const late = await s.createUser('late-comer')
  t.equal((await s.runtime.db.knex('teams').where({ owner_id: late.id })).length, 0, 'no own team before the plugin sees the user')
  const replies = await Promise.all([
    ...Array.from({ length: 4 }, () => s.request('GET', '/users', { token: s.admin.token })),
    s.request('GET', `/users/${late.id}`, { token: late.token }),
    s.request('GET', '/teams', { token: late.token }),
    s.request('GET', '/teams/user_owned', { token: late.token }),
    s.request('GET', '/session', { token: late.token }),
  ])
  t.same(
    replies.map((r) => r.status),
    replies.map(() => 200),
    'every parallel request succeeds',
  )
  const own = await s.runtime.db.knex('teams').where({ owner_id: late.id })
  t.equal(own.length, 1, 'one own team')
  t.equal(own[0].name, 'late-comer')
  t.same(
    (await s.runtime.db.knex('team_memberships').where({ user_id: late.id })).map((m: { team_id: number }) => Number(m.team_id)),
    [Number(own[0].id)],
    'one membership, in it',
  )
  t.equal(replies[4].body.user.own_team_id, Number(own[0].id))
  t.same(
    replies[6].body.teams.map((x: { id: number }) => x.id),
    [Number(own[0].id)],
    'user_owned shows it',
  )
})
