import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, grant, readerAndStranger, teamWith, waitForJob } from '../../../core/testing/index.js'
import { listTree, makeTemplate, row } from './fixtures.js'

const spaceUsed = async (s: any, teamId: number) => Number((await row(s, 'teams', { id: teamId })).space_used)

onEachDatabase(t, 'project quota: set, reset, and a merge beyond it answers 507', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Ten', files: { 'ten.bin': '0123456789' } })
  const p = await createProject(s, s.user, { name: 'Quota', template_id: tpl.id })
  t.equal(p.size, 10)
  const { reader, stranger } = await readerAndStranger(s, p.id)

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { json: { quota: 5 } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { token: s.user.token, json: { quota: 5 } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { token: reader.token, json: { quota: 5 } }), 403)
  assertProblem(t, await s.request('PUT', '/projects/99999/quota', { token: s.admin.token, json: { quota: 5 } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: {} }), 422, ['quota'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: -1 } }), 422, ['quota'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: 'lots' } }), 422, ['quota'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: 1.5 } }), 422, ['quota'])
  t.equal((await row(s, 'projects', { id: p.id })).quota, null, 'refused requests change nothing')

  const set = await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, form: { quota: '25' } })
  t.equal(set.status, 200)
  t.equal(set.body.project.quota, 25)
  t.equal(Number((await row(s, 'projects', { id: p.id })).quota), 25)

  // a merge that fits
  const fits = await makeTemplate(s, { name: 'Five', files: { 'five.bin': '01234' } })
  t.equal((await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: fits.id } })).status, 200)
  // one that does not: 15 + 20 > 25
  const big = await makeTemplate(s, { name: 'Twenty', files: { 'twenty.bin': 'x'.repeat(20) } })
  const before = await listTree(p.path)
  const refused = await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: big.id } })
  assertProblem(t, refused, 507)
  t.match(refused.body, { code: 'insufficient_storage', quota: 25, size: 15 })
  t.match(refused.body.detail, /Quota.*quota of 25 bytes/)
  t.same(await listTree(p.path), before, 'nothing copied')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 15)

  // a quota below the size: even an empty merge is refused
  await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: 12 } })
  const empty = await makeTemplate(s, { name: 'Empty' })
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: empty.id } }), 507)

  // no quota: no limit
  const reset = await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: null } })
  t.equal(reset.body.project.quota, null)
  t.equal((await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: big.id } })).status, 200)
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 35)
  t.ok(stranger)
})

onEachDatabase(t, 'team quota: set and reset per project route, and a merge beyond it answers 507', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Ten', files: { 'ten.bin': '0123456789' } })
  const p = await createProject(s, s.user, { name: 'Team quota', template_id: tpl.id })
  const crew = await s.createUser('crew')
  const team = await teamWith(s, 'crew', crew)
  await grant(s, p.id, team, { read: true, write: true })
  const { reader } = await readerAndStranger(s, p.id)

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota_team/${team}`, { json: { quota: 5 } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota_team/${team}`, { token: s.user.token, json: { quota: 5 } }), 403)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/quota_team/${team}`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/projects/99999/quota_team/${team}`, { token: s.admin.token, json: { quota: 5 } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota_team/99999`, { token: s.admin.token, json: { quota: 5 } }), 404)
  assertProblem(t, await s.request('DELETE', `/projects/${p.id}/quota_team/99999`, { token: s.admin.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota_team/${team}`, { token: s.admin.token, json: {} }), 422, ['quota'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota_team/${team}`, { token: s.admin.token, json: { quota: -5 } }), 422, ['quota'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/quota_team/x`, { token: s.admin.token, json: { quota: 5 } }), 422, ['team_id'])
  t.equal((await row(s, 'teams', { id: team })).quota, null)

  // the crew's space follows the projects it can write (measured: 10 bytes)
  const measured = await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: s.user.token })
  await waitForJob(s, s.user.token, measured.body.job.id)
  t.equal(await spaceUsed(s, team), 10)

  const set = await s.request('PUT', `/projects/${p.id}/quota_team/${team}`, { token: s.admin.token, json: { quota: 15 } })
  t.equal(set.status, 200)
  t.match(set.body, { project: { id: p.id }, team: { id: team, name: 'crew', quota: 15, space_used: 10 } })
  t.equal(Number((await row(s, 'teams', { id: team })).quota), 15)

  const big = await makeTemplate(s, { name: 'Six', files: { 'six.bin': '012345' } })
  const refused = await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: crew.token, json: { template_id: big.id } })
  assertProblem(t, refused, 507)
  t.match(refused.body, { code: 'insufficient_storage', team_id: team, quota: 15, space_used: 10 })
  t.match(refused.body.detail, /Team "crew" would exceed its quota of 15 bytes/)
  t.same(await listTree(p.path), ['ten.bin'], 'nothing copied')

  const small = await makeTemplate(s, { name: 'Four', files: { 'four.bin': '0123' } })
  t.equal((await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: crew.token, json: { template_id: small.id } })).status, 200)
  t.equal(await spaceUsed(s, team), 14, 'space_used follows the merge')

  const reset = await s.request('DELETE', `/projects/${p.id}/quota_team/${team}`, { token: s.admin.token })
  t.equal(reset.status, 200)
  t.equal(reset.body.team.quota, null)
  t.equal((await row(s, 'teams', { id: team })).quota, null)
  t.equal((await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: crew.token, json: { template_id: big.id } })).status, 200)
  t.equal(await spaceUsed(s, team), 20)
})

