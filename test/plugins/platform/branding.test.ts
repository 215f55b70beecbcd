import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import path from 'node:path'
import sharp from 'sharp'
import { assertProblem, onEachDatabase } from '../../../core/testing/index.js'

const png = (width: number, height: number, color = '#ff0000') => sharp({ create: { width, height, channels: 4, background: color } }).png().toBuffer()
const form = (field: string, data: Buffer, name = 'image.png') => {
  const f = new FormData()
  f.append(field, new Blob([new Uint8Array(data)]), name)
  return f
}

onEachDatabase(t, 'branding: uploads decoded and resized, bad files refused, DELETE resets to the shipped originals', async (t, s) => {
  const image = async (kind: string, variant = 'large') => {
    const reply = await s.request('GET', `/branding/${kind}/${variant}`)
    t.equal(reply.status, 200)
    return { ...(await sharp(reply.buffer).metadata()), type: reply.headers.get('content-type'), bytes: reply.buffer }
  }
  // the shipped originals before any upload
  const shipped = await image('logo')
  t.match(shipped, { format: 'png', width: 1024, height: 1024, type: 'image/png' })
  t.match(await image('default_background', 'medium'), { format: 'jpeg', width: 1920, height: 1080 })
  const mark = await s.request('GET', '/watermark', { token: s.user.token })
  t.match(mark.body, { watermark: { kind: 'watermark', custom: false, url: '/api/v1/branding/watermark/large' } })
  assertProblem(t, await s.request('GET', '/watermark'), 401)

  // access
  assertProblem(t, await s.request('POST', '/logo', { multipart: form('logo', await png(10, 10)) }), 401)
  assertProblem(t, await s.request('POST', '/logo', { token: s.user.token, multipart: form('logo', await png(10, 10)) }), 403)
  assertProblem(t, await s.request('DELETE', '/logo', { token: s.user.token }), 403)

  // an upload: decoded, variants made, never enlarged
  const up = await s.request('POST', '/logo', { token: s.admin.token, multipart: form('logo', await png(800, 400, '#00ff00'), 'x.gif') })
  t.equal(up.status, 201, up.text)
  t.match(up.body.logo, { kind: 'logo', custom: true, width: 800, height: 400, variants: { small: '/api/v1/branding/logo/small' } })
  t.match(await image('logo'), { width: 800, height: 400 }, 'not enlarged')
  t.match(await image('logo', 'small'), { width: 64, height: 32 })
  const bg = await s.request('POST', '/default_gallery_background', { token: s.admin.token, multipart: form('background', await png(4000, 1000)) })
  t.equal(bg.status, 201)
  t.match(await image('default_gallery_background'), { format: 'jpeg', width: 3840, height: 960 })
  const wm = await s.request('POST', '/watermark', { token: s.admin.token, multipart: form('watermark', await png(300, 100)) })
  t.equal(wm.status, 201)
  t.equal((await s.request('GET', '/watermark', { token: s.user.token })).body.watermark.custom, true)

  // refused: not an image, only starting like one, too large in bytes or pixels; the current logo stays
  const before = (await image('logo')).bytes
  assertProblem(t, await s.request('POST', '/logo', { token: s.admin.token, multipart: form('logo', Buffer.from('hello, not an image')) }), 415)
  const fake = Buffer.concat([(await png(100, 100)).subarray(0, 40), Buffer.alloc(4000, 7)])
  assertProblem(t, await s.request('POST', '/logo', { token: s.admin.token, multipart: form('logo', fake) }), 415)
  assertProblem(t, await s.request('POST', '/logo', { token: s.admin.token }), 422, ['logo'])
  const limited = await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { branding: { max_pixels: 10_000, max_bytes: 2048 } } } } })
  t.equal(limited.status, 200)
  assertProblem(t, await s.request('POST', '/logo', { token: s.admin.token, multipart: form('logo', await sharp({ create: { width: 200, height: 200, channels: 3, background: '#000' } }).png({ compressionLevel: 9 }).toBuffer()) }), 413)
  const noisy = await sharp(randomBytes(60 * 60 * 3), { raw: { width: 60, height: 60, channels: 3 } }).png().toBuffer()
  t.ok(noisy.length > 2048)
  assertProblem(t, await s.request('POST', '/logo', { token: s.admin.token, multipart: form('logo', noisy) }), 413)
  t.same((await image('logo')).bytes, before, 'refused uploads leave the logo as it was')
  t.same((await readdir(path.join(s.dataDir, 'branding', 'logo'))).filter((e) => e !== 'current').length, 1, 'and leave no files')

  // reset
  const reset = await s.request('DELETE', '/logo', { token: s.admin.token })
  t.equal(reset.status, 200)
  t.match(reset.body.logo, { custom: false })
  t.same((await image('logo')).bytes, shipped.bytes, 'the shipped original again')
  t.same(await readdir(path.join(s.dataDir, 'branding', 'logo')), [], 'the uploaded set is removed')
  assertProblem(t, await s.request('GET', '/branding/logo/huge'), 422, ['variant'])
  assertProblem(t, await s.request('GET', '/branding/secrets/large'), 422, ['kind'])
})

onEachDatabase(t, 'branding: two uploads at once leave one whole set', async (t, s) => {
  const replies = await Promise.all(['#ff0000', '#0000ff'].map(async (c) => s.request('POST', '/logo', { token: s.admin.token, multipart: form('logo', await png(500, 500, c)) })))
  t.same(replies.map((r) => r.status), [201, 201])
  const sets = (await readdir(path.join(s.dataDir, 'branding', 'logo'))).filter((e) => e !== 'current')
  t.equal(sets.length, 1, 'one set kept')
  const large = await sharp((await s.request('GET', '/branding/logo/large')).buffer).stats()
  const small = await sharp((await s.request('GET', '/branding/logo/small')).buffer).stats()
  t.same(large.dominant, small.dominant, 'variants of the same upload')
})
