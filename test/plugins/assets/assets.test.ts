import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, requestWithBody, readerAndStranger } from '../../../core/testing/index.js'
import { row } from '../projects/fixtures.js'
import { projectWithFiles } from './fixtures.js'

/** GET/PUT /assets/:id, delete_description and by_path */

onEachDatabase(t, 'show and update an asset; delete its description', async (t, s) => {
  const { p, assets } = await projectWithFiles(s, 'Show', { 'Media/a.txt': 'alpha' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const id = assets[0].id

  const shown = await s.request('GET', `/assets/${id}`, { token: reader.token })
  t.equal(shown.status, 200)
  t.match(shown.body.asset, {
    id,
    name: 'a.txt',
    path: 'Media/a.txt',
    folder: 'Media',
    project_id: p.id,
    project_name: 'Show',
    size: 5,
    online: true,
    file_names: ['a.txt'],
    clip_names: Array,
    metadata: Object,
    analysis_state: /^(pending|processing|ready|failed)$/,
    proxy_state: /^(pending|processing|ready|failed)$/,
    proxy: { state: String, version: Number, kinds: Array },
    video: false,
    image: false,
    descriptions: [],
    archive_strategy_id: null,
    created_at: String,
    updated_at: String,
  })
  t.notOk(Object.keys(shown.body.asset).some((k) => /key/.test(k)), 'no key material in the JSON')
  t.equal((await s.request('GET', `/assets/${id}.json`, { token: s.user.token })).body.asset.id, id, '.json suffix')
  assertProblem(t, await s.request('GET', `/assets/${id}`), 401)
  assertProblem(t, await s.request('GET', `/assets/${id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/assets/99999', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('GET', '/assets/abc', { token: s.user.token }), 422, ['id'])

  const updated = await s.request('PUT', `/assets/${id}`, { token: s.user.token, json: { asset: { description: 'Wide shot' } } })
  t.equal(updated.status, 200)
  t.match(updated.body.asset, { id, description: 'Wide shot', descriptions: ['Wide shot'] })
  t.equal((await row(s, 'assets', { id })).description, 'Wide shot')
  const flat = await s.request('PUT', `/assets/${id}`, { token: s.user.token, form: { description: 'Close-up' } })
  t.equal(flat.body.asset.description, 'Close-up')
  assertProblem(t, await s.request('PUT', `/assets/${id}`, { json: { description: 'x' } }), 401)
  assertProblem(t, await s.request('PUT', `/assets/${id}`, { token: reader.token, json: { description: 'x' } }), 403)
  assertProblem(t, await s.request('PUT', `/assets/${id}`, { token: stranger.token, json: { description: 'x' } }), 404)
  assertProblem(t, await s.request('PUT', `/assets/${id}`, { token: s.user.token, json: { name: 'renamed.txt' } }), 422, ['name'])
  assertProblem(t, await s.request('PUT', `/assets/${id}`, { token: s.user.token, json: { description: 42 } }), 422, ['description'])
  t.equal((await row(s, 'assets', { id })).description, 'Close-up', 'refused updates change nothing')

  assertProblem(t, await s.request('DELETE', `/assets/${id}/delete_description`, { token: reader.token }), 403)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/delete_description`, { token: stranger.token }), 404)
  const cleared = await s.request('DELETE', `/assets/${id}/delete_description`, { token: s.user.token })
  t.equal(cleared.status, 200)
  t.match(cleared.body.asset, { description: null, descriptions: [] })
  t.equal((await row(s, 'assets', { id })).description, null)

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('PUT', `/assets/${id}`, { token: s.user.token, json: { description: 'frozen' } }), 423)
  assertProblem(t, await s.request('DELETE', `/assets/${id}/delete_description`, { token: s.admin.token }), 423)
  t.equal((await s.request('GET', `/assets/${id}`, { token: reader.token })).status, 200, 'reads keep working when frozen')
})

onEachDatabase(t, 'by_path: relative with project_id, absolute on the server, as query or JSON body', async (t, s) => {
  const { p, assets } = await projectWithFiles(s, 'Paths', { 'Media/Day 1/clip.mov': 'c', 'top.txt': 't' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const clip = assets[0]

  const byQuery = await s.request('GET', '/assets/by_path', { token: reader.token, query: { path: 'Media/Day 1/clip.mov', project_id: String(p.id) } })
  t.equal(byQuery.status, 200)
  t.match(byQuery.body.asset, { id: clip.id, path: 'Media/Day 1/clip.mov', project_id: p.id })
  const cleaned = await s.request('GET', '/assets/by_path', { token: s.user.token, query: { path: 'Media//Day 1/./clip.mov', project_id: String(p.id) } })
  t.equal(cleaned.body.asset.id, clip.id, 'the path is cleaned')
  const jsonString = await requestWithBody(s, 'GET', '/assets/by_path', { token: s.user.token, json: path.join(p.path, 'Media/Day 1/clip.mov') })
  t.equal(jsonString.status, 200, 'a bare JSON string body')
  t.equal(jsonString.body.asset.id, clip.id)
  const jsonObject = await requestWithBody(s, 'GET', '/assets/by_path', { token: s.user.token, json: { path: 'top.txt', project_id: p.id } })
  t.equal(jsonObject.body.asset.id, assets[1].id, 'a {"path"} body')
  const absolute = await s.request('GET', '/assets/by_path', { token: reader.token, query: { path: path.join(p.path, 'top.txt') } })
  t.equal(absolute.status, 200)
  t.equal(absolute.body.asset.id, assets[1].id)

  const find = (token: string | undefined, query: Record<string, string>) => s.request('GET', '/assets/by_path', { token, query })
  assertProblem(t, await find(undefined, { path: 'top.txt', project_id: String(p.id) }), 401)
  assertProblem(t, await find(stranger.token, { path: 'top.txt', project_id: String(p.id) }), 404)
  assertProblem(t, await find(stranger.token, { path: path.join(p.path, 'top.txt') }), 404)
  assertProblem(t, await find(s.user.token, { path: 'nothing.txt', project_id: String(p.id) }), 404)
  assertProblem(t, await find(s.user.token, { path: path.join(p.path, 'nothing.txt') }), 404)
  assertProblem(t, await find(s.user.token, { path: '/etc/passwd' }), 404)
  assertProblem(t, await find(s.user.token, { path: 'top.txt', project_id: '99999' }), 404)
  assertProblem(t, await find(s.user.token, {}), 422, ['path'])
  assertProblem(t, await find(s.user.token, { path: 'top.txt' }), 422, ['project_id'])
  assertProblem(t, await find(s.user.token, { path: '../Paths/top.txt', project_id: String(p.id) }), 422, ['path'])
  assertProblem(t, await find(s.user.token, { path: path.join(p.path, 'top.txt'), project_id: String(p.id) }), 422, ['path'])
  assertProblem(t, await find(s.user.token, { path: 'top.txt\0.mov', project_id: String(p.id) }), 422, ['path'])
  assertProblem(t, await find(s.user.token, { path: `${p.path}/Media/../top.txt` }), 422, ['path'])
  assertProblem(t, await find(s.user.token, { path: `${p.path}/top.txt\0` }), 422, ['path'])
  assertProblem(t, await requestWithBody(s, 'GET', '/assets/by_path', { token: s.user.token, json: { path: 'top.txt', project_id: p.id, extra: 1 } }), 422, ['extra'])
})