onEachDatabase(t, 'calculate_size measures the tree; teams space_used follows create, size and delete', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Ten', files: { 'a/ten.bin': '0123456789' } })
  const own = Number((await row(s, 'teams', { owner_id: s.user.id }))?.id ?? 0)
  const p = await createProject(s, s.user, { name: 'Measured', template_id: tpl.id })
  const ownTeam = Number((await row(s, 'teams', { owner_id: s.user.id })).id)
  t.ok(own === 0 || own === ownTeam)
  t.equal(await spaceUsed(s, ownTeam), 10, "the creator's team counts the new project")
  const q = await createProject(s, s.user, { name: 'Second', template_id: tpl.id })
  t.equal(await spaceUsed(s, ownTeam), 20)
  const { reader, stranger } = await readerAndStranger(s, p.id)

  await writeFile(path.join(p.path, 'a', 'more.bin'), Buffer.alloc(1000))
  await writeFile(path.join(p.path, 'extra.bin'), Buffer.alloc(24))

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/calculate_size`), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', '/projects/99999/calculate_size', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: s.user.token, json: { deep: true } }), 422, ['deep'])

  // measuring writes the project's size and the teams' space_used: read-only access is not enough
  const refused = await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: reader.token })
  assertProblem(t, refused, 403)
  t.match(refused.body.detail, /not measure it/)
  t.equal(await s.runtime.db.knex('jobs').where({ type: 'projects.calculate-size', project_id: p.id }).count({ n: '*' }).then((r) => Number(r[0].n)), 0, 'no job queued')
  const started = await s.request('PUT', `/projects/${p.id}/calculate_size`, { token: s.user.token })
  t.equal(started.status, 202, 'a writer measures')
  t.match(started.body.job, { id: Number, action: 'projects.calculate-size', project_id: p.id })
  const job = await waitForJob(s, s.user.token, started.body.job.id)
  t.equal(job.state, 'finished')
  t.same(job.result, { size: 1034 })
  const shown = await s.request('GET', `/projects/${p.id}`, { token: s.user.token })
  t.equal(shown.body.project.size, 1034)
  t.type(shown.body.project.size_calculated_at, 'string')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 1034)
  t.equal(await spaceUsed(s, ownTeam), 1044, 'space_used re-added from the projects the team writes')
  t.equal(await spaceUsed(s, (await row(s, 'teams', { name: 'readers' })).id), 0, 'read-only teams do not carry the space')
  t.same((await s.request('GET', '/total_project_size', { token: s.user.token })).body.hash, { total_project_size: 1044, projects: 2 })

  t.equal((await s.request('DELETE', `/projects/${q.id}`, { token: s.user.token })).status, 200)
  t.equal(await spaceUsed(s, ownTeam), 1034, 'a deleted project no longer counts')
})

onEachDatabase(t, "creating from a template beyond the creator's team quota answers 507 and creates nothing", async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Ten', files: { 'ten.bin': '0123456789' } })
  await createProject(s, s.user, { name: 'First', template_id: tpl.id })
  const own = Number((await row(s, 'teams', { owner_id: s.user.id })).id)
  t.equal((await s.request('PUT', `/teams/${own}`, { token: s.admin.token, json: { team: { quota: 15 } } })).status, 200)
  const root = path.join(s.dataDir, 'storage', 'default')
  const before = await listTree(root)
  const refused = await s.request('POST', '/projects', { token: s.user.token, json: { name: 'Second', template_id: tpl.id } })
  assertProblem(t, refused, 507)
  t.match(refused.body, { code: 'insufficient_storage', team_id: own, quota: 15, space_used: 10 })
  t.same(await listTree(root), before, 'no folder created')
  t.notOk(await row(s, 'projects', { name: 'Second' }), 'no row written')
  t.equal((await s.request('POST', '/projects', { token: s.user.token, json: { name: 'Empty one' } })).status, 201, 'a project without a template adds nothing')
})
