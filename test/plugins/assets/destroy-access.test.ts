import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, waitForJobs, createProject, grant, readerAndStranger, teamWith } from '../../../core/testing/index.js'
import { exists, listTree, row } from '../projects/fixtures.js'
import { projectWithFiles } from './fixtures.js'

/** DELETE /assets/destroy and the asset access-right routes */

onEachDatabase(t, 'destroy removes assets and folders from storage and database', async (t, s) => {
  const { p, assets } = await projectWithFiles(s, 'Doomed', {
    'keep.txt': 'k',
    'one.txt': '1',
    'my_folder/a.txt': 'a',
    'my_folder/sub/b.txt': 'b',
    'myXfolder/c.txt': 'c',
    'MY_FOLDER/sub/e.txt': 'e',
    '100%/d.txt': 'd',
  })
  const id = (name: string) => assets.find((a) => a.name === name).id
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const destroy = (token: string | undefined, json: unknown) => s.request('DELETE', '/assets/destroy', { token, json })

  const count = async () => Number((await s.runtime.db.knex('assets').where({ project_id: p.id }).count({ n: '*' }))[0].n)
  const tree = await listTree(p.path)
  assertProblem(t, await destroy(undefined, { asset_ids: [id('one.txt')] }), 401)
  assertProblem(t, await destroy(reader.token, { asset_ids: [id('one.txt')] }), 403)
  assertProblem(t, await destroy(stranger.token, { asset_ids: [id('one.txt')] }), 404)
  assertProblem(t, await destroy(s.user.token, { asset_ids: [99999] }), 404)
  assertProblem(t, await destroy(reader.token, { project_id: p.id, paths: ['one.txt'] }), 403)
  assertProblem(t, await destroy(stranger.token, { project_id: p.id, paths: ['one.txt'] }), 404)
  assertProblem(t, await destroy(s.user.token, {}), 422, ['asset_ids'])
  assertProblem(t, await destroy(s.user.token, { paths: ['one.txt'] }), 422, ['project_id'])
  assertProblem(t, await destroy(s.user.token, { asset_ids: ['x'] }), 422, ['asset_ids[0]'])
  assertProblem(t, await destroy(s.user.token, { project_id: p.id, paths: ['../Doomed/one.txt'] }), 422, ['paths[0]'])
  assertProblem(t, await destroy(s.user.token, { project_id: p.id, paths: ['keep.txt', path.join(p.path, 'one.txt')] }), 422, ['paths[1]'])
  assertProblem(t, await destroy(s.user.token, { project_id: p.id, paths: ['one.txt\0'] }), 422, ['paths[0]'])
  assertProblem(t, await destroy(s.user.token, { project_id: p.id, paths: ['.'] }), 422, ['paths[0]'])
  t.same(await listTree(p.path), tree, 'refused requests remove nothing')
  t.equal(await count(), 7)

  const byId = await destroy(s.user.token, { asset_ids: [id('one.txt')] })
  t.equal(byId.status, 200)
  t.match(byId.body.assets, [{ id: id('one.txt'), path: 'one.txt' }])
  t.notOk(await exists(path.join(p.path, 'one.txt')))
  t.notOk(await row(s, 'assets', { id: id('one.txt') }))

  // a folder with LIKE wildcards in its name takes exactly its own assets, case-sensitively
  const byPath = await destroy(s.user.token, { project_id: p.id, paths: ['my_folder', '100%'] })
  t.equal(byPath.status, 200)
  t.same(byPath.body.assets.map((a: any) => a.path).sort(), ['100%/d.txt', 'my_folder/a.txt', 'my_folder/sub/b.txt'])
  t.same(await listTree(p.path), ['MY_FOLDER/', 'MY_FOLDER/sub/', 'MY_FOLDER/sub/e.txt', 'keep.txt', 'myXfolder/', 'myXfolder/c.txt'])
  t.same((await s.runtime.db.knex('assets').where({ project_id: p.id }).select('path')).map((r: any) => r.path).sort(), ['MY_FOLDER/sub/e.txt', 'keep.txt', 'myXfolder/c.txt'])
  // the freed space stops counting: the project is measured again
  await waitForJobs(s, { types: ['projects.calculate-size'] })
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 3, 'the size of what is left')

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await destroy(s.user.token, { asset_ids: [id('keep.txt')] }), 423)
  assertProblem(t, await destroy(s.admin.token, { project_id: p.id, paths: ['keep.txt'] }), 423)
  t.ok(await exists(path.join(p.path, 'keep.txt')))
  t.equal(await count(), 3)
})

