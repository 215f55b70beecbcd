import { createRequire } from 'node:module'
import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { asValue } from 'awilix'
import { MediaTools } from '../../../core/media/tools.js'
import { Launcher } from '../../../core/media/launcher.js'
import { coreServices } from '../../../core/index.js'
import { assertProblem, startTestServer, upload, waitForAsset, waitForJob, idsByName, createProject } from '../../../core/testing/index.js'
import { makeStill, makeVideo, probe, timecodeOf } from '../../helpers/media.js'

/**
 * Where ffmpeg and ffprobe come from (MAMKIT_FFMPEG/MAMKIT_FFPROBE, the PATH, then the binaries of
 * the optional npm packages), that the bundled binaries really build proxies (so `npm ci` is enough
 * on a machine without ffmpeg), and what happens when a tool is missing: 503 naming it, failed jobs
 * with the reason, nothing crashes. The tools are real; "missing" is a MediaTools told to look in
 * an empty PATH and no packages.
 */

const require = createRequire(import.meta.url)
const bundled = {
  ffmpeg: (require('@ffmpeg-installer/ffmpeg') as { path: string }).path,
  ffprobe: (require('@ffprobe-installer/ffprobe') as { path: string }).path,
}
const onPath = (name: string) => (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && existsSync(path.join(dir, name)))

t.test('lookup order: environment, then PATH, then npm packages', async (t) => {
  const fromPackages = await new MediaTools({ PATH: '' }).ready()
  t.match(fromPackages.get('ffmpeg'), { source: 'package', path: bundled.ffmpeg, version: String }, 'ffmpeg from @ffmpeg-installer')
  t.match(fromPackages.get('ffprobe'), { source: 'package', path: bundled.ffprobe }, 'ffprobe from @ffprobe-installer')

  const fromEnv = await new MediaTools({ PATH: process.env.PATH, MAMKIT_FFPROBE: bundled.ffprobe }).ready()
  t.match(fromEnv.get('ffprobe'), { source: 'env', path: bundled.ffprobe }, 'MAMKIT_FFPROBE wins over the PATH')

  const badEnv = await new MediaTools({ PATH: '', MAMKIT_FFMPEG: '/nonexistent/ffmpeg' }).ready()
  t.match(badEnv.get('ffmpeg'), { source: 'package' }, 'an unusable MAMKIT_FFMPEG falls through to the next candidate')

  if (onPath('ffmpeg')) t.match((await new MediaTools({ PATH: process.env.PATH }).ready()).get('ffmpeg'), { source: 'path' }, 'the PATH comes before the packages')

  const none = await new MediaTools({ PATH: '' }, {}).ready()
  t.equal(none.get('ffmpeg'), null, 'nothing found')
  await t.rejects(none.require('ffprobe'), { status: 503, code: 'service_unavailable', message: /ffprobe is not available.*MAMKIT_FFPROBE/ }, '503 naming the tool and the setting')
})

t.test('short-lived tools run from a helper process that comes back after it dies', async (t) => {
  const launcher = new Launcher()
  t.teardown(() => launcher.close())
  t.match((await launcher.run(bundled.ffprobe, ['-hide_banner', '-version'])).stdout, /^ffprobe version/, 'the output of the program')
  const first = launcher.pid!
  t.ok(first && first !== process.pid, 'a helper process of its own')
  await t.rejects(launcher.run('/nonexistent/tool', []), { code: 'ENOENT' }, 'a missing program is an error of that run')
  await t.rejects(launcher.run(bundled.ffprobe, ['-v', 'error', 'file:/nonexistent.mov']), { message: /Command failed/ }, 'a failing program is an error of that run')

  const hanging = launcher.run('/bin/sleep', ['30'])
  await new Promise((r) => setTimeout(r, 200))
  process.kill(first, 'SIGKILL')
  await t.rejects(hanging, { launcher: true, message: /launcher process exited/ }, 'a run cut off by the helper dying fails as the launcher’s fault, not the file’s')
  t.match((await launcher.run(bundled.ffprobe, ['-hide_banner', '-version'])).stdout, /^ffprobe version/, 'the next run starts a new helper')
  t.not(launcher.pid, first, 'a new process')
  // a helper that answers nothing (stopped here) fails the run past the program's timeout plus a grace, and is replaced
  const stopped = launcher.pid!
  process.kill(stopped, 'SIGSTOP')
  await t.rejects(launcher.run('/bin/true', [], { timeoutMs: 100 }), { launcher: true, message: /did not answer within 5100 ms/ }, 'a silent helper is the launcher’s fault')
  t.match((await launcher.run(bundled.ffprobe, ['-hide_banner', '-version'])).stdout, /^ffprobe version/, 'and the next run has a new helper')
  t.not(launcher.pid, stopped, 'the stopped one was replaced')
  // an idle helper does not keep this process alive: were it referenced, the test file would never end
  const idle = new Launcher()
  await idle.run('/bin/true', [])
})

