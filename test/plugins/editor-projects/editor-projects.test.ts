import t from 'tap'
import { readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { assertProblem, createProject, onEachDatabase, readerAndStranger, waitForJob, type TestServer, type TestUser } from '../../../core/testing/index.js'
import { writeTree } from '../projects/fixtures.js'
import { NLE, premiereProject, resolveProject } from './fixtures.js'

/** PUT /assets/:id/editor_project_sequence_names and editor_project_download_summary (§4.6), both databases */

const A001 = Buffer.alloc(3000, 1)
const B002 = Buffer.alloc(1200, 2)

async function showProject(s: TestServer, user: TestUser) {
  const p = await createProject(s, user, { name: `Show ${Math.random().toString(36).slice(2, 8)}` })
  const files: Record<string, Buffer> = {
    'edit/show.prproj': premiereProject(),
    'edit/show.drp': await resolveProject(),
    'edit/cut.aaf': await readFile(`${NLE}/aaf/one_clip.aaf`),
    'edit/old.avb': Buffer.from('Domain'),
    'edit/broken.prproj': Buffer.from('not a project'),
    'media/A001.mov': A001,
    'sound/day1/B002 & room tone.wav': B002,
    'notes.txt': Buffer.from('hello'),
  }
  await writeTree(p.path, files)
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: user.token, json: { paths: Object.keys(files) } })
  if (added.status !== 201) throw new Error(added.text)
  return { p, ids: Object.fromEntries(added.body.assets.map((a: any) => [a.path, a.id])) as Record<string, number> }
}

const readings = (s: TestServer) => s.runtime.db.knex('editor_projects_readings').orderBy('id')
const NAMES = (id: number) => `/assets/${id}/editor_project_sequence_names`
const SUMMARY = (id: number) => `/assets/${id}/editor_project_download_summary`

