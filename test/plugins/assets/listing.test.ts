import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, requestWithBody, waitForAsset } from '../../../core/testing/index.js'
import { FILES, paths, setup } from './fixtures.js'

/** listing and counting by folder, changed metadata, the metadata properties */

onEachDatabase(t, 'assets and count_assets of a project, by folder, paginated', async (t, s) => {
  const { p, reader, stranger } = await setup(s)
  const list = (query: Record<string, string>, token = reader.token) => s.request('GET', `/projects/${p.id}/assets`, { token, query })

  const root = await list({})
  t.equal(root.status, 200)
  t.same(paths(root), ['a.txt', 'b.txt'], 'the root folder only')
  t.equal(root.headers.get('x-total-count'), '2')
  t.match(root.body.assets[0], { project_id: p.id, project_name: 'Listed', type: 'other', analysis_state: 'ready' })
  t.same(paths(await list({ folder: 'Media' })), ['Media/c.txt', 'Media/d.txt'])
  t.same(paths(await list({ folder: 'Media/', recursive: 'true' })), ['Media/c.txt', 'Media/d.txt', 'Media/Sub/e.txt'])
  t.same(paths(await list({ folder: 'my_f', recursive: 'true' })), ['my_f/x.txt', 'my_f/sub/z.txt'], 'LIKE wildcards in a folder name are literal')
  t.same(paths(await list({ folder: 'MEDIA', recursive: 'true' })), ['MEDIA/Sub/g.txt'], 'folders are case-sensitive')
  // the order across folders follows the database collation: compared sorted
  t.same(paths(await list({ recursive: 'true' })).sort(), Object.keys(FILES).sort())
  const page2 = await list({ folder: 'Media', recursive: 'true', per_page: '2', page: '2' })
  t.same(paths(page2), ['Media/Sub/e.txt'])
  t.equal(page2.headers.get('x-total-count'), '3')
  t.same(paths(await list({ folder: 'Media', recursive: 'true', per_page: '2', page: '3' })), [])
  t.same(paths(await list({ recursive: 'true', type: 'video' })), [])
  t.same(paths(await list({ folder: 'Nowhere' })), [])
  // keyset paging: X-Next-After of one page is `after` of the next; the same rows in the same order as OFFSET pages
  const byOffset = paths(await list({ recursive: 'true', per_page: '100' }))
  const walked: string[] = []
  for (let after: string | null = null, pages = 0; pages < 10; pages++) {
    const reply = await list({ recursive: 'true', per_page: '3', ...(after ? { after } : {}) })
    // the walk's first page counts; keyset pages do not count again (README: X-Total-Count)
    t.equal(reply.headers.get('x-total-count'), after ? null : String(Object.keys(FILES).length), `keyset page ${pages + 1}: X-Total-Count`)
    walked.push(...paths(reply))
    const next = reply.headers.get('x-next-after')
    if (!next) break
    after = decodeURIComponent(next)
  }
  t.same(walked, byOffset, 'keyset pages cover the project once, in order')
  // asked for, a keyset page counts; asked not to, an OFFSET page does not
  const counted = await list({ recursive: 'true', per_page: '3', after: 'a.txt', total: 'true' })
  t.equal(counted.headers.get('x-total-count'), String(Object.keys(FILES).length), 'total=true on a keyset page')
  t.equal(counted.body.assets.length, 3)
  t.equal((await list({ recursive: 'true', total: 'false' })).headers.get('x-total-count'), null, 'total=false on an OFFSET page')
  // a full first page needs the count; a page past the end too
  const full = await list({ folder: 'Media', recursive: 'true', per_page: '3' })
  t.same(paths(full).length, 3)
  t.equal(full.headers.get('x-total-count'), '3')
  t.equal((await list({ folder: 'Media', recursive: 'true', per_page: '2', page: '1' })).headers.get('x-total-count'), '3', 'a full page: counted')
  t.equal((await list({ folder: 'Media', recursive: 'true', per_page: '2', page: '5' })).headers.get('x-total-count'), '3', 'past the end: counted')
  t.equal((await list({ folder: 'Nowhere' })).headers.get('x-total-count'), '0')
  assertProblem(t, await list({ total: 'maybe' }), 422, ['total'])
  t.same(paths(await list({ folder: 'Media', recursive: 'true', after: 'Media/c.txt' })), ['Media/d.txt', 'Media/Sub/e.txt'].filter((x) => byOffset.indexOf(x) > byOffset.indexOf('Media/c.txt')), 'after a path, within a folder filter')
  assertProblem(t, await list({ after: 'a.txt', page: '2' }), 422, ['page'])
  assertProblem(t, await list({ after: '../outside' }), 422, ['after'])
  const json = await requestWithBody(s, 'GET', `/projects/${p.id}/assets`, { token: s.user.token, json: { folder: 'Media', recursive: false } })
  t.same(paths(json), ['Media/c.txt', 'Media/d.txt'], 'parameters as a JSON body')

  assertProblem(t, await s.request('GET', `/projects/${p.id}/assets`), 401)
  assertProblem(t, await list({}, stranger.token), 404)
  assertProblem(t, await s.request('GET', '/projects/99999/assets', { token: s.admin.token }), 404)
  assertProblem(t, await list({ folder: '../Listed' }), 422, ['folder'])
  assertProblem(t, await list({ folder: '/etc' }), 422, ['folder'])
  assertProblem(t, await list({ per_page: '0' }), 422, ['per_page'])
  assertProblem(t, await list({ per_page: '501' }), 422, ['per_page'])
  assertProblem(t, await list({ type: 'hologram' }), 422, ['type'])
  assertProblem(t, await list({ sort: 'name' }), 422, ['sort'])

  const count = async (query: Record<string, string>) => (await s.request('GET', `/projects/${p.id}/count_assets`, { token: reader.token, query })).body.hash
  t.same(await count({}), { count: 2, folder: '', recursive: false })
  t.same(await count({ folder: 'Media' }), { count: 2, folder: 'Media', recursive: false })
  t.same(await count({ folder: 'Media', recursive: 'true' }), { count: 3, folder: 'Media', recursive: true })
  t.same(await count({ recursive: 'true' }), { count: 10, folder: '', recursive: true })
  t.same(await count({ folder: 'my_f', recursive: 'true' }), { count: 2, folder: 'my_f', recursive: true })
  assertProblem(t, await s.request('GET', `/projects/${p.id}/count_assets`), 401)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/count_assets`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', `/projects/${p.id}/count_assets`, { token: s.user.token, query: { folder: 'a/../..' } }), 422, ['folder'])
  assertProblem(t, await s.request('GET', `/projects/${p.id}/count_assets`, { token: s.user.token, query: { recursive: 'maybe' } }), 422, ['recursive'])

  // the metadata properties analysis writes (§4.9, §4.13)
  const props = await s.request('GET', '/available_metadata_properties', { token: reader.token, query: { query: 'timecode' } })
  t.equal(props.status, 200)
  t.match(props.body.available_metadata_properties, [{ name: 'start_timecode', type: 'string' }])
  t.equal(props.body.available_metadata_properties.length, 1)
  const all = await s.request('GET', '/settings/metadata_properties', { token: reader.token })
  t.ok(all.body.metadata_properties.some((m: any) => m.name === 'camera_make'))
  assertProblem(t, await s.request('GET', '/available_metadata_properties'), 401)
  assertProblem(t, await s.request('GET', '/available_metadata_properties', { token: reader.token, query: { q: 'x' } }), 422, ['q'])
})

onEachDatabase(t, 'changed_asset_metadata lists assets analysed since a time', async (t, s) => {
  const { p, reader, stranger } = await setup(s)
  const changed = (query: Record<string, string> = {}, token = reader.token) => s.request('GET', `/projects/${p.id}/changed_asset_metadata`, { token, query })

  const all = await changed()
  t.equal(all.status, 200)
  t.equal(all.body.assets.length, 10, 'never used: every analysed asset')
  t.equal(all.body.since, null)
  const mark = new Date()
  t.same((await changed({ since: mark.toISOString() })).body.assets, [])

  await writeFile(path.join(p.path, 'b.txt'), 'changed content')
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: ['b.txt'] } })
  await waitForAsset(s, s.user.token, added.body.assets[0].id, (a) => a.analysis_state === 'ready' && a.size === 15)
  const since = await changed({ since: mark.toISOString() })
  t.same(paths(since), ['b.txt'])
  t.equal(since.body.since, mark.toISOString())
  assertProblem(t, await s.request('GET', `/projects/${p.id}/changed_asset_metadata`), 401)
  assertProblem(t, await changed({}, stranger.token), 404)
  assertProblem(t, await changed({ since: 'yesterday' }), 422, ['since'])
  assertProblem(t, await changed({ since: '2024-13-45' }), 422, ['since'])
})