onEachDatabase(t, 'access rights of an asset: list, the caller’s right type, remove', async (t, s) => {
  const { p, assets } = await projectWithFiles(s, 'Rights', { 'a.txt': 'a' })
  const id = assets[0].id
  const { reader, stranger, readersTeam } = await readerAndStranger(s, p.id)
  const writer = await s.createUser('writer')
  const writers = await teamWith(s, 'writers', writer)
  await grant(s, p.id, writers, { read: true, write: true })
  const ownTeam = Number((await row(s, 'teams', { owner_id: s.user.id })).id)

  const listed = await s.request('GET', `/assets/${id}/access_rights`, { token: reader.token })
  t.equal(listed.status, 200)
  t.match(listed.body.access_rights, [
    { team_id: ownTeam, read: true, write: true },
    { team_id: readersTeam, team_name: 'readers', read: true, write: false },
    { team_id: writers, team_name: 'writers', read: true, write: true },
  ])
  assertProblem(t, await s.request('GET', `/assets/${id}/access_rights`), 401)
  assertProblem(t, await s.request('GET', `/assets/${id}/access_rights`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/assets/99999/access_rights', { token: s.admin.token }), 404)

  const type = async (token: string, asset = id) => (await s.request('GET', `/assets/${asset}/access_right_type`, { token })).body.hash.access_right_type
  t.equal(await type(s.user.token), 'write')
  t.equal(await type(writer.token), 'write')
  t.equal(await type(reader.token), 'read')
  t.equal(await type(stranger.token), 'none')
  t.equal(await type(s.admin.token), 'admin')
  t.equal(await type(s.user.token, 99999), 'none', 'an unknown asset is "none", like one the caller cannot see')
  assertProblem(t, await s.request('GET', `/assets/${id}/access_right_type`), 401)

  const writersRight = listed.body.access_rights.find((r: any) => r.team_id === writers)
  const readersRight = listed.body.access_rights.find((r: any) => r.team_id === readersTeam)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/access_rights/${writersRight.id}`), 401)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/access_rights/${writersRight.id}`, { token: reader.token }), 403)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/access_rights/${writersRight.id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/access_rights/99999`, { token: s.user.token }), 404)
  // a right on another project is not reachable through this asset
  const other = await createProject(s, s.user, { name: 'Other' })
  const foreign = await s.runtime.db.knex('access_rights').where({ object_type: 'project', object_id: other.id }).first()
  assertProblem(t, await s.request('DELETE', `/assets/${id}/access_rights/${foreign.id}`, { token: s.user.token }), 404)

  const removed = await s.request('DELETE', `/assets/${id}/access_rights/${readersRight.id}`, { token: writer.token })
  t.equal(removed.status, 200)
  t.match(removed.body.access_right, { id: readersRight.id, team_id: readersTeam })
  t.notOk(await row(s, 'access_rights', { id: readersRight.id }))
  assertProblem(t, await s.request('GET', `/assets/${id}`, { token: reader.token }), 404)
  t.equal(await type(reader.token), 'none')

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/access_rights/${writersRight.id}`, { token: s.user.token }), 423)
  t.ok(await row(s, 'access_rights', { id: writersRight.id }))
})
