import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import path from 'node:path'
import sharp from 'sharp'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, waitForAsset, waitForJob, waitForJobs, idsByName, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import { decryptProxy, ffmpeg, makeStill, makeVideo, probe, timecodeOf } from '../../helpers/media.js'
import { exists, row } from '../projects/fixtures.js'

/**
 * Once per database: the project-wide proxy jobs (reburn_timecode, convert_proxy_structure,
 * reencode) and what destroy does to proxies.
 */

/** the first frame of a video as raw greyscale pixels */
async function firstFrame(file: string, png: string) {
  await ffmpeg(['-i', file, '-frames:v', '1', png])
  return sharp(png).greyscale().raw().toBuffer({ resolveWithObject: true })
}

/** mean absolute difference of two greyscale images inside a rectangle (fractions of the frame) */
function diff(a: Buffer, b: Buffer, width: number, height: number, [x0, y0, x1, y1]: number[]) {
  let sum = 0
  let n = 0
  for (let y = Math.floor(y0 * height); y < Math.floor(y1 * height); y++)
    for (let x = Math.floor(x0 * width); x < Math.floor(x1 * width); x++, n++) sum += Math.abs(a[y * width + x] - b[y * width + x])
  return sum / n
}

const proxyDir = (s: TestServer, uuid: string, layout: number) =>
  layout === 1 ? path.join(s.dataDir, 'proxies', uuid) : path.join(s.dataDir, 'proxies', `v${layout}`, uuid.slice(0, 2), uuid)

