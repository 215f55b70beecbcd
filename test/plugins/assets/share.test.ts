import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { parseMail, startMailCatcher, assertProblem, onEachDatabase, upload, waitForAsset, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import t from 'tap'
import { decryptProxy, filesBelow, makeStill, makeVideo } from '../../helpers/media.js'

/**
 * PUT /assets/:id/share_via_email and the public link it mails, all real: a real SMTP exchange
 * (smtp-server on a local port), real proxies (sharp for the still, ffmpeg for the video), both databases.
 */

// the mail settings come from the test config only, never from a developer's environment
for (const name of ['MAMKIT_SMTP_HOST', 'MAMKIT_SMTP_PORT', 'MAMKIT_SMTP_SECURE', 'MAMKIT_SMTP_FROM', 'MAMKIT_PUBLIC_URL']) delete process.env[name]

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/
const DAY = 86_400_000
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')

const mail = await startMailCatcher()
t.teardown(mail.close)
const PUBLIC = 'http://mam.example.test'
const withMail = { config: { plugins: { identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mam@example.test', publicUrl: PUBLIC } } } } }

const countShares = async (s: TestServer) => Number((await s.runtime.db.knex('asset_shares').count({ n: '*' }).first())!.n)
const linkOf = (body: string) => new RegExp(`${PUBLIC}/api/v1/asset_shares/([A-Za-z0-9_-]{43})`).exec(body)?.[1]
/** the public link, fetched without any credential */
const open = (s: TestServer, token: string, headers: Record<string, string> = {}) => s.request('GET', `/asset_shares/${token}`, { headers })

/** a project of the plain user with a still (WebP proxy) and a text file, a reader and a stranger */
async function stillProject(s: TestServer) {
  const p = await createProject(s, s.user, { name: 'Shared' })
  const { reader, stranger, readersTeam } = await readerAndStranger(s, p.id)
  const still = await makeStill(path.join(s.dataDir, 'generated', 'still.jpg'))
  const up = await upload(s, s.user.token, p.id, [{ name: 'still.jpg', file: still }, { name: 'notes.txt', data: 'plain text' }])
  if (up.status !== 201) throw new Error(up.text)
  const ids = Object.fromEntries(up.body.assets.map((a: any) => [a.name, a.id]))
  const image = await waitForAsset(s, s.user.token, ids['still.jpg'])
  const text = await waitForAsset(s, s.user.token, ids['notes.txt'])
  return { p, reader, stranger, readersTeam, image, text }
}

onEachDatabase(
  t,
  'share_via_email: real SMTP, real still proxy: mail, public link with Range, hash at rest, access count, list, expiry, revoke',
  async (t, s) => {
    mail.messages.length = 0
    const knex = s.runtime.db.knex
    const { p, reader, stranger, readersTeam, image, text } = await stillProject(s)
    t.match(image, { type: 'image', proxy_state: 'ready' })
    const share = (token: string | undefined, json: unknown, id = image.id) => s.request('PUT', `/assets/${id}/share_via_email`, { token, json })

    // refused before anything is created or mailed
    assertProblem(t, await share(undefined, { email: 'viewer@example.test' }), 401)
    assertProblem(t, await share(stranger.token, { email: 'viewer@example.test' }), 404)
    assertProblem(t, await share(s.user.token, { email: 'viewer@example.test' }, 99999), 404)
    for (const email of ['not-an-address', 'a@b', 'a@example.test,b@example.test', 'A <a@example.test>', 'a b@example.test', `${'x'.repeat(250)}@example.test`, ''])
      assertProblem(t, await share(s.user.token, { email }), 422, ['email'])
    assertProblem(t, await share(s.user.token, {}), 422, ['email'])
    for (const days of [0, 31, 1.5, 'seven'])
      assertProblem(t, await share(s.user.token, { email: 'viewer@example.test', expires_in_days: days }), 422, ['expires_in_days'])
    assertProblem(t, await share(s.user.token, { email: 'viewer@example.test', message: 'x'.repeat(2001) }), 422, ['message'])
    assertProblem(t, await share(s.user.token, { email: 'viewer@example.test', token_hash: 'x' }), 422, ['token_hash'])
    assertProblem(t, await share(s.user.token, { share: { email: 'viewer@example.test' } }), 422, ['email', 'share'])
    const other = await share(s.user.token, { email: 'viewer@example.test' }, text.id)
    assertProblem(t, other, 409)
    t.match(other.body.detail, /type other.*no playable proxy/, 'the 409 names why')
    t.equal(await countShares(s), 0, 'no share created by a refused request')
    t.equal(mail.messages.length, 0, 'no mail sent for a refused request')

    // a read-only user shares (sharing is a read), even while the project is frozen
    t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200, 'project frozen')
    const before = Date.now()
    const shared = await share(reader.token, { email: 'viewer@example.test', message: 'Final grade — please check the colours.\nThanks!' })
    t.equal(shared.status, 200)
    const first = shared.body.asset_share
    t.same(Object.keys(shared.body), ['asset_share'], 'one root key')
    t.match(first, { id: Number, asset_id: image.id, email: 'viewer@example.test', message: 'Final grade — please check the colours.\nThanks!', expires_at: ISO, created_at: ISO, revoked_at: null, access_count: 0, shared_by: { id: reader.id, username: 'reader' } })
    const expires = new Date(first.expires_at).getTime()
    t.ok(expires >= before + 7 * DAY - 1000 && expires <= Date.now() + 7 * DAY + 1000, 'expires in 7 days by default')

    // the mail: to the address, names who shared what, carries the link, the expiry and the message
    t.equal(mail.messages.length, 1, 'one message reached the SMTP server')
    t.same(mail.messages[0].to, ['viewer@example.test'], 'envelope recipient')
    const { headers, body } = parseMail(mail.messages[0].raw)
    t.match(headers.to, 'viewer@example.test')
    t.match(headers.subject, /reader shared "still\.jpg" with you/)
    t.match(body, 'reader shared "still.jpg" with you.', 'who shared what')
    t.match(body, 'Final grade — please check the colours.\nThanks!', 'the message, as plain text')
    t.match(body, `until ${first.expires_at}`, 'the expiry')
    const token = linkOf(body)
    t.ok(token, 'the link uses the public URL and a 43-character base64url token')

    // at rest only the hash; the answer carries neither
    const row = await knex('asset_shares').where({ id: first.id }).first()
    t.equal(row.token_hash, sha256(token!), 'SHA-256 of the token stored')
    t.notOk(JSON.stringify(row).includes(token!), 'the token is nowhere in the row')
    t.notOk(shared.text.includes(token!) || shared.text.includes(row.token_hash), 'neither token nor hash in the JSON answer')
    t.equal(Number(row.shared_by_id), reader.id)

    // the link, anonymously: exactly the bytes of download_lowres, inline, with Range
    const lowres = await s.request('GET', `/assets/${image.id}/download_lowres`, { token: s.user.token })
    t.equal(lowres.status, 200)
    const viewed = await open(s, token!)
    t.equal(viewed.status, 200)
    t.equal(viewed.headers.get('content-type'), 'image/webp')
    t.equal(viewed.headers.get('accept-ranges'), 'bytes')
    t.equal(viewed.headers.get('content-disposition'), null, 'inline: no attachment header')
    t.equal(viewed.headers.get('cache-control'), 'private, no-store')
    t.equal(viewed.headers.get('referrer-policy'), 'no-referrer')
    t.ok(viewed.buffer.equals(lowres.buffer), 'the same bytes as download_lowres')
    const part = await open(s, token!, { range: 'bytes=10-99' })
    t.equal(part.status, 206)
    t.equal(part.headers.get('content-range'), `bytes 10-99/${lowres.buffer.length}`)
    t.ok(part.buffer.equals(lowres.buffer.subarray(10, 100)), 'the requested bytes')
    assertProblem(t, await open(s, token!, { range: `bytes=${lowres.buffer.length}-` }), 416)
    const head = await open(s, token!, { range: 'bytes=0-9' })
    t.equal(head.status, 206)

    // access count: requests from the start count, a player's later ranges do not
    const listed = await s.request('GET', `/assets/${image.id}/shares`, { token: stranger.token })
    assertProblem(t, listed, 404)
    const list1 = await s.request('GET', `/assets/${image.id}/shares`, { token: s.user.token })
    t.equal(list1.status, 200)
    t.match(list1.body.asset_shares, [{ id: first.id, access_count: 2, last_accessed_at: ISO }])
    t.notOk(list1.text.includes(token!) || list1.text.includes(row.token_hash), 'the list carries no token or hash')

    // a form body (strings), a custom expiry; the list is newest first
    const second = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, form: { email: 'client@example.test', expires_in_days: '3' } })
    t.equal(second.status, 200)
    t.match(second.body.asset_share, { email: 'client@example.test', message: null, shared_by: { id: s.user.id, username: 'editor' } })
    t.ok(Math.abs(new Date(second.body.asset_share.expires_at).getTime() - (Date.now() + 3 * DAY)) < 60_000, 'expires in 3 days')
    const token2 = linkOf(parseMail(mail.messages[1].raw).body)!
    t.not(token2, token, 'a new token per share')
    const list2 = await s.request('GET', `/assets/${image.id}/shares`, { token: reader.token })
    t.same(list2.body.asset_shares.map((x: any) => x.id), [second.body.asset_share.id, first.id], 'newest first')
    t.equal(list2.headers.get('x-total-count'), '2')
    assertProblem(t, await s.request('GET', `/assets/${image.id}/shares`), 401)

    // tokens that are malformed or unknown are all the same 404
    for (const bad of ['abc', `${token}x`, 'A'.repeat(43), token!.slice(0, 42) + '+'])
      assertProblem(t, await open(s, bad), 404)

    // expiry: 410
    await knex('asset_shares').where({ id: second.body.asset_share.id }).update({ expires_at: new Date(Date.now() - 60_000) })
    const expired = await open(s, token2)
    assertProblem(t, expired, 410)
    t.match(expired.body.detail, /expired/)

    // revoke: a stranger learns nothing, a read-only user who did not share may not, the sharer may
    const reader2 = await s.createUser('reader2')
    t.equal((await s.request('POST', `/teams/${readersTeam}/users/${reader2.id}`, { token: s.admin.token })).status, 200)
    const revokeFirst = (token?: string) => s.request('DELETE', `/assets/${image.id}/shares/${first.id}`, { token })
    assertProblem(t, await revokeFirst(), 401)
    assertProblem(t, await revokeFirst(stranger.token), 404)
    assertProblem(t, await revokeFirst(reader2.token), 403)
    assertProblem(t, await s.request('DELETE', `/assets/${text.id}/shares/${first.id}`, { token: reader.token }), 404, undefined)
    assertProblem(t, await s.request('DELETE', `/assets/${image.id}/shares/99999`, { token: reader.token }), 404)
    t.equal((await open(s, token!)).status, 200, 'refused revokes left the link working')
    const revoked = await revokeFirst(reader.token)
    t.equal(revoked.status, 200)
    t.match(revoked.body.asset_share, { id: first.id, revoked_at: ISO })
    const gone = await open(s, token!)
    assertProblem(t, gone, 410)
    t.match(gone.body.detail, /revoked/)
    const again = await revokeFirst(s.user.token)
    t.equal(again.status, 200)
    t.equal(again.body.asset_share.revoked_at, revoked.body.asset_share.revoked_at, 'a second revoke keeps the first time')
    // one with write on the project revokes another user's share, frozen or not
    const third = await share(reader.token, { email: 'third@example.test', expires_in_days: 30 })
    t.equal(third.status, 200)
    const token3 = linkOf(parseMail(mail.messages[2].raw).body)!
    t.equal((await open(s, token3)).status, 200)
    t.equal((await s.request('DELETE', `/assets/${image.id}/shares/${third.body.asset_share.id}`, { token: s.user.token })).status, 200, 'the project writer revokes')
    assertProblem(t, await open(s, token3), 410)

    // the user who shared is deleted: their shares go with them (cascade)
    const fifth = await share(reader2.token, { email: 'fifth@example.test' })
    t.equal(fifth.status, 200)
    const token5 = linkOf(parseMail(mail.messages[3].raw).body)!
    t.equal((await s.request('DELETE', `/users/${reader2.id}`, { token: s.admin.token })).status, 200)
    assertProblem(t, await open(s, token5), 404)
    t.equal((await knex('asset_shares').where({ id: fifth.body.asset_share.id })).length, 0, 'the share row went with its user (cascade)')

    // the asset goes: its shares go with it, the link is an unknown one
    const fourth = await share(s.user.token, { email: 'fourth@example.test' })
    const token4 = linkOf(parseMail(mail.messages[4].raw).body)!
    await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })
    t.equal((await s.request('DELETE', '/assets/destroy', { token: s.user.token, json: { asset_ids: [image.id] } })).status, 200)
    assertProblem(t, await open(s, token4), 404)
    t.equal((await knex('asset_shares').where({ id: fourth.body.asset_share.id })).length, 0, 'the share row went with the asset (cascade)')
  },
  withMail,
)

