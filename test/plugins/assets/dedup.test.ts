import { createHash, randomBytes } from 'node:crypto'
import { copyFile, link, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { assertProblem, onEachDatabase, waitForJob, waitForJobs, requestWithBody, createProject, readerAndStranger } from '../../../core/testing/index.js'
import { row } from '../projects/fixtures.js'

/** hard links (GET /assets/links), rehash and the deduplication report */

onEachDatabase(t, 'hard links show in /assets/links, rehash fills CRC-32 and SHA-256, the report counts a linked file once', async (t, s) => {
  const content = randomBytes(1000)
  const p = await createProject(s, s.user, { name: 'Linked' })
  await writeFile(path.join(p.path, 'orig.bin'), content)
  await link(path.join(p.path, 'orig.bin'), path.join(p.path, 'link.bin'))
  await copyFile(path.join(p.path, 'orig.bin'), path.join(p.path, 'copy.bin'))
  await writeFile(path.join(p.path, 'unique.bin'), randomBytes(10))
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: ['orig.bin', 'link.bin', 'copy.bin', 'unique.bin'] } })
  t.equal(added.status, 201)
  const [orig, linked, copy, unique] = added.body.assets.map((a: any) => a.id)
  const { reader, stranger } = await readerAndStranger(s, p.id)

  // a project the user cannot read holds another link of the same file
  const hidden = await createProject(s, s.admin, { name: 'Hidden' })
  await link(path.join(p.path, 'orig.bin'), path.join(hidden.path, 'elsewhere.bin'))
  const secret = (await s.request('POST', `/projects/${hidden.id}/addassets`, { token: s.admin.token, json: { paths: ['elsewhere.bin'] } })).body.assets[0].id

  const links = await s.request('GET', '/assets/links', { token: reader.token, query: { 'asset_ids[]': String(orig) } })
  t.equal(links.status, 200)
  t.same(links.body, { links: { [orig]: [linked] } }, "only links the caller can read; the hidden project's link is left out")
  const body = await requestWithBody(s, 'GET', '/assets/links', { token: s.user.token, json: { asset_ids: [linked, copy, unique] } })
  t.same(body.body.links, { [linked]: [orig], [copy]: [], [unique]: [] }, 'a copy is not a link')
  const admin = await requestWithBody(s, 'GET', '/assets/links', { token: s.admin.token, json: { asset_ids: [orig] } })
  t.same(admin.body.links, { [orig]: [linked, secret] })
  assertProblem(t, await s.request('GET', '/assets/links', { query: { 'asset_ids[]': String(orig) } }), 401)
  assertProblem(t, await requestWithBody(s, 'GET', '/assets/links', { token: stranger.token, json: { asset_ids: [orig] } }), 404)
  assertProblem(t, await requestWithBody(s, 'GET', '/assets/links', { token: s.user.token, json: { asset_ids: [orig, secret] } }), 404)
  assertProblem(t, await requestWithBody(s, 'GET', '/assets/links', { token: s.user.token, json: { asset_ids: [99999] } }), 404)
  assertProblem(t, await s.request('GET', '/assets/links', { token: s.user.token }), 422, ['asset_ids'])
  assertProblem(t, await requestWithBody(s, 'GET', '/assets/links', { token: s.user.token, json: { asset_ids: [] } }), 422, ['asset_ids'])
  assertProblem(t, await requestWithBody(s, 'GET', '/assets/links', { token: s.user.token, json: { asset_ids: ['one'] } }), 422, ['asset_ids[0]'])

  // before hashing there is nothing to compare
  t.same((await s.request('GET', '/deduplication_report', { token: s.user.token })).body.deduplication_report, { groups: [], wasted_bytes: 0 })

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rehash`), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rehash`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rehash`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', '/projects/99999/rehash', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token, json: { sha256: 'often' } }), 422, ['sha256'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token, json: { md5: true } }), 422, ['md5'])

  const rehash = await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token })
  t.equal(rehash.status, 202)
  t.match(rehash.body.job, { id: Number, action: 'assets.rehash', project_id: p.id })
  const job = await waitForJob(s, s.user.token, rehash.body.job.id)
  t.equal(job.state, 'finished')
  t.same(job.result, { hashed: 4, failed: 0, bytes: 3010, errors: [] })
  const sha = createHash('sha256').update(content).digest('hex')
  const r = await row(s, 'assets', { id: copy })
  t.equal(r.sha256, sha)
  t.equal(r.crc32, crc32(content).toString(16).padStart(8, '0'))
  t.ok(r.hashed_at)
  t.match((await s.request('GET', `/assets/${orig}`, { token: reader.token })).body.asset, { sha256: sha, crc32: r.crc32 })

  // the hidden project hashed without SHA-256 (form string 'false'): CRC only
  const crcOnly = await s.request('PUT', `/projects/${hidden.id}/rehash`, { token: s.admin.token, form: { sha256: 'false' } })
  t.equal((await waitForJob(s, s.admin.token, crcOnly.body.job.id)).state, 'finished')
  const h = await row(s, 'assets', { id: secret })
  t.equal(h.sha256, null)
  t.equal(h.crc32, r.crc32)

  // three assets with the same content, two of them one file: 1000 bytes wasted, not 2000
  const report = await s.request('GET', '/deduplication_report', { token: reader.token })
  t.equal(report.status, 200)
  t.same(report.body.deduplication_report, {
    groups: [
      {
        sha256: sha,
        size: 1000,
        count: 3,
        wasted_bytes: 1000,
        assets: [orig, linked, copy].map((id, i) => ({ id, project_id: p.id, project_name: 'Linked', path: ['orig.bin', 'link.bin', 'copy.bin'][i] })),
      },
    ],
    wasted_bytes: 1000,
  })
  // with SHA-256 in the hidden project too, the administrator sees four assets, still two files
  await waitForJob(s, s.admin.token, (await s.request('PUT', `/projects/${hidden.id}/rehash`, { token: s.admin.token })).body.job.id)
  const all = (await s.request('GET', '/deduplication_report', { token: s.admin.token })).body.deduplication_report
  t.match(all, { groups: [{ sha256: sha, count: 4, wasted_bytes: 1000 }], wasted_bytes: 1000 })
  t.same((await s.request('GET', '/deduplication_report', { token: reader.token })).body.deduplication_report.groups[0].count, 3, 'others still see their own')
  t.same((await s.request('GET', '/deduplication_report', { token: stranger.token })).body.deduplication_report, { groups: [], wasted_bytes: 0 })
  assertProblem(t, await s.request('GET', '/deduplication_report'), 401)

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token }), 423)
  await waitForJobs(s, { types: ['assets.analyse'] })
})