onEachDatabase(t, 'project proxy jobs: reburn_timecode, convert_proxy_structure (layout 1 → 2), reencode; destroy removes proxies', async (t, s) => {
  const gen = path.join(s.dataDir, 'generated')
  const clip = await makeVideo(path.join(gen, 'clip.mov'))
  const still = await makeStill(path.join(gen, 'still.jpg'), { width: 200, height: 100 })
  const p = await createProject(s, s.user, { name: 'Batch' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const up = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }, { name: 'still.jpg', file: still }])
  const { 'clip.mov': videoId, 'still.jpg': stillId } = idsByName(up)
  const video = await waitForAsset(s, s.user.token, videoId)
  const image = await waitForAsset(s, s.user.token, stillId)
  t.match([video.proxy_state, image.proxy_state], ['ready', 'ready'])

  for (const route of ['reburn_timecode', 'convert_proxy_structure', 'reencode']) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`), 401)
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: reader.token }), 403)
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: stranger.token }), 404)
    assertProblem(t, await s.request('PUT', `/projects/99999/${route}`, { token: s.admin.token }), 404)
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: s.user.token, json: { force: true } }), 422, ['force'])
  }

  // reburn_timecode: a low-res copy of each video with the running timecode burnt in
  const burn = await s.request('PUT', `/projects/${p.id}/reburn_timecode`, { token: s.user.token })
  t.equal(burn.status, 202)
  t.match(burn.body.job, { action: 'assets.project-batch', project_id: p.id })
  t.same((await waitForJob(s, s.user.token, burn.body.job.id)).result, { assets: 1 }, 'videos only')
  const burnt = await waitForAsset(s, s.user.token, videoId, (a) => a.proxy.kinds.includes('burnin'))
  const burnJob = await s.runtime.db.knex('jobs').where({ type: 'assets.burn-timecode', asset_id: videoId }).first('id')
  t.match(await waitForJob(s, s.user.token, Number(burnJob.id), { route: '/asset_status' }), { state: 'finished', success: 1, failure: 0 }, 'the asset job reports its count')
  t.same(burnt.proxy.kinds.sort(), ['burnin', 'lowres', 'poster', 'thumbnails'])
  const burnin = await s.request('GET', `/assets/${videoId}/proxies/burnin`, { token: reader.token })
  t.equal(burnin.status, 200)
  t.equal(burnin.headers.get('content-type'), 'video/mp4')
  await writeFile(path.join(gen, 'burnin.mp4'), burnin.buffer)
  const bp = await probe(path.join(gen, 'burnin.mp4'))
  t.match(bp.streams.find((x) => x.codec_type === 'video'), { codec_name: 'h264', width: 320, height: 240 })
  t.equal(timecodeOf(bp), '01:00:00:00')
  t.ok(Math.abs(Number(bp.format.duration) - 2) <= 0.2)
  await writeFile(path.join(gen, 'lowres.mp4'), (await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token })).buffer)
  const plain = await firstFrame(path.join(gen, 'lowres.mp4'), path.join(gen, 'a.png'))
  const marked = await firstFrame(path.join(gen, 'burnin.mp4'), path.join(gen, 'b.png'))
  const { width, height } = plain.info
  // the box sits centred near the bottom (drawtext y = h - th - h/20)
  t.ok(diff(plain.data, marked.data, width, height, [0.42, 0.9, 0.58, 0.94]) > 10, 'the bottom centre carries the timecode box')
  t.ok(diff(plain.data, marked.data, width, height, [0, 0, 1, 0.5]) < 5, 'the top half is the picture')

  // convert_proxy_structure: proxies in layout 1 (one flat folder) move to layout 2
  const lowresBefore = (await s.request('GET', `/assets/${stillId}/download_lowres`, { token: s.user.token })).buffer
  await mkdir(path.join(s.dataDir, 'proxies'), { recursive: true })
  await rename(proxyDir(s, image.uuid, 2), proxyDir(s, image.uuid, 1))
  await s.runtime.db.knex('assets').where({ id: stillId }).update({ proxy_version: 1 })
  t.equal((await s.request('GET', `/assets/${stillId}`, { token: s.user.token })).body.asset.proxy.version, 1)
  t.ok((await s.request('GET', `/assets/${stillId}/download_lowres`, { token: s.user.token })).buffer.equals(lowresBefore), 'layout 1 is still served')
  const convert = await s.request('PUT', `/projects/${p.id}/convert_proxy_structure`, { token: s.user.token })
  t.equal(convert.status, 202)
  t.same((await waitForJob(s, s.user.token, convert.body.job.id)).result, { assets: 1 }, 'one asset moved')
  t.equal(Number((await row(s, 'assets', { id: stillId })).proxy_version), 2)
  t.notOk(await exists(proxyDir(s, image.uuid, 1)), 'the old folder is gone')
  t.ok(await exists(path.join(proxyDir(s, image.uuid, 2), 'image.webp.enc')))
  t.ok((await s.request('GET', `/assets/${stillId}/download_lowres`, { token: s.user.token })).buffer.equals(lowresBefore), 'the same proxy, from layout 2')
  const rerun = await s.request('PUT', `/projects/${p.id}/convert_proxy_structure`, { token: s.user.token })
  t.same((await waitForJob(s, s.user.token, rerun.body.job.id)).result, { assets: 0 }, 'idempotent')

  // reencode all: new proxies for every asset
  const headerOf = async (uuid: string, name: string) => (await readFile(path.join(proxyDir(s, uuid, 2), name))).subarray(0, 16)
  const before = [await headerOf(video.uuid, 'lowres.mp4.enc'), await headerOf(image.uuid, 'image.webp.enc')]
  const reencode = await s.request('PUT', `/projects/${p.id}/reencode`, { token: s.user.token })
  t.equal(reencode.status, 202)
  t.same((await waitForJob(s, s.user.token, reencode.body.job.id)).result, { assets: 2 })
  await waitForJobs(s, { types: ['assets.proxy'] })
  t.notOk((await headerOf(video.uuid, 'lowres.mp4.enc')).equals(before[0]), 'the video proxy was rebuilt')
  t.notOk((await headerOf(image.uuid, 'image.webp.enc')).equals(before[1]), 'the image proxy was rebuilt')
  const after = await waitForAsset(s, s.user.token, videoId)
  t.equal(after.proxy_state, 'ready')
  const key = (await s.request('GET', `/assets/${videoId}/proxy_key`, { token: s.user.token })).buffer
  const lowres = decryptProxy(await readFile(path.join(proxyDir(s, video.uuid, 2), 'lowres.mp4.enc')), key)
  t.ok(lowres.subarray(4, 8).equals(Buffer.from('ftyp')))

  // destroy: the asset's proxies go with it
  const destroyed = await s.request('DELETE', '/assets/destroy', { token: s.user.token, json: { asset_ids: [videoId] } })
  t.equal(destroyed.status, 200)
  t.notOk(await exists(proxyDir(s, video.uuid, 2)), 'no orphaned proxies')
  t.ok(await exists(proxyDir(s, image.uuid, 2)), "other assets' proxies stay")

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  for (const route of ['reburn_timecode', 'convert_proxy_structure', 'reencode']) {
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/${route}`, { token: s.user.token }), 423)
  }
})
