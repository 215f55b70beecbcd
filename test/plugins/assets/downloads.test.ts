import { execFile } from 'node:child_process'
import { appendFile, readFile, writeFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import path from 'node:path'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, waitForAsset, waitForJob, idsByName, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import { decryptProxy, filesBelow, makeStill, makeVideo, probe, readZip, timecodeOf } from '../../helpers/media.js'
import { row } from '../projects/fixtures.js'

/**
 * Once per database: prepared downloads (AssetState → /asset_status → download with state_id),
 * the highres zip, the ProRes editing proxy checked with ffprobe, and every refused state id.
 */

const run = promisify(execFile)

const prepare = (s: TestServer, token: string | undefined, id: number, kind: string, json?: unknown) => s.request('PUT', `/assets/${id}/prepare_download_${kind}`, { token, json })

onEachDatabase(t, 'downloads: highres zip, editing proxy, lowres package; foreign, unknown, unfinished, failed and expired states refused', async (t, s) => {
  const gen = path.join(s.dataDir, 'generated')
  const clip = await makeVideo(path.join(gen, 'clip.mov'), { title: 'Scene 1' })
  const still = await makeStill(path.join(gen, 'still.jpg'), { width: 320, height: 240 })
  const p = await createProject(s, s.user, { name: 'Deliveries' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const up = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }, { name: 'still.jpg', file: still }, { name: 'notes.txt', data: 'notes' }], { path: 'Shoot' })
  const { 'clip.mov': videoId, 'still.jpg': stillId, 'notes.txt': textId } = idsByName(up)
  const video = await waitForAsset(s, s.user.token, videoId)
  t.equal(video.proxy_state, 'ready')
  await waitForAsset(s, s.user.token, stillId)
  await waitForAsset(s, s.user.token, textId)

  // summaries before any editing proxy exists
  const summary = async (route: string, query: Record<string, string> = {}, token = reader.token) => (await s.request('GET', `/projects/${p.id}/${route}`, { token, query })).body.hash
  const highresBytes = (await readFile(clip)).length + (await readFile(still)).length + 5
  t.same(await summary('editing_proxy_summary'), {
    folder: '',
    video_assets: 1,
    with_editing_proxy: 0,
    editing_proxy_bytes: 0,
    assets: [{ id: videoId, path: 'Shoot/clip.mov', editing_proxy: false, editing_proxy_size: null }],
  })
  t.same(await summary('cloud_checkout_summary', { folder: 'Shoot' }), {
    folder: 'Shoot',
    editing_proxies: { count: 0, bytes: 0, missing_asset_ids: [videoId] },
    highres: { count: 3, bytes: highresBytes },
    total_bytes: highresBytes,
  })
  t.match(await summary('editing_proxy_summary', { folder: 'Elsewhere' }), { folder: 'Elsewhere', video_assets: 0, assets: [] })
  for (const route of ['editing_proxy_summary', 'cloud_checkout_summary']) {
    assertProblem(t, await s.request('GET', `/projects/${p.id}/${route}`), 401)
    assertProblem(t, await s.request('GET', `/projects/${p.id}/${route}`, { token: stranger.token }), 404)
    assertProblem(t, await s.request('GET', `/projects/99999/${route}`, { token: s.admin.token }), 404)
    assertProblem(t, await s.request('GET', `/projects/${p.id}/${route}`, { token: s.user.token, query: { folder: '../x' } }), 422, ['folder'])
    assertProblem(t, await s.request('GET', `/projects/${p.id}/${route}`, { token: s.user.token, query: { depth: '1' } }), 422, ['depth'])
  }

  // highres: prepare (a reader may), follow the job, download the zip
  const prepared = await prepare(s, s.user.token, videoId, 'highres')
  t.equal(prepared.status, 202)
  t.match(prepared.body.assetstate, { id: Number, asset_id: videoId, user_id: s.user.id, kind: 'highres', job_id: Number, state: /queued|running|finished/, expires_at: null })
  const state = prepared.body.assetstate
  const job = await waitForJob(s, s.user.token, state.job_id, { route: '/asset_status' })
  t.match(job, { id: state.job_id, action: 'assets.package', state: 'finished', asset_id: videoId, project_id: p.id })
  assertProblem(t, await s.request('GET', `/asset_status/${state.job_id}`, { token: reader.token }), 404, undefined)
  const zip = await s.request('GET', `/assets/${videoId}/download_highres`, { token: s.user.token, query: { state_id: String(state.id) } })
  t.equal(zip.status, 200)
  t.equal(zip.headers.get('content-type'), 'application/zip')
  t.match(zip.headers.get('content-disposition'), /attachment; filename="clip.zip"/)
  t.equal(Number(zip.headers.get('content-length')), zip.buffer.length)
  const entries = readZip(zip.buffer)
  t.same(entries.map((e) => [e.name, e.method]), [['clip.mov', 0]], 'one entry, stored (media is not deflated)')
  const original = await readFile(clip)
  t.ok(entries[0].data.equals(original), 'the zip holds the original bytes')
  t.equal(entries[0].crc32, crc32(original), 'with the right CRC-32')
  const head = await s.request('GET', `/assets/${videoId}/download_highres`, { token: s.user.token, query: { state_id: String(state.id) }, headers: { range: 'bytes=0-3' } })
  t.equal(head.status, 206)
  t.same([...head.buffer], [0x50, 0x4b, 0x03, 0x04], 'Range on the package')
  const across = await s.request('GET', `/assets/${videoId}/download_highres`, { token: s.user.token, query: { state_id: String(state.id) }, headers: { range: 'bytes=20-99' } })
  t.equal(across.status, 206)
  t.ok(across.buffer.equals(zip.buffer.subarray(20, 100)), 'a range across the header and the file data')
  const tail = await s.request('GET', `/assets/${videoId}/download_highres`, { token: s.user.token, query: { state_id: String(state.id) }, headers: { range: 'bytes=-30' } })
  t.ok(tail.buffer.equals(zip.buffer.subarray(-30)), 'a suffix range from the central directory')
  const zipFile = path.join(gen, 'clip.zip')
  await writeFile(zipFile, zip.buffer)
  const checked = await run('python3', ['-c', 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.testzip() or "ok", z.namelist())', zipFile])
  t.match(checked.stdout, /^ok \['clip.mov'\]/, "Python's zipfile reads it and the CRC checks out")
  const shown = await row(s, 'asset_states', { id: state.id })
  t.ok(shown.expires_at, 'a finished package expires')
  t.equal(Number(shown.size), zip.buffer.length)
  t.equal(shown.crc32, crc32(original).toString(16).padStart(8, '0'), 'the CRC-32 of the original is recorded')
  t.equal((await row(s, 'assets', { id: videoId })).crc32, shown.crc32, 'and kept on the asset for the next download')
  t.same(await filesBelow(path.join(s.dataDir, 'downloads')), [], 'no copy of the original was written')

  // a reader prepares their own; nobody else (but an administrator) may use it
  const theirs = await prepare(s, reader.token, stillId, 'highres')
  t.equal(theirs.status, 202)
  await waitForJob(s, reader.token, theirs.body.assetstate.job_id, { route: '/asset_status' })
  const stillZip = await s.request('GET', `/assets/${stillId}/download_highres`, { token: reader.token, query: { state_id: String(theirs.body.assetstate.id) } })
  t.ok(readZip(stillZip.buffer)[0].data.equals(await readFile(still)))
  const foreign = await s.request('GET', `/assets/${stillId}/download_highres`, { token: s.user.token, query: { state_id: String(theirs.body.assetstate.id) } })
  assertProblem(t, foreign, 404, ['state_id'])
  t.match(foreign.body.detail, /No highres download/)
  t.equal((await s.request('GET', `/assets/${stillId}/download_highres`, { token: s.admin.token, query: { state_id: String(theirs.body.assetstate.id) } })).status, 200)

  // refused state ids: each a 4xx naming state_id
  const get = (kind: string, asset: number, stateId: string | undefined, token = s.user.token) =>
    s.request('GET', `/assets/${asset}/download_${kind}`, { token, query: stateId === undefined ? {} : { state_id: stateId } })
  assertProblem(t, await get('highres', videoId, undefined), 422, ['state_id'])
  assertProblem(t, await get('highres', videoId, 'abc'), 422, ['state_id'])
  assertProblem(t, await get('highres', videoId, '99999'), 404, ['state_id'])
  assertProblem(t, await get('highres', stillId, String(state.id)), 404, ['state_id'])
  assertProblem(t, await get('editing_proxy', videoId, String(state.id)), 404, ['state_id'])
  assertProblem(t, await get('highres', videoId, String(state.id), stranger.token), 404)
  assertProblem(t, await s.request('GET', `/assets/${videoId}/download_highres`, { query: { state_id: String(state.id) } }), 401)
  // unfinished: a state whose package is not built yet
  const now = new Date()
  const [pending] = await s.runtime.db.knex('asset_states').insert({ asset_id: videoId, user_id: s.user.id, kind: 'highres', purged: false, created_at: now, updated_at: now }).returning('id')
  const unfinished = await get('highres', videoId, String(pending.id ?? pending))
  assertProblem(t, unfinished, 409, ['state_id'])
  t.match(unfinished.body.detail, /not ready yet/)
  // failed: its job ended in failure
  const failing = await prepare(s, s.user.token, videoId, 'highres')
  await waitForJob(s, s.user.token, failing.body.assetstate.job_id)
  await s.runtime.db.knex('jobs').where({ id: failing.body.assetstate.job_id }).update({ state: 'failed', error: 'disk gone' })
  const failed = await get('highres', videoId, String(failing.body.assetstate.id))
  assertProblem(t, failed, 409, ['state_id'])
  t.match(failed.body.detail, /failed: disk gone/)
  // expired
  await s.runtime.db.knex('asset_states').where({ id: state.id }).update({ expires_at: new Date(Date.now() - 1000) })
  const expired = await get('highres', videoId, String(state.id))
  assertProblem(t, expired, 410, ['state_id'])
  t.match(expired.body.detail, /expired/)
  // the clean-up job deletes states a week after they expired; younger ones keep answering 410
  const [old] = await s.runtime.db.knex('asset_states').insert({ asset_id: videoId, user_id: s.user.id, kind: 'highres', purged: false, size: 10, expires_at: new Date(Date.now() - 8 * 86_400_000), created_at: now, updated_at: now }).returning('id')
  const cleanup = await s.runtime.jobs.enqueue('assets.expire-downloads', {})
  t.match(await waitForJob(s, s.admin.token, cleanup.id), { state: 'finished', result: { removed: 1 } })
  t.notOk(await row(s, 'asset_states', { id: old.id ?? old }), 'a state expired over a week ago is gone')
  assertProblem(t, await get('highres', videoId, String(state.id)), 410, ['state_id'])

  // lowres: prepared, then downloaded with its state id (optional for download_lowres)
  const lowState = await prepare(s, reader.token, videoId, 'lowres')
  t.equal(lowState.status, 202)
  t.match(lowState.body.assetstate, { kind: 'lowres', user_id: reader.id })
  t.equal((await waitForJob(s, reader.token, lowState.body.assetstate.job_id, { route: '/asset_status' })).state, 'finished')
  const direct = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token })
  const viaState = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, query: { state_id: String(lowState.body.assetstate.id) } })
  t.equal(viaState.status, 200)
  t.ok(viaState.buffer.equals(direct.buffer), 'the prepared low-res is the proxy')
  t.equal(Number((await row(s, 'asset_states', { id: lowState.body.assetstate.id })).size), direct.buffer.length, 'its size recorded')
  assertProblem(t, await s.request('GET', `/assets/${videoId}/download_lowres`, { token: s.user.token, query: { state_id: String(lowState.body.assetstate.id) } }), 404, ['state_id'])
  assertProblem(t, await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, query: { state_id: String(state.id) } }), 404, ['state_id'])

  // the original changes after a highres download was prepared: the state is outdated, never a corrupt zip
  const fresh = await prepare(s, s.user.token, stillId, 'highres')
  await waitForJob(s, s.user.token, fresh.body.assetstate.job_id, { route: '/asset_status' })
  await appendFile(path.join(p.path, 'Shoot', 'still.jpg'), 'x')
  const outdated = await get('highres', stillId, String(fresh.body.assetstate.id))
  assertProblem(t, outdated, 409, ['state_id'])
  t.match(outdated.body.detail, /changed or went offline/)

  // the editing proxy: ProRes Proxy .mov keeping clip name, frame rate and start timecode, built on demand
  const editState = await prepare(s, s.user.token, videoId, 'editing_proxy')
  t.equal(editState.status, 202)
  t.match(editState.body.assetstate, { kind: 'editing_proxy' })
  t.equal((await waitForJob(s, s.user.token, editState.body.assetstate.job_id, { route: '/asset_status' })).state, 'finished')
  const edit = await get('editing_proxy', videoId, String(editState.body.assetstate.id))
  t.equal(edit.status, 200)
  t.equal(edit.headers.get('content-type'), 'video/quicktime')
  t.match(edit.headers.get('content-disposition'), /filename="clip_proxy.mov"/)
  const editFile = path.join(gen, 'edit.mov')
  await writeFile(editFile, edit.buffer)
  const ep = await probe(editFile)
  t.match(ep.format.format_name, /mov/)
  t.match(ep.streams.find((x) => x.codec_type === 'video'), { codec_name: 'prores', profile: 'Proxy', width: 320, height: 240, r_frame_rate: '25/1', pix_fmt: 'yuv422p10le' })
  t.match(ep.streams.find((x) => x.codec_type === 'audio'), { codec_name: 'pcm_s16le' })
  t.equal(timecodeOf(ep), '01:00:00:00', 'start timecode kept')
  t.equal(ep.format.tags?.title, 'Scene 1', 'clip name kept')
  t.ok(Math.abs(Number(ep.format.duration) - 2) <= 0.2, 'duration')
  // kept (encrypted) beside the other proxies
  const withEditing = (await s.request('GET', `/assets/${videoId}`, { token: s.user.token })).body.asset
  t.ok(withEditing.proxy.kinds.includes('editing'))
  const stored = await readFile(path.join(s.dataDir, 'proxies', 'v2', video.uuid.slice(0, 2), video.uuid, 'editing.mov.enc'))
  const key = (await s.request('GET', `/assets/${videoId}/proxy_key`, { token: s.user.token })).buffer
  t.ok(decryptProxy(stored, key).equals(edit.buffer), 'the stored editing proxy decrypts to the download')
  const editRange = await s.request('GET', `/assets/${videoId}/download_editing_proxy`, { token: s.user.token, query: { state_id: String(editState.body.assetstate.id) }, headers: { range: 'bytes=100-199' } })
  t.equal(editRange.status, 206)
  t.ok(editRange.buffer.equals(edit.buffer.subarray(100, 200)))

  t.same(await summary('editing_proxy_summary'), {
    folder: '',
    video_assets: 1,
    with_editing_proxy: 1,
    editing_proxy_bytes: edit.buffer.length,
    assets: [{ id: videoId, path: 'Shoot/clip.mov', editing_proxy: true, editing_proxy_size: edit.buffer.length }],
  })
  t.same(await summary('cloud_checkout_summary'), {
    folder: '',
    editing_proxies: { count: 1, bytes: edit.buffer.length, missing_asset_ids: [] },
    highres: { count: 3, bytes: highresBytes },
    total_bytes: highresBytes + edit.buffer.length,
  })

  // refusals of prepare
  assertProblem(t, await prepare(s, s.user.token, stillId, 'editing_proxy'), 409)
  assertProblem(t, await prepare(s, s.user.token, textId, 'lowres'), 409)
  for (const kind of ['highres', 'editing_proxy', 'lowres']) {
    assertProblem(t, await prepare(s, undefined, videoId, kind), 401)
    assertProblem(t, await prepare(s, stranger.token, videoId, kind), 404)
    assertProblem(t, await prepare(s, s.user.token, 99999, kind), 404)
    assertProblem(t, await prepare(s, s.user.token, videoId, kind, { compression: 'tar' }), 422, ['compression'])
  }
  assertProblem(t, await get('editing_proxy', videoId, String(editState.body.assetstate.id), stranger.token), 404)
  assertProblem(t, await get('editing_proxy', videoId, String(editState.body.assetstate.id), reader.token), 404, ['state_id'])
  // a project job is not an asset job
  const rehash = await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token })
  assertProblem(t, await s.request('GET', `/asset_status/${rehash.body.job.id}`, { token: s.user.token }), 404)
  await waitForJob(s, s.user.token, rehash.body.job.id)
})