onEachDatabase(
  t,
  'share_via_email: the real SMTP server refuses the recipient: 503, no share row left, nothing delivered',
  async (t, s) => {
    mail.messages.length = 0
    const { image } = await stillProject(s)
    const refused = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'nobody@example.test' } })
    assertProblem(t, refused, 503)
    t.match(refused.body.detail, /SMTP server did not take the message/)
    t.equal(await countShares(s), 0, 'the share row was removed again')
    t.equal(mail.messages.length, 0, 'nothing delivered')

    // fifty shares within the hour: the next one waits (the server mails any address on a user's word)
    const now = new Date()
    await s.runtime.db.knex('asset_shares').insert(
      Array.from({ length: 50 }, (_, i) => ({ asset_id: image.id, shared_by_id: s.user.id, email: 'x@example.test', token_hash: String(i).padStart(64, '0'), expires_at: now, access_count: 0, created_at: now, updated_at: now })),
    )
    const limited = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'viewer@example.test' } })
    assertProblem(t, limited, 429)
    t.ok(Number(limited.headers.get('retry-after')) > 0, 'Retry-After')
    t.equal(await countShares(s), 50, 'no share created')
    t.equal((await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.admin.token, json: { email: 'nobody@example.test' } })).status, 503, 'another user is not limited by it')
  },
  withMail,
)