t.test('the bundled npm binaries analyse video and build a playable low-res proxy with its timecode [sqlite]', async (t) => {
  process.env.MAMKIT_FFMPEG = bundled.ffmpeg
  process.env.MAMKIT_FFPROBE = bundled.ffprobe
  t.teardown(() => {
    delete process.env.MAMKIT_FFMPEG
    delete process.env.MAMKIT_FFPROBE
  })
  const s = await startTestServer()
  t.teardown(() => s.close())
  const version = await s.request('GET', '/version', { token: s.admin.token })
  t.match(version.body.hash.tools, { ffmpeg: new RegExp(`\\(env: ${bundled.ffmpeg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`), ffprobe: /\(env: / }, 'GET /version names the tools in use')

  const clip = await makeVideo(path.join(s.dataDir, 'gen', 'bundled.mov'), { timecode: '10:00:00:00' })
  const p = await createProject(s, s.user, { name: 'Bundled tools' })
  const id = idsByName(await upload(s, s.user.token, p.id, [{ name: 'bundled.mov', file: clip }]))['bundled.mov']
  const asset = await waitForAsset(s, s.user.token, id)
  t.match(asset, { type: 'video', analysis_state: 'ready', proxy_state: 'ready', metadata: { video_codec: 'h264', width: 320, height: 240, start_timecode: '10:00:00:00' } })
  t.same(asset.proxy.kinds.sort(), ['lowres', 'poster', 'thumbnails'])

  const lowres = await s.request('GET', `/assets/${id}/download_lowres`, { token: s.user.token })
  t.equal(lowres.status, 200)
  const file = path.join(s.dataDir, 'gen', 'lowres.mp4')
  await writeFile(file, lowres.buffer)
  const probed = await probe(file)
  const video = probed.streams.find((x) => x.codec_type === 'video')
  t.match(video, { codec_name: 'h264', width: 320, height: 240, pix_fmt: 'yuv420p' }, 'H.264 yuv420p')
  t.ok(probed.streams.some((x) => x.codec_type === 'audio' && x.codec_name === 'aac'), 'AAC audio')
  t.equal(timecodeOf(probed), '10:00:00:00', 'the start timecode is kept')
})

t.test('missing tools: 503 naming the tool, failed jobs with the reason, stills still work [sqlite]', async (t) => {
  const s = await startTestServer()
  t.teardown(() => s.close())
  // under the ref's id, which the assets plugin resolves, and the legacy key, for code that still uses it
  const missing = new MediaTools({ PATH: '' }, {})
  s.runtime.container.register({ [coreServices.mediaTools.id]: asValue(missing), mediaTools: asValue(missing) })

  const gen = path.join(s.dataDir, 'gen')
  const clip = await makeVideo(path.join(gen, 'clip.mov'))
  const still = await makeStill(path.join(gen, 'still.jpg'))
  const p = await createProject(s, s.user, { name: 'No tools' })
  const uploaded = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }, { name: 'still.jpg', file: still }])
  t.equal(uploaded.status, 201, 'ingest itself needs no tool')
  const ids = idsByName(uploaded)

  const video = await waitForAsset(s, s.user.token, ids['clip.mov'])
  t.match(video, { analysis_state: 'failed', type: 'other' }, 'the analysis failed')
  const row = await s.runtime.db.knex('assets').where({ id: ids['clip.mov'] }).first()
  t.match(row.analysis_error, /ffprobe is not available/, 'with the reason')
  const stillAsset = await waitForAsset(s, s.user.token, ids['still.jpg'])
  t.match(stillAsset, { type: 'image', analysis_state: 'ready', proxy_state: 'ready' }, 'stills are read with sharp: analysed and proxied without ffmpeg')

  for (const [method, route] of [
    ['POST', `/assets/${ids['clip.mov']}/reencode`],
    ['PUT', `/projects/${p.id}/reencode`],
    ['PUT', `/projects/${p.id}/reburn_timecode`],
  ] as const) {
    const reply = await s.request(method, route, { token: s.user.token, json: {} })
    assertProblem(t, reply, 503)
    t.match(reply.body.detail, /ffmpeg is not available/, `${method} ${route} names ffmpeg`)
  }
  const [{ n }] = await s.runtime.db.knex('jobs').where({ type: 'assets.project-batch' }).orWhere({ type: 'assets.proxy', asset_id: ids['clip.mov'] }).count({ n: '*' })
  t.equal(Number(n), 0, 'no job was queued by the refused calls')

  // a video asset analysed while ffmpeg is gone: the proxy job fails with the reason
  await s.runtime.db.knex('assets').where({ id: ids['clip.mov'] }).update({ type: 'video', analysis_state: 'ready', metadata: JSON.stringify({ start_timecode: '01:00:00:00' }) })
  const job = await s.runtime.jobs.enqueue('assets.proxy', { assetId: ids['clip.mov'] }, { maxAttempts: 1 })
  const ended = await waitForJob(s, s.admin.token, job.id, { route: '/asset_status' })
  t.match(ended, { state: 'failed', error: /ffmpeg is not available/ })
  t.match(await waitForAsset(s, s.user.token, ids['clip.mov']), { proxy_state: 'failed' }, 'proxy_state says failed')
  t.equal((await s.request('GET', '/session', { token: s.user.token })).status, 200, 'the server keeps answering')
})
