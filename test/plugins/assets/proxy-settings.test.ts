import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import sharp from 'sharp'
import t from 'tap'
import { startTestServer, upload, waitForAsset, idsByName, createProject } from '../../../core/testing/index.js'
import { makeVideo, probe } from '../../helpers/media.js'

/**
 * The low-res settings of `config.plugins.assets.proxy` change what the encoder makes: height,
 * a bit-rate cap, the thumbnail count. Real ffmpeg, checked with ffprobe; one database is enough
 * (nothing here is stored differently).
 */

t.test('proxy settings: height, maximum bit rate and thumbnail count [sqlite]', async (t) => {
  const s = await startTestServer({ config: { plugins: { assets: { proxy: { height: 180, maxBitrateKbps: 50, thumbnails: 4 } } } } })
  t.teardown(() => s.close())
  const gen = path.join(s.dataDir, 'gen')
  // testsrc2 at 640x480 moves a lot: uncapped it takes about 110 kbit/s at 180p, crf 23
  const clip = await makeVideo(path.join(gen, 'busy.mp4'), { seconds: 4, size: '640x480' })
  const p = await createProject(s, s.user, { name: 'Settings' })
  const id = idsByName(await upload(s, s.user.token, p.id, [{ name: 'busy.mp4', file: clip }]))['busy.mp4']
  const asset = await waitForAsset(s, s.user.token, id)
  t.equal(asset.proxy_state, 'ready')

  const lowres = path.join(gen, 'lowres.mp4')
  await writeFile(lowres, (await s.request('GET', `/assets/${id}/download_lowres`, { token: s.user.token })).buffer)
  const video = (await probe(lowres)).streams.find((x) => x.codec_type === 'video')
  t.match(video, { codec_name: 'h264', width: 240, height: 180 }, 'the configured height (width keeps the aspect)')
  // a 4 s clip starts with a full 2 s VBV buffer: the average may exceed the cap a little, never reach the uncapped rate
  t.ok(Number(video.bit_rate) <= 80_000, `bit rate ${video.bit_rate}: held near the 50 kbit/s cap (uncapped: about 110 kbit/s)`)

  const strip = (await s.request('GET', `/assets/${id}/proxies/thumbnails`, { token: s.user.token })).buffer
  const meta = await sharp(strip).metadata()
  t.match(meta, { format: 'jpeg', width: 4 * 160 }, 'four thumbnails of 160 px side by side')
})