onEachDatabase(t, 'share_via_email: no SMTP server configured is 503 and creates nothing (real still proxy)', async (t, s) => {
  const { image } = await stillProject(s)
  const reply = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'viewer@example.test' } })
  assertProblem(t, reply, 503)
  t.match(reply.body.detail, /SMTP/, 'the body says what is missing')
  t.equal(await countShares(s), 0, 'no share created')
})

onEachDatabase(
  t,
  'share_via_email: a shared video plays as video/mp4 with Range (real ffmpeg proxy, real SMTP)',
  async (t, s) => {
    mail.messages.length = 0
    const p = await createProject(s, s.user, { name: 'Clips' })
    const clip = await makeVideo(path.join(s.dataDir, 'generated', 'clip.mov'))
    const up = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }])
    const id = up.body.assets[0].id
    // a share while the proxy is still being made is a conflict naming the state
    const early = await s.request('PUT', `/assets/${id}/share_via_email`, { token: s.user.token, json: { email: 'viewer@example.test' } })
    if (early.status === 409) t.match(early.body.detail, /no playable proxy yet \(analysis_state: \w+, proxy_state: (pending|processing)\)/, 'the 409 names the proxy state')
    else t.equal(early.status, 200, 'the encode was already done (a fast machine)')
    const video = await waitForAsset(s, s.user.token, id)
    t.match(video, { type: 'video', proxy_state: 'ready' })

    mail.messages.length = 0
    const shared = await s.request('PUT', `/assets/${id}/share_via_email`, { token: s.user.token, json: { email: 'viewer@example.test', expires_in_days: 1 } })
    t.equal(shared.status, 200)
    const token = linkOf(parseMail(mail.messages[0].raw).body)!
    t.ok(token, 'the mail carries the link')

    // the reference: the stored proxy decrypted with the asset's key
    const key = (await s.request('GET', `/assets/${id}/proxy_key`, { token: s.user.token })).buffer
    const enc = (await filesBelow(path.join(s.dataDir, 'proxies'))).find((f) => f.endsWith(path.join(video.uuid, 'lowres.mp4.enc')))!
    const plain = decryptProxy(await readFile(enc), key)

    const whole = await open(s, token)
    t.equal(whole.status, 200)
    t.equal(whole.headers.get('content-type'), 'video/mp4')
    t.equal(Number(whole.headers.get('content-length')), plain.length)
    t.ok(whole.buffer.equals(plain), 'the decrypted low-res MP4')
    const mid = Math.floor(plain.length / 2)
    const range = await open(s, token, { range: `bytes=${mid}-${mid + 4095}` })
    t.equal(range.status, 206)
    t.equal(range.headers.get('content-range'), `bytes ${mid}-${mid + 4095}/${plain.length}`)
    t.ok(range.buffer.equals(plain.subarray(mid, mid + 4096)), 'a range from the middle (CTR decrypts without reading what comes before)')
    const tail = await open(s, token, { range: 'bytes=-100' })
    t.equal(tail.status, 206)
    t.ok(tail.buffer.equals(plain.subarray(plain.length - 100)), 'a suffix range')
    const row = await s.runtime.db.knex('asset_shares').where({ id: shared.body.asset_share.id }).first()
    t.equal(Number(row.access_count), 1, 'one viewing counted, its ranges not')
  },
  withMail,
)
