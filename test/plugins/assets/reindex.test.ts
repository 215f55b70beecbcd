import { copyFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, waitForAsset, waitForJob, waitForJobs } from '../../../core/testing/index.js'
import { makeAudio } from '../../helpers/media.js'
import { row } from '../projects/fixtures.js'
import { paths, setup } from './fixtures.js'

/** reindex, rescan and repair */

onEachDatabase(t, 'reindex: new files become assets, vanished ones go offline, changed ones are re-analysed', async (t, s) => {
  const { p, reader, stranger } = await setup(s)
  const before = await row(s, 'assets', { project_id: p.id, path: 'a.txt' })
  await writeFile(path.join(p.path, 'Media/new.txt'), 'new')
  await writeFile(path.join(p.path, '.hidden'), 'not indexed')
  await rm(path.join(p.path, 'b.txt'))
  await writeFile(path.join(p.path, 'a.txt'), 'a, longer now')

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/reindex`), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/reindex`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/reindex`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('PUT', '/projects/99999/reindex', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/reindex`, { token: s.user.token, json: { deep: true } }), 422, ['deep'])

  const started = await s.request('PUT', `/projects/${p.id}/reindex`, { token: s.user.token })
  t.equal(started.status, 202)
  t.match(started.body.job, { id: Number, action: 'assets.reindex', project_id: p.id, state: /queued|running|finished/ })
  const job = await waitForJob(s, s.user.token, started.body.job.id)
  t.equal(job.state, 'finished')
  t.same(job.result, { files: 10, offline: 1 })
  await waitForJobs(s, { types: ['assets.analyse'] })

  const fresh = await row(s, 'assets', { project_id: p.id, path: 'Media/new.txt' })
  t.ok(fresh, 'the new file is an asset')
  t.equal(fresh.analysis_state, 'ready')
  t.notOk(await row(s, 'assets', { project_id: p.id, path: '.hidden' }), 'hidden files are skipped')
  const gone = await row(s, 'assets', { project_id: p.id, path: 'b.txt' })
  t.notOk(Boolean(gone.online), 'the vanished file is offline, its row kept')
  const changed = await row(s, 'assets', { project_id: p.id, path: 'a.txt' })
  t.equal(Number(changed.size), 13)
  t.ok(new Date(changed.metadata_changed_at) > new Date(before.metadata_changed_at), 'the changed file was analysed again')
  const untouched = await row(s, 'assets', { project_id: p.id, path: 'Media/c.txt' })
  const listed = await s.request('GET', `/projects/${p.id}/assets`, { token: reader.token, query: { online: 'false' } })
  t.same(paths(listed), ['b.txt'])

  // the file comes back: online again
  await writeFile(path.join(p.path, 'b.txt'), 'bb')
  t.equal((await waitForJob(s, s.user.token, (await s.request('PUT', `/projects/${p.id}/reindex`, { token: s.user.token })).body.job.id)).result.offline, 0)
  t.ok(Boolean((await row(s, 'assets', { id: gone.id })).online))
  t.equal((await row(s, 'assets', { id: untouched.id })).metadata_changed_at?.toString(), untouched.metadata_changed_at?.toString(), 'unchanged files are left alone')

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/reindex`, { token: s.user.token }), 423)
})

onEachDatabase(t, 'rescan re-analyses assets of unknown type, repair all of them', async (t, s) => {
  const { p, reader, stranger } = await setup(s)
  // a file that was not media when indexed is replaced by a short tone under the same name
  const tone = await row(s, 'assets', { project_id: p.id, path: 'Media/c.txt' })
  await makeAudio(path.join(s.dataDir, 'tone.wav'), { seconds: 0.5 })
  await rm(path.join(p.path, 'Media/c.txt'))
  await copyFile(path.join(s.dataDir, 'tone.wav'), path.join(p.path, 'Media/c.txt'))

  for (const route of ['rescan', 'repair']) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`), 401)
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: reader.token }), 403)
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: stranger.token }), 404)
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: s.user.token, json: { all: true } }), 422, ['all'])
  }
  const rescan = await s.request('PUT', `/projects/${p.id}/rescan`, { token: s.user.token })
  t.equal(rescan.status, 202)
  t.match(rescan.body.job, { action: 'assets.reanalyse', project_id: p.id })
  t.same((await waitForJob(s, s.user.token, rescan.body.job.id)).result, { queued: 10 }, 'every asset of unknown type')
  const audio = await waitForAsset(s, s.user.token, tone.id, (a) => a.type === 'audio' && ['ready', 'failed'].includes(a.proxy_state))
  t.match(audio, { type: 'audio', analysis_state: 'ready', audio: true, metadata: { container: 'wav', audio_codec: 'pcm_s16le', audio_channels: 2 } })
  t.ok(Math.abs(audio.duration - 0.5) < 0.1, 'duration of the tone')

  // now one asset is audio: rescan skips it, repair takes all
  t.same((await waitForJob(s, s.user.token, (await s.request('PUT', `/projects/${p.id}/rescan`, { token: s.user.token })).body.job.id)).result, { queued: 9 })
  await waitForJobs(s, { types: ['assets.analyse', 'assets.proxy'] })
  const repair = await s.request('PUT', `/projects/${p.id}/repair`, { token: s.user.token })
  t.equal(repair.status, 202)
  t.same((await waitForJob(s, s.user.token, repair.body.job.id)).result, { queued: 10 })
  await waitForJobs(s, { types: ['assets.analyse', 'assets.proxy'] })

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/rescan`, { token: s.user.token }), 423)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/repair`, { token: s.user.token }), 423)
})
