import { randomBytes } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import sharp from 'sharp'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, waitForAsset, waitForJob, idsByName, createProject, readerAndStranger } from '../../../core/testing/index.js'
import { decryptProxy, filesBelow, makeAudio, makeStill, makeVideo, probe, timecodeOf } from '../../helpers/media.js'
import { DEFAULT_PROXY_SETTINGS } from '../../../plugins/assets/proxies.js'

/**
 * Once per database, with tiny generated media: analysis of video, audio and stills, the proxies
 * (checked with ffprobe), their encryption at rest, the proxy key, Range on download_lowres, reencode.
 */

const near = (value: number, expected: number, tolerance = 0.2) => Math.abs(value - expected) <= tolerance

onEachDatabase(t, 'media pipeline: analysis, encrypted proxies, proxy_key, download_lowres with Range, reencode', async (t, s) => {
  const gen = path.join(s.dataDir, 'generated')
  const clip = await makeVideo(path.join(gen, 'clip.mov'), { title: 'Scene 1', reel: 'A001', creationTime: '2024-05-06T07:08:09Z' })
  const wav = await makeAudio(path.join(gen, 'tone.wav'))
  const mp3 = await makeAudio(path.join(gen, 'tone.mp3'), { channels: 1 })
  const still = await makeStill(path.join(gen, 'still.jpg'))
  const p = await createProject(s, s.user, { name: 'Pipeline' })
  const { reader, stranger } = await readerAndStranger(s, p.id)

  const uploaded = await upload(s, s.user.token, p.id, [clip, wav, mp3, still].map((file) => ({ name: path.basename(file), file })), { path: 'Media' })
  t.equal(uploaded.status, 201)
  const { 'clip.mov': videoId, 'tone.wav': wavId, 'tone.mp3': mp3Id, 'still.jpg': stillId } = idsByName(uploaded)
  const text = (await upload(s, s.user.token, p.id, [{ name: 'readme.txt', data: 'not media' }])).body.assets[0].id

  // analysis
  const video = await waitForAsset(s, s.user.token, videoId)
  t.match(video, { type: 'video', analysis_state: 'ready', proxy_state: 'ready', video: true, audio: true, image: false, clip_names: ['Scene 1'] })
  t.ok(near(video.duration, 2), 'video duration')
  t.match(video.metadata, {
    container: /mov/,
    video_codec: 'h264',
    width: 320,
    height: 240,
    frame_rate: 25,
    pixel_format: 'yuv420p',
    audio_codec: 'aac',
    audio_channels: 1,
    audio_streams: 1,
    sample_rate: 44100,
    start_timecode: '01:00:00:00',
    reel_name: 'A001',
    clip_name: 'Scene 1',
    creation_date: /^2024-05-06T07:08:09/,
  })
  const wavAsset = await waitForAsset(s, s.user.token, wavId)
  t.match(wavAsset, { type: 'audio', analysis_state: 'ready', proxy_state: 'ready', audio: true, video: false, metadata: { container: 'wav', audio_codec: 'pcm_s16le', audio_channels: 2, sample_rate: 44100 } })
  t.ok(near(wavAsset.duration, 2), 'wav duration')
  const mp3Asset = await waitForAsset(s, s.user.token, mp3Id)
  t.match(mp3Asset, { type: 'audio', proxy_state: 'ready', metadata: { container: 'mp3', audio_codec: 'mp3', audio_channels: 1 } })
  t.ok(near(mp3Asset.duration, 2, 0.3), 'mp3 duration')
  const stillAsset = await waitForAsset(s, s.user.token, stillId)
  t.match(stillAsset, { type: 'image', image: true, duration: null, proxy_state: 'ready', metadata: { container: 'jpeg', width: 640, height: 480, camera_make: 'TestCam', camera_model: 'X1', creation_date: /^2024-05-06T07:08:09/ } })
  t.match(await waitForAsset(s, s.user.token, text), { type: 'other', proxy_state: 'none', proxy_error: /no proxy is made/, proxy: { state: 'none', kinds: [] } })

  // the low-res video proxy: H.264/AAC MP4, never upscaled (540p default), faststart, the source's timecode
  t.equal(DEFAULT_PROXY_SETTINGS.height, 540)
  t.same(video.proxy.kinds.sort(), ['lowres', 'poster', 'thumbnails'])
  t.equal(video.proxy.version, 2)
  const lowres = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token })
  t.equal(lowres.status, 200)
  t.equal(lowres.headers.get('content-type'), 'video/mp4')
  t.equal(lowres.headers.get('accept-ranges'), 'bytes')
  t.equal(Number(lowres.headers.get('content-length')), lowres.buffer.length)
  t.match(lowres.headers.get('content-disposition'), /attachment; filename="clip_lowres.mp4"/)
  const plainFile = path.join(gen, 'lowres.mp4')
  await writeFile(plainFile, lowres.buffer)
  const lp = await probe(plainFile)
  t.match(lp.format.format_name, /mp4/)
  const v = lp.streams.find((x) => x.codec_type === 'video')
  const a = lp.streams.find((x) => x.codec_type === 'audio')
  t.match(v, { codec_name: 'h264', width: 320, height: 240, pix_fmt: 'yuv420p', r_frame_rate: '25/1' })
  t.match(a, { codec_name: 'aac', channels: 2 })
  t.ok(near(Number(lp.format.duration), 2), 'proxy duration')
  t.equal(timecodeOf(lp), '01:00:00:00', 'start timecode kept')
  t.ok(lowres.buffer.indexOf('moov') < lowres.buffer.indexOf('mdat'), 'faststart: the index comes before the media data')

  const inline = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, query: { inline: 'true' } })
  t.equal(inline.headers.get('content-disposition'), null)
  t.ok(inline.buffer.equals(lowres.buffer))

  // poster and thumbnail strip
  const poster = await s.request('GET', `/assets/${videoId}/proxies/poster`, { token: reader.token })
  t.equal(poster.headers.get('content-type'), 'image/jpeg')
  t.match(await sharp(poster.buffer).metadata(), { format: 'jpeg', width: 320, height: 240 })
  const strip = await s.request('GET', `/assets/${videoId}/proxies/thumbnails`, { token: reader.token })
  t.match(await sharp(strip.buffer).metadata(), { format: 'jpeg', width: 160 * DEFAULT_PROXY_SETTINGS.thumbnails, height: 120 })

  // audio: AAC proxy and a waveform
  t.same(wavAsset.proxy.kinds.sort(), ['audio', 'waveform'])
  const audio = await s.request('GET', `/assets/${wavId}/download_lowres`, { token: reader.token })
  t.equal(audio.headers.get('content-type'), 'audio/mp4')
  t.match(audio.headers.get('content-disposition'), /filename="tone_lowres.m4a"/)
  await writeFile(path.join(gen, 'audio.m4a'), audio.buffer)
  const ap = await probe(path.join(gen, 'audio.m4a'))
  t.same(ap.streams.map((x) => x.codec_type), ['audio'])
  t.match(ap.streams[0], { codec_name: 'aac', channels: 2 })
  t.ok(near(Number(ap.format.duration), 2), 'audio proxy duration')
  const mp3Proxy = await s.request('GET', `/assets/${mp3Id}/download_lowres`, { token: reader.token })
  await writeFile(path.join(gen, 'mp3.m4a'), mp3Proxy.buffer)
  t.match((await probe(path.join(gen, 'mp3.m4a'))).streams, [{ codec_name: 'aac' }])
  const wave = await s.request('GET', `/assets/${wavId}/proxies/waveform`, { token: reader.token })
  t.equal(wave.headers.get('content-type'), 'image/png')
  t.match(await sharp(wave.buffer).metadata(), { format: 'png', width: 1200, height: 200 })

  // stills: a WebP image and a poster
  t.same(stillAsset.proxy.kinds.sort(), ['image', 'poster'])
  const image = await s.request('GET', `/assets/${stillId}/download_lowres`, { token: reader.token })
  t.equal(image.headers.get('content-type'), 'image/webp')
  t.match(await sharp(image.buffer).metadata(), { format: 'webp', width: 640, height: 480 })
  const stillPoster = await s.request('GET', `/assets/${stillId}/proxies/poster`, { token: reader.token })
  t.match(await sharp(stillPoster.buffer).metadata(), { format: 'jpeg', width: 480, height: 360 })

  // at rest: encrypted below the data dir, by uuid; readable only with the asset's key
  const proxyFiles = await filesBelow(path.join(s.dataDir, 'proxies'))
  const encLowres = proxyFiles.find((f) => f.endsWith(path.join(video.uuid.slice(0, 2), video.uuid, 'lowres.mp4.enc')))
  t.ok(encLowres, 'layout 2: proxies/v2/<2 chars>/<uuid>/lowres.mp4.enc')
  t.notOk(proxyFiles.some((f) => !f.endsWith('.enc')), 'no plaintext proxy on disk')
  const encrypted = await readFile(encLowres!)
  t.equal(encrypted.length, lowres.buffer.length + 16, 'a 16-byte header, then the ciphertext')
  t.notOk(encrypted.includes('ftyp') || encrypted.includes('moov'), 'no MP4 structure visible')
  await t.rejects(probe(encLowres!), 'ffprobe cannot read the file on disk')
  const keyReply = await s.request('GET', `/assets/${videoId}/proxy_key`, { token: reader.token })
  t.equal(keyReply.status, 200)
  t.equal(keyReply.headers.get('content-type'), 'application/octet-stream')
  t.equal(keyReply.headers.get('cache-control'), 'no-store')
  t.equal(keyReply.buffer.length, 32, 'a 256-bit key')
  t.ok(decryptProxy(encrypted, keyReply.buffer).equals(lowres.buffer), 'AES-256-CTR with the header as initial counter gives the proxy')
  t.notOk(decryptProxy(encrypted, randomBytes(32)).includes('ftyp'), 'another key gives noise')
  const stillKey = await s.request('GET', `/assets/${stillId}/proxy_key`, { token: s.user.token })
  t.notOk(stillKey.buffer.equals(keyReply.buffer), 'one key per asset')
  const encImage = proxyFiles.find((f) => f.endsWith(path.join(stillAsset.uuid, 'image.webp.enc')))!
  t.ok(decryptProxy(await readFile(encImage), stillKey.buffer).equals(image.buffer))

  // HTTP Range on the decrypted proxy, across cipher block boundaries
  const size = lowres.buffer.length
  const ranges: Array<[string, number, number]> = [
    ['bytes=0-15', 0, 15],
    ['bytes=10-40', 10, 40],
    ['bytes=5-5', 5, 5],
    ['bytes=1000-', 1000, size - 1],
    ['bytes=-100', size - 100, size - 1],
    [`bytes=${size - 20}-${size + 500}`, size - 20, size - 1],
  ]
  for (const [header, start, end] of ranges) {
    const part = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, headers: { range: header } })
    t.equal(part.status, 206, header)
    t.equal(part.headers.get('content-range'), `bytes ${start}-${end}/${size}`)
    t.equal(Number(part.headers.get('content-length')), end - start + 1)
    t.ok(part.buffer.equals(lowres.buffer.subarray(start, end + 1)), `${header}: the right bytes`)
  }
  for (const header of [`bytes=${size}-`, 'bytes=-0']) {
    const refused = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, headers: { range: header } })
    assertProblem(t, refused, 416)
    t.equal(refused.headers.get('content-range'), `bytes */${size}`)
  }
  // a Range header the server does not understand is ignored (RFC 9110 §14.2): the whole body
  for (const header of ['bytes=50-10', 'bytes=-', 'items=0-1', 'bytes=abc']) {
    const whole = await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, headers: { range: header } })
    t.equal(whole.status, 200, header)
    t.ok(whole.buffer.equals(lowres.buffer), `${header}: the whole proxy`)
  }

  // who may read what
  for (const route of [`/assets/${videoId}/proxy_key`, `/assets/${videoId}/download_lowres`, `/assets/${videoId}/proxies/poster`]) {
    assertProblem(t, await s.request('GET', route), 401)
    assertProblem(t, await s.request('GET', route, { token: stranger.token }), 404)
  }
  assertProblem(t, await s.request('GET', '/assets/99999/proxy_key', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('GET', `/assets/${text}/proxy_key`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', `/assets/${text}/download_lowres`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', `/assets/${videoId}/proxies/waveform`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', `/assets/${videoId}/proxies/secrets`, { token: s.user.token }), 422, ['kind'])
  assertProblem(t, await s.request('GET', `/assets/${videoId}/download_lowres`, { token: s.user.token, query: { quality: 'high' } }), 422, ['quality'])

  // reencode: new proxies (a fresh counter block), same key
  assertProblem(t, await s.request('POST', `/assets/${videoId}/reencode`), 401)
  assertProblem(t, await s.request('POST', `/assets/${videoId}/reencode`, { token: reader.token }), 403)
  assertProblem(t, await s.request('POST', `/assets/${videoId}/reencode`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('POST', '/assets/99999/reencode', { token: s.user.token }), 404)
  assertProblem(t, await s.request('POST', `/assets/${videoId}/reencode`, { token: s.user.token, json: { height: 1080 } }), 422, ['height'])
  const reencode = await s.request('POST', `/assets/${videoId}/reencode`, { token: s.user.token })
  t.equal(reencode.status, 202)
  t.match(reencode.body.job, { id: Number, action: 'assets.proxy', asset_id: videoId })
  const job = await waitForJob(s, s.user.token, reencode.body.job.id, { route: '/asset_status' })
  t.equal(job.state, 'finished')
  t.same(job.result.proxies.sort(), ['lowres', 'poster', 'thumbnails'])
  const again = await readFile(encLowres!)
  t.notOk(again.subarray(0, 16).equals(encrypted.subarray(0, 16)), 'a new initial counter')
  const key2 = (await s.request('GET', `/assets/${videoId}/proxy_key`, { token: s.user.token })).buffer
  t.ok(key2.equals(keyReply.buffer), 'the key stays')
  const replain = decryptProxy(again, key2)
  t.ok(replain.equals((await s.request('GET', `/assets/${videoId}/download_lowres`, { token: s.user.token })).buffer))
  await writeFile(plainFile, replain)
  t.match((await probe(plainFile)).streams.find((x) => x.codec_type === 'video'), { codec_name: 'h264', height: 240 })
  t.match(await waitForAsset(s, s.user.token, videoId), { proxy_state: 'ready' })

  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('POST', `/assets/${videoId}/reencode`, { token: s.user.token }), 423)
  t.equal((await s.request('GET', `/assets/${videoId}/download_lowres`, { token: reader.token, headers: { range: 'bytes=0-3' } })).status, 206, 'reading a frozen project works')
})
