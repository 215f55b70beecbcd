import { readFile, readdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import sharp from 'sharp'
import { parseMail, startMailCatcher } from '../../../core/testing/index.js'
import { assertProblem, onEachDatabase, type TestServer } from '../../helpers/index.js'
import { decryptProxy, ffmpeg, filesBelow, makeVideo, probe, upload, waitForAsset } from '../../helpers/media.js'
import { createProject } from '../projects/fixtures.js'

/**
 * Watermarked review proxies (issue 12): a guest of a gallery whose style preset has watermark text
 * gets proxies with the text burnt in by a job (ffmpeg drawtext), cached per gallery, asset, kind
 * and text, stored encrypted with the asset's key, served with Range; never the plain proxy.
 */

for (const name of ['MAMKIT_SMTP_HOST', 'MAMKIT_SMTP_PORT', 'MAMKIT_SMTP_SECURE', 'MAMKIT_SMTP_FROM', 'MAMKIT_PUBLIC_URL']) delete process.env[name]
const mail = await startMailCatcher()
t.teardown(mail.close)
const withMail = { config: { plugins: { identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mam@example.test', publicUrl: 'http://mam.example.test' } } } } }
const tokenIn = (raw: string) => /guest_token=(mg_[A-Za-z0-9_-]{43})/.exec(parseMail(raw).body)?.[1]
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function shareWith(s: TestServer, galleryId: number, email: string): Promise<string> {
  mail.messages.length = 0
  const shared = await s.request('PUT', `/galleries/${galleryId}/share_via_email`, { token: s.user.token, json: { email } })
  if (shared.status !== 201) throw new Error(`share: ${shared.status} ${shared.text}`)
  return tokenIn(mail.messages[0].raw)!
}

/**
 * A GET retried once when the socket was reset: now and then (about one run in three here) fetch
 * reuses a kept-alive connection the test server has just closed and gets ECONNRESET before the
 * request reaches the server (no request is logged). GETs are safe to repeat.
 */
async function get(s: TestServer, p: string, token: string) {
  try {
    return await s.request('GET', p, { token })
  } catch (err) {
    if ((err as { cause?: { code?: string } }).cause?.code !== 'ECONNRESET') throw err
    return s.request('GET', p, { token })
  }
}

/** the proxy as a guest gets it, once made: 202 answers while the job runs */
async function guestProxy(s: TestServer, token: string, p: string, timeoutMs = 120_000) {
  const until = Date.now() + timeoutMs
  for (;;) {
    const reply = await get(s, p, token)
    if (reply.status !== 202) return reply
    if (Date.now() > until) throw new Error(`${p} still 202: ${reply.text}`)
    await sleep(200)
  }
}

/** mean absolute difference of two RGB frames inside a box (fractions of width and height) */
function diffIn(a: { data: Buffer; width: number; height: number }, b: { data: Buffer }, box: [number, number, number, number]): number {
  const [x0, y0, x1, y1] = [Math.floor(box[0] * a.width), Math.floor(box[1] * a.height), Math.floor(box[2] * a.width), Math.floor(box[3] * a.height)]
  let sum = 0
  let n = 0
  for (let y = y0; y < y1; y++)
    for (let x = x0; x < x1; x++)
      for (let c = 0; c < 3; c++) {
        const i = (y * a.width + x) * 3 + c
        sum += Math.abs(a.data[i] - b.data[i])
        n++
      }
  return sum / n
}

async function frameOf(file: string, at = '0.5') {
  const png = `${file}.png`
  await ffmpeg(['-ss', at, '-i', file, '-frames:v', '1', png])
  const { data, info } = await sharp(png).removeAlpha().raw().toBuffer({ resolveWithObject: true })
  return { data, width: info.width, height: info.height }
}

onEachDatabase(
  t,
  'watermarked proxies: burnt in by a job, cached, encrypted, Range, plain proxy never served to the guest',
  async (t, s) => {
    const knex = s.runtime.db.knex
    const p = await createProject(s, s.user, { name: `Watermark source ${s.db}` })
    const video = await makeVideo(path.join(s.dataDir, 'gen', 'clip.mp4'), { seconds: 2, size: '320x240' })
    const up = await upload(s, s.user.token, p.id, [{ name: 'clip.mp4', file: video }])
    t.equal(up.status, 201, up.text)
    const assetId = up.body.assets[0].id as number
    t.equal((await waitForAsset(s, s.user.token, assetId)).proxy_state, 'ready')

    const preset = await s.request('POST', '/gallery_style_presets', { token: s.admin.token, json: { gallery_style_preset: { name: 'Confidential', watermark_text: 'CONFIDENTIAL', watermark_position: 'bottom_right', watermark_opacity: 0.8 } } })
    t.equal(preset.status, 201, preset.text)
    const g = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Marked', gallery_style_preset_id: preset.body.gallerystylepreset.id } } })).body.gallery
    t.equal((await s.request('POST', `/galleries/${g.id}/addassets`, { token: s.user.token, json: { asset_ids: [assetId] } })).status, 201)
    const guest = await shareWith(s, g.id, 'client@example.test')
    const url = (kind: string) => `/galleries/${g.id}/assets/${assetId}/proxies/${kind}`
    const jobCount = async () => Number((await knex('jobs').where({ type: 'galleries.watermark' }).count({ n: '*' }).first())!.n)

    // the first request queues the job and says so; the guest never gets the plain proxy meanwhile
    const first = await s.request('GET', url('lowres'), { token: guest })
    t.equal(first.status, 202, first.text)
    t.ok(first.headers.get('retry-after'))
    t.match(first.body, { job: { action: 'galleries.watermark' } })
    const marked = await guestProxy(s, guest, url('lowres'))
    t.equal(marked.status, 200, marked.text)
    t.equal(marked.headers.get('content-type'), 'video/mp4')
    t.equal(marked.headers.get('cache-control'), 'private, no-store')

    // the user (not a guest) sees the plain proxy; the guest's copy is another file
    const plain = await s.request('GET', url('lowres'), { token: s.user.token })
    t.equal(plain.status, 200)
    t.same(plain.buffer, (await s.request('GET', `/assets/${assetId}/proxies/lowres`, { token: s.user.token })).buffer, 'users stream the asset proxy')
    t.notSame(marked.buffer, plain.buffer, 'the guest copy is not the plain proxy')

    // a real video: ffprobe reads H.264 of the plain proxy's size, the audio kept, the same length
    const gen = path.join(s.dataDir, 'gen')
    await writeFile(path.join(gen, 'marked.mp4'), marked.buffer)
    await writeFile(path.join(gen, 'plain.mp4'), plain.buffer)
    const mp = await probe(path.join(gen, 'marked.mp4'))
    const pp = await probe(path.join(gen, 'plain.mp4'))
    const mv = mp.streams.find((x) => x.codec_type === 'video')
    const pv = pp.streams.find((x) => x.codec_type === 'video')
    t.equal(mv.codec_name, 'h264')
    t.same([mv.width, mv.height], [pv.width, pv.height])
    t.ok(mp.streams.some((x) => x.codec_type === 'audio'), 'audio copied')
    t.ok(Math.abs(Number(mp.format.duration) - Number(pp.format.duration)) < 0.2, `duration ${mp.format.duration} vs ${pp.format.duration}`)

    // frame grabs: the bottom-right text area differs, the top-left picture does not
    const fm = await frameOf(path.join(gen, 'marked.mp4'))
    const fp = await frameOf(path.join(gen, 'plain.mp4'))
    const inText = diffIn(fm, fp, [0.55, 0.82, 0.97, 0.96])
    const elsewhere = diffIn(fm, fp, [0.05, 0.3, 0.45, 0.6])
    t.ok(inText > 25, `the watermark area differs (mean ${inText.toFixed(1)})`)
    t.ok(elsewhere < 8, `the rest is the same picture (mean ${elsewhere.toFixed(1)})`)
    t.ok(inText > 4 * elsewhere)

    // Range on the marked copy
    const part = await s.request('GET', url('lowres'), { token: guest, headers: { range: 'bytes=0-99' } })
    t.equal(part.status, 206)
    t.same(part.buffer, marked.buffer.subarray(0, 100))

    // stored encrypted with the asset's key, beside its proxies; decrypts to what was served
    const row = await knex('gallery_watermarks').where({ gallery_id: g.id, asset_id: assetId, kind: 'lowres' }).first()
    t.match(row, { state: 'ready', build: 1 })
    t.match(JSON.parse(row.spec), { text: /^CONFIDENTIAL\nclient@example\.test · \d{4}-\d\d-\d\d$/, position: 'bottom_right', opacity: 0.8 })
    const stored = (await filesBelow(path.join(s.dataDir, 'proxies'))).find((f) => path.basename(f) === row.file)!
    t.ok(stored, 'the marked file is in the proxy folder')
    const encrypted = await readFile(stored)
    t.notOk(encrypted.subarray(0, 64).includes(Buffer.from('ftyp')), 'not plaintext at rest')
    const key = (await s.request('GET', `/assets/${assetId}/proxy_key`, { token: s.user.token })).buffer
    t.same(decryptProxy(encrypted, key), marked.buffer)

    // cached: the same guest again, no new job
    const jobs = await jobCount()
    t.equal((await s.request('GET', url('lowres'), { token: guest })).status, 200)
    t.equal(await jobCount(), jobs, 'served from the cache')

    // the poster: a still with the mark
    const poster = await guestProxy(s, guest, url('poster'))
    t.equal(poster.status, 200)
    t.equal(poster.headers.get('content-type'), 'image/jpeg')
    const plainPoster = (await s.request('GET', url('poster'), { token: s.user.token })).buffer
    const [mp1, pp1] = await Promise.all([sharp(poster.buffer).removeAlpha().raw().toBuffer({ resolveWithObject: true }), sharp(plainPoster).removeAlpha().raw().toBuffer({ resolveWithObject: true })])
    t.same([mp1.info.width, mp1.info.height], [pp1.info.width, pp1.info.height])
    t.ok(diffIn({ data: mp1.data, width: mp1.info.width, height: mp1.info.height }, { data: pp1.data }, [0.55, 0.82, 0.97, 0.96]) > 25, 'poster marked')

    // two first requests at once for the thumbnail strip start one job
    const before = await jobCount()
    const both = await Promise.all([s.request('GET', url('thumbnails'), { token: guest }), s.request('GET', url('thumbnails'), { token: guest })])
    t.same(both.map((r) => r.status).sort(), [202, 202])
    t.equal(await jobCount(), before + 1, 'one job for two racing requests')
    t.equal((await guestProxy(s, guest, url('thumbnails'))).status, 200)

    // another guest: another text (their address), another cached file
    const other = await shareWith(s, g.id, 'second@example.test')
    const second = await guestProxy(s, other, url('lowres'))
    t.equal(second.status, 200)
    t.notSame(second.buffer, marked.buffer)
    t.equal(Number((await knex('gallery_watermarks').where({ gallery_id: g.id, asset_id: assetId, kind: 'lowres' }).count({ n: '*' }).first())!.n), 2)

    // a kind the asset lacks: 404, nothing queued
    const n = await jobCount()
    assertProblem(t, await get(s, url('image'), guest), 404)
    t.equal(await jobCount(), n)

    // a re-encoded asset makes the cached copy stale: the next request builds it again from the new proxy
    t.equal((await s.request('POST', `/assets/${assetId}/reencode`, { token: s.user.token, json: {} })).status, 202)
    await sleep(50)
    await waitForAsset(s, s.user.token, assetId, (a) => a.proxy_state === 'ready')
    for (let i = 0; i < 600 && (await knex('jobs').where({ type: 'assets.proxy' }).whereIn('state', ['queued', 'running']).first()); i++) await sleep(100)
    const rebuilt = await guestProxy(s, guest, url('lowres'))
    t.equal(rebuilt.status, 200)
    t.equal((await knex('gallery_watermarks').where({ id: row.id }).first()).build, 2, 'built again')
    const files = async () => (await filesBelow(path.join(s.dataDir, 'proxies'))).filter((f) => path.basename(f).startsWith('wm-'))
    t.notOk((await files()).some((f) => path.basename(f) === row.file), 'the stale copy is removed')

    // a gallery without a watermark: its guests stream the plain proxy
    const g2 = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Unmarked' } } })).body.gallery
    await s.request('POST', `/galleries/${g2.id}/addassets`, { token: s.user.token, json: { asset_ids: [assetId] } })
    const viewer = await shareWith(s, g2.id, 'viewer@example.test')
    t.same((await s.request('GET', `/galleries/${g2.id}/assets/${assetId}/proxies/lowres`, { token: viewer })).buffer, (await s.request('GET', `/assets/${assetId}/proxies/lowres`, { token: s.user.token })).buffer)
    // the marked gallery's guest link opens nothing of the other gallery
    assertProblem(t, await s.request('GET', `/galleries/${g2.id}/assets/${assetId}/proxies/lowres`, { token: guest }), 404)

    // deleting the gallery removes its marked files and rows; the asset's own proxies stay
    t.ok((await files()).length >= 4)
    t.equal((await s.request('DELETE', `/galleries/${g.id}`, { token: s.user.token })).status, 200)
    t.same(await files(), [])
    t.equal(Number((await knex('gallery_watermarks').count({ n: '*' }).first())!.n), 0)
    t.equal((await s.request('GET', `/assets/${assetId}/proxies/lowres`, { token: s.user.token })).status, 200)
    await readdir(path.join(s.dataDir, 'proxies'))
  },
  withMail,
)

onEachDatabase(
  t,
  'watermarked proxies: a missing font is a 503 naming it, never the plain proxy',
  async (t, s) => {
    const p = await createProject(s, s.user, { name: `No font ${s.db}` })
    const video = await makeVideo(path.join(s.dataDir, 'gen', 'clip.mp4'), { seconds: 1, size: '160x120' })
    const assetId = (await upload(s, s.user.token, p.id, [{ name: 'clip.mp4', file: video }])).body.assets[0].id as number
    await waitForAsset(s, s.user.token, assetId)
    const preset = await s.request('POST', '/gallery_style_presets', { token: s.admin.token, json: { gallery_style_preset: { name: 'Mark', watermark_text: 'DRAFT' } } })
    const g = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'No font', gallery_style_preset_id: preset.body.gallerystylepreset.id } } })).body.gallery
    await s.request('POST', `/galleries/${g.id}/addassets`, { token: s.user.token, json: { asset_ids: [assetId] } })
    const guest = await shareWith(s, g.id, 'client@example.test')
    const reply = await s.request('GET', `/galleries/${g.id}/assets/${assetId}/proxies/lowres`, { token: guest })
    assertProblem(t, reply, 503)
    t.match(reply.body.detail, '/nonexistent/font.ttf')
    t.equal(Number((await s.runtime.db.knex('jobs').where({ type: 'galleries.watermark' }).count({ n: '*' }).first())!.n), 0)
    // audio has no picture: a guest may hear it unmarked (here the video's own proxy kinds lack it: 404)
    assertProblem(t, await s.request('GET', `/galleries/${g.id}/assets/${assetId}/proxies/audio`, { token: guest }), 404)
  },
  { config: { plugins: { ...withMail.config.plugins, galleries: { watermark_font: '/nonexistent/font.ttf' } } } },
)