onEachDatabase(t, 'sequence names and download summary, read in the request; rights, refusals, races', async (t, s) => {
  const { p, ids } = await showProject(s, s.user)
  const prproj = ids['edit/show.prproj']

  assertProblem(t, await s.request('PUT', NAMES(prproj)), 401)
  assertProblem(t, await s.request('PUT', SUMMARY(prproj)), 401)
  const { reader, stranger } = await readerAndStranger(s, p.id)
  assertProblem(t, await s.request('PUT', NAMES(prproj), { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', SUMMARY(prproj), { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', NAMES(999999), { token: s.user.token }), 404)
  assertProblem(t, await s.request('PUT', NAMES(0).replace('/0/', '/abc/'), { token: s.user.token }), 422, ['id'])
  t.equal((await readings(s)).length, 0, 'refused requests read nothing')

  // two first requests at once: both answer the same, one reading is stored
  const [first, second] = await Promise.all([1, 2].map(() => s.request('PUT', NAMES(prproj), { token: reader.token })))
  t.equal(first.status, 200, first.text)
  t.same(first.body, { hash: { asset_id: prproj, format: 'premiere', sequence_names: ['Main cut v3'] } })
  t.same(second.body, first.body)
  const rows = await readings(s)
  t.equal(rows.length, 1)
  t.match(rows[0], { asset_id: prproj, state: 'ready', format: 'premiere', file_size: (await readFile(path.join(p.path, 'edit/show.prproj'))).length })

  const summary = await s.request('PUT', SUMMARY(prproj), { token: reader.token })
  t.equal(summary.status, 200, summary.text)
  const h = summary.body.hash
  t.match(h, { asset_id: prproj, format: 'premiere', sequence_names: ['Main cut v3'], referenced_count: 3, supported_count: 2, missing_count: 1 })
  t.same(
    h.supported_assets.map((a: any) => [a.asset_id, a.path, a.size, a.matched_by]),
    [
      [ids['media/A001.mov'], 'media/A001.mov', A001.length, 'path'],
      [ids['sound/day1/B002 & room tone.wav'], 'sound/day1/B002 & room tone.wav', B002.length, 'path'],
    ],
    'A001 by the path relative to the project file, B002 by the end of its Windows path',
  )
  t.same(h.missing_media, [{ name: 'Missing.mov', referenced_path: '/Volumes/RAID/Show/media/Missing.mov', reason: 'not_found' }])
  t.equal(h.media_size, A001.length + B002.length)
  t.equal(h.total_size, A001.length + B002.length + h.project_file.size)
  t.equal((await readings(s)).length, 1, 'the summary used the stored reading')

  // Resolve and AAF
  t.same((await s.request('PUT', NAMES(ids['edit/show.drp']), { token: s.user.token })).body.hash.sequence_names, ['Resolve cut 1'])
  const drp = (await s.request('PUT', SUMMARY(ids['edit/show.drp']), { token: s.user.token })).body.hash
  t.equal(drp.supported_count, 2)
  t.equal(drp.missing_count, 0)
  const aaf = (await s.request('PUT', SUMMARY(ids['edit/cut.aaf']), { token: s.user.token })).body.hash
  t.match(aaf, { format: 'aaf', sequence_names: ['OTIO_Test_ppjoshm1.Exported.01'], supported_count: 0, missing_count: 2, media_size: 0 })

  // refusals with reasons, nothing stored for them
  const before = (await readings(s)).length
  assertProblem(t, await s.request('PUT', NAMES(ids['notes.txt']), { token: s.user.token }), 415)
  const avb = await s.request('PUT', NAMES(ids['edit/old.avb']), { token: s.user.token })
  assertProblem(t, avb, 501)
  t.match(avb.body.detail, /export the bin.*AAF/)
  const broken = await s.request('PUT', SUMMARY(ids['edit/broken.prproj']), { token: s.user.token })
  assertProblem(t, broken, 422, ['id'])
  t.match(broken.body.errors[0].message, /not a Premiere Pro project/)
  t.equal((await readings(s)).length, before, 'refused files store nothing')

  // the file changes: it is read again
  await writeFile(path.join(p.path, 'edit/show.prproj'), premiereProject({ sequence: 'Main cut v4', extraSequence: 'Trailer' }))
  t.same((await s.request('PUT', NAMES(prproj), { token: s.user.token })).body.hash.sequence_names, ['Main cut v4', 'Trailer'])
  t.equal((await readings(s)).filter((r: any) => Number(r.asset_id) === prproj).length, 1)

  // media in a library project the user may read are found by name; the same file in a project they cannot read is not
  const library = await createProject(s, s.user, { name: `Stock ${Math.random().toString(36).slice(2, 8)}`, is_library_project: true })
  const hidden = await createProject(s, s.admin, { name: `Hidden ${Math.random().toString(36).slice(2, 8)}`, is_library_project: true })
  for (const lib of [library, hidden]) {
    await writeTree(lib.path, { 'stock/Missing.mov': Buffer.alloc(500, 3) })
    const owner = lib === library ? s.user : s.admin
    t.equal((await s.request('POST', `/projects/${lib.id}/addassets`, { token: owner.token, json: { paths: ['stock/Missing.mov'] } })).status, 201)
  }
  const withLibrary = (await s.request('PUT', SUMMARY(prproj), { token: s.user.token })).body.hash
  t.match(withLibrary, { supported_count: 3, missing_count: 0, media_size: A001.length + B002.length + 500 })
  t.equal(withLibrary.supported_assets.find((a: any) => a.name === 'Missing.mov').project_id, library.id, 'the readable library, not the hidden one')
})

onEachDatabase(
  t,
  'large project files are read by a worker job; two requests share one job; files over the limits are refused',
  async (t, s) => {
    const { ids } = await showProject(s, s.user)
    const prproj = ids['edit/show.prproj']
    const [a, b] = await Promise.all([1, 2].map(() => s.request('PUT', NAMES(prproj), { token: s.user.token })))
    t.equal(a.status, 202, a.text)
    t.equal(b.status, 202, b.text)
    t.equal(a.body.job.id, b.body.job.id, 'the second request follows the first one’s job')
    const rows = await readings(s)
    t.equal(rows.length, 1)
    t.match(rows[0], { state: 'pending', job_id: a.body.job.id })
    t.equal((await waitForJob(s, s.user.token, a.body.job.id)).state, 'finished')
    t.match((await readings(s))[0], { state: 'ready', format: 'premiere' })
    const done = await s.request('PUT', NAMES(prproj), { token: s.user.token })
    t.equal(done.status, 200)
    t.same(done.body.hash.sequence_names, ['Main cut v3'])
    t.equal((await s.request('PUT', SUMMARY(prproj), { token: s.user.token })).body.hash.supported_count, 2)

    // a malformed large file: the job fails with the reason, later requests answer it at once
    const queued = await s.request('PUT', NAMES(ids['edit/broken.prproj']), { token: s.user.token })
    t.equal(queued.status, 202)
    const failed = await waitForJob(s, s.user.token, queued.body.job.id)
    t.equal(failed.state, 'failed')
    t.match(failed.error, /not a Premiere Pro project/)
    assertProblem(t, await s.request('PUT', NAMES(ids['edit/broken.prproj']), { token: s.user.token }), 422, ['id'])

    // an AAF over maxContainerBytes: 413 with the reason, no job queued
    const jobsBefore = Number((await s.runtime.db.knex('jobs').where({ type: 'editor-projects.read' }).count({ n: '*' }).first())!.n)
    const big = await s.request('PUT', NAMES(ids['edit/cut.aaf']), { token: s.user.token })
    assertProblem(t, big, 413)
    t.match(big.body.detail, /read whole into memory.*maxContainerBytes/)
    t.equal(Number((await s.runtime.db.knex('jobs').where({ type: 'editor-projects.read' }).count({ n: '*' }).first())!.n), jobsBefore)
  },
  { config: { plugins: { 'editor-projects': { inlineMaxBytes: 0, maxContainerBytes: 100_000 } } } },
)
