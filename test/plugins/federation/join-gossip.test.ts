import t from 'tap'
import { assertProblem, onEachDatabase, startTestServer } from '../../../core/testing/index.js'
import { converge, fedConfig as config, fedOf } from './helpers.js'

const names = (list: { name: string }[]) => list.map((x) => x.name).sort()

onEachDatabase(
  t,
  'federation: invite, join, sites, gossip of users, teams, roles and flags',
  async (t, a) => {
    const b = await startTestServer({ db: a.db, config })
    t.teardown(() => b.close())

    // the invite: admin only; name required
    assertProblem(t, await a.request('POST', '/federation/initiate_join', { json: { name: 'B' } }), 401)
    assertProblem(t, await a.request('POST', '/federation/initiate_join', { token: a.user.token, json: { name: 'B' } }), 403)
    assertProblem(t, await a.request('POST', '/federation/initiate_join', { token: a.admin.token, json: {} }), 422, ['name'])
    await a.request('POST', '/status_flags', { token: a.admin.token, json: { status_flag: { name: 'Approved', color: '#00ff00' } } })
    const made = await a.request('POST', '/federation/initiate_join', { token: a.admin.token, json: { name: 'Paris' } })
    t.equal(made.status, 201)
    const invite = made.body.invite.invite as string
    t.match(invite, /^http:\/\/127\.0\.0\.1:\d+\|[A-Z2-7-]+\|[A-Za-z0-9_-]+\|[A-Za-z0-9_-]{43}$/)

    // a forged fingerprint is refused before anything is stored
    const parts = invite.split('|')
    const forged = [parts[0], 'AAAA-BBBB-CCCC', parts[2], parts[3]].join('|')
    assertProblem(t, await b.request('POST', '/federation/finalize_join', { token: b.admin.token, json: { invite: 'nonsense' } }), 422, ['invite'])
    assertProblem(t, await b.request('POST', '/federation/finalize_join', { token: b.user.token, json: { invite } }), 403)
    const wrongPin = await b.request('POST', '/federation/finalize_join', { token: b.admin.token, json: { invite: forged } })
    assertProblem(t, wrongPin, 422, ['invite'])
    t.equal((await b.request('GET', '/sites', { token: b.admin.token })).body.sites.length, 1, 'B is still alone')

    // B had its own data before joining
    await b.request('POST', '/teams', { token: b.admin.token, json: { team: { name: 'Colourists' } } })

    // the forged attempt used the token (single use): a second invite
    const invite2 = (await a.request('POST', '/federation/initiate_join', { token: a.admin.token, json: { name: 'Paris' } })).body.invite.invite
    const joined = await b.request('POST', '/federation/finalize_join', { token: b.admin.token, json: { invite: invite2 } })
    t.equal(joined.status, 200, joined.text)
    t.ok(joined.body.federation.records > 0)
    // the same invite again: used
    const again = await b.request('POST', '/federation/finalize_join', { token: b.admin.token, json: { invite: invite2 } })
    assertProblem(t, again, 409)

    const sitesA = (await a.request('GET', '/sites', { token: a.admin.token })).body.sites
    t.same(sitesA.map((s: any) => s.status).sort(), ['active', 'active'])
    t.ok(sitesA[1].link, 'admins see the link')
    const sitesPlain = (await a.request('GET', '/sites', { token: a.user.token })).body.sites
    t.notOk(sitesPlain[1].link, 'others do not')
    assertProblem(t, await a.request('GET', '/sites'), 401)

    await converge([a, b])
    // B got A's flag; A got B's team; users of both sites are at both (the clash of names qualified)
    t.same(names((await b.request('GET', '/status_flags', { token: b.admin.token })).body.array), ['Approved'])
    t.ok(names((await a.request('GET', '/teams', { token: a.admin.token })).body.teams).includes('Colourists'))
    const usersB = (await b.request('GET', '/users', { token: b.admin.token })).body.users.map((u: any) => u.username)
    t.ok(usersB.some((u: string) => /^editor@[0-9a-f]{6}$/.test(u)), `A's editor at B: ${usersB}`)

    // concurrent edits at both sites, then convergence
    const flagA = (await a.request('GET', '/status_flags', { token: a.admin.token })).body.array[0]
    const flagB = (await b.request('GET', '/status_flags', { token: b.admin.token })).body.array[0]
    await a.request('PUT', `/status_flags/${flagA.id}`, { token: a.admin.token, json: { status_flag: { color: '#ff0000' } } })
    await b.request('PUT', `/status_flags/${flagB.id}`, { token: b.admin.token, json: { status_flag: { name: 'Signed off' } } })
    await a.request('POST', '/status_flags', { token: a.admin.token, json: { status_flag: { name: 'On hold', color: '#0000ff' } } })
    const role = await b.request('POST', '/roles', { token: b.admin.token, json: { role: { name: 'Reviewers', role_matrix: { 'projects.create': true } } } })
    t.equal(role.status, 201, role.text)
    await converge([a, b])
    const flagsA = (await a.request('GET', '/status_flags', { token: a.admin.token })).body.array
    const flagsB = (await b.request('GET', '/status_flags', { token: b.admin.token })).body.array
    const view = (l: any[]) => l.map((f) => `${f.name}:${f.color}`).sort()
    t.same(view(flagsA), view(flagsB), 'same flags at both sites')
    t.ok(view(flagsA).includes('Signed off:#ff0000'), `both edits of one flag kept (different fields): ${view(flagsA)}`)
    const rolesA = (await a.request('GET', '/roles', { token: a.admin.token })).body.array
    t.ok(rolesA.some((r: any) => r.name === 'Reviewers' && r.role_matrix['projects.create'] === true))

    // revoke wins: A revokes while B (not having seen it) grants another capability
    const roleA = rolesA.find((r: any) => r.name === 'Reviewers')
    const roleB = (await b.request('GET', '/roles', { token: b.admin.token })).body.array.find((r: any) => r.name === 'Reviewers')
    await a.request('PUT', `/roles/${roleA.id}`, { token: a.admin.token, json: { role: { role_matrix: { 'projects.create': false } } } })
    await b.request('PUT', `/roles/${roleB.id}`, { token: b.admin.token, json: { role: { role_matrix: { 'projects.create': true, 'templates.manage': true } } } })
    await converge([a, b])
    for (const s of [a, b]) {
      const r = (await s.request('GET', '/roles', { token: s.admin.token })).body.array.find((x: any) => x.name === 'Reviewers')
      t.equal(r.role_matrix['projects.create'], false, 'the revoke wins over a concurrent grant')
      t.equal(r.role_matrix['templates.manage'], true)
    }

    // a team deleted at one site is deleted at both
    const teamA = (await a.request('GET', '/teams', { token: a.admin.token })).body.teams.find((x: any) => x.name === 'Colourists')
    t.equal((await a.request('DELETE', `/teams/${teamA.id}`, { token: a.admin.token })).status, 200)
    await converge([a, b])
    t.notOk(names((await b.request('GET', '/teams', { token: b.admin.token })).body.teams).includes('Colourists'))

    // owns_uuid: records of A are A's
    const fa = fedOf(a)
    const flagRow = (await fa.store.ofType(fa.knex, 'status_flag'))[0]
    const owns = await b.request('GET', '/owns_uuid', { token: b.user.token, query: { uuid: flagRow.uuid } })
    t.equal(owns.status, 200)
    t.equal(owns.body.hash.owned, false)
    t.equal(owns.body.hash.origin_site, fa.site.current.site_uuid)
    t.equal((await a.request('GET', '/owns_uuid', { token: a.user.token, query: { uuid: flagRow.uuid } })).body.hash.owned, true)
    assertProblem(t, await a.request('GET', '/owns_uuid', { token: a.user.token, query: { uuid: '00000000-0000-4000-8000-000000000000' } }), 404)
    assertProblem(t, await a.request('GET', '/owns_uuid', { token: a.user.token, query: { uuid: 'x' } }), 422, ['uuid'])
    assertProblem(t, await a.request('GET', '/owns_uuid', { query: { uuid: flagRow.uuid } }), 401)
  },
  { config },
)
