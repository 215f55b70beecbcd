import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import sharp from 'sharp'
import { parseMail, startMailCatcher } from '../../../core/testing/index.js'
import { assertProblem, onEachDatabase, type TestServer } from '../../helpers/index.js'
import { createProject, teamWith, writeTree } from '../projects/fixtures.js'

/** review requests and approval, email shares with guest links (real SMTP), style presets; both databases */

for (const name of ['MAMKIT_SMTP_HOST', 'MAMKIT_SMTP_PORT', 'MAMKIT_SMTP_SECURE', 'MAMKIT_SMTP_FROM', 'MAMKIT_PUBLIC_URL']) delete process.env[name]
const mail = await startMailCatcher()
t.teardown(mail.close)
const PUBLIC = 'http://mam.example.test'
const withMail = { config: { plugins: { identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mam@example.test', publicUrl: PUBLIC } } } } }
const tokenIn = (raw: string) => /guest_token=(mg_[A-Za-z0-9_-]{43})/.exec(parseMail(raw).body)?.[1]

async function setup(s: TestServer) {
  const p = await createProject(s, s.user, { name: `Review source ${s.db}` })
  const files = { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c', 'd.txt': 'd' }
  await writeTree(p.path, files)
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: Object.keys(files) } })
  const ids = Object.fromEntries(added.body.assets.map((a: any) => [a.path, a.id])) as Record<string, number>
  const g = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'For approval' } } })).body.gallery
  await s.request('POST', `/galleries/${g.id}/addassets`, { token: s.user.token, json: { asset_ids: [ids['a.txt'], ids['b.txt']] } })
  await s.request('POST', `/galleries/${g.id}/addassets`, { token: s.user.token, json: { asset_ids: [ids['c.txt']], path: 'Folder' } })
  const ann = await s.createUser('ann')
  const bob = await s.createUser('bob')
  const outsider = await s.createUser('outsider')
  const team = await teamWith(s, 'approvers', ann, bob)
  await s.request('PUT', `/galleries/${g.id}/teams`, { token: s.user.token, json: { team_id: team, read: true } })
  return { g, ids, ann, bob, outsider }
}

onEachDatabase(
  t,
  'review requests: rules all/any, folders incl. later additions, decisions, history, cancel, force, events',
  async (t, s) => {
    mail.messages.length = 0
    const knex = s.runtime.db.knex
    const { g, ids, ann, bob, outsider } = await setup(s)
    const ask = (json: unknown, token = s.user.token) => s.request('POST', `/galleries/${g.id}/review_request`, { token, json })
    const decide = (asset: number, json: unknown, token: string) => s.request('PATCH', `/assets/${asset}/review_request`, { token, json })
    const statusOf = async (asset: number) => (await s.request('GET', `/galleries/${g.id}/assets`, { token: s.user.token, query: { recursive: 'true' } })).body.assets.find((a: any) => a.id === asset).review_status

    assertProblem(t, await ask({ approver_ids: [ann.id] }), 422, ['asset_ids'])
    assertProblem(t, await ask({ asset_ids: [ids['a.txt']] }), 422, ['approver_ids'])
    assertProblem(t, await ask({ asset_ids: [ids['d.txt']], approver_ids: [ann.id] }), 422, ['asset_ids[0]'])
    assertProblem(t, await ask({ paths: ['Nope'], approver_ids: [ann.id] }), 422, ['paths'])
    assertProblem(t, await ask({ asset_ids: [ids['a.txt']], approver_ids: [outsider.id] }), 422, ['approver_ids[0]'])
    assertProblem(t, await ask({ asset_ids: [ids['a.txt']], approver_ids: [ann.id], rule: 'most' }), 422, ['rule'])
    assertProblem(t, await ask({ asset_ids: [ids['a.txt']], approver_ids: [ann.id] }, ann.token), 403)
    assertProblem(t, await ask({ asset_ids: [ids['a.txt']], approver_ids: [ann.id] }, outsider.token), 404)
    t.equal(Number((await knex('review_requests').count({ n: '*' }).first())!.n), 0, 'refused requests left nothing')
    t.equal(await statusOf(ids['a.txt']), null, 'no request, no status')

    // rule all over an asset and a folder
    const r1 = await ask({ asset_ids: [ids['a.txt']], paths: ['Folder'], approver_ids: [ann.id, bob.id], rule: 'all', comment: 'please look' })
    t.equal(r1.status, 201, r1.text)
    t.match(r1.body.reviewrequest, { rule: 'all', state: 'open', asset_ids: [ids['a.txt']], paths: ['Folder'], comment: 'please look' })
    t.equal(await statusOf(ids['a.txt']), 'pending')
    t.equal(await statusOf(ids['c.txt']), 'pending', 'a folder covers its assets')
    t.equal(await statusOf(ids['b.txt']), null)

    assertProblem(t, await decide(ids['a.txt'], { gallery_id: g.id, status: 'maybe' }, ann.token), 422, ['status'])
    assertProblem(t, await decide(ids['a.txt'], { gallery_id: g.id, status: 'approved' }, outsider.token), 404)
    assertProblem(t, await decide(ids['a.txt'], { gallery_id: g.id, status: 'approved' }, s.user.token), 403, undefined)
    assertProblem(t, await decide(ids['b.txt'], { gallery_id: g.id, status: 'approved' }, ann.token), 404)
    t.equal((await decide(ids['a.txt'], { gallery_id: g.id, status: 'approved', comment: 'good' }, ann.token)).status, 200)
    t.equal(await statusOf(ids['a.txt']), 'pending', 'all: one approval of two is not enough')
    // both decide at once on c: both decisions are kept
    const both = await Promise.all([decide(ids['c.txt'], { status: 'approved' }, ann.token), decide(ids['c.txt'], { status: 'needs_changes', comment: 'grade' }, bob.token)])
    t.same(both.map((r) => r.status), [200, 200])
    t.equal(await statusOf(ids['c.txt']), 'needs_changes')
    t.equal(Number((await knex('review_statuses').where({ asset_id: ids['c.txt'] }).count({ n: '*' }).first())!.n), 2)
    const r = await decide(ids['a.txt'], { gallery_id: g.id, status: 'approved' }, bob.token)
    t.equal(await statusOf(ids['a.txt']), 'approved', 'all: every approver approved')
    t.match(r.body.reviewrequest.approvers.find((a: any) => a.user_id === ann.id).statuses, [{ asset_id: ids['a.txt'], status: 'approved', comment: 'good' }])

    // a folder covers assets added later
    await s.request('POST', `/galleries/${g.id}/addassets`, { token: s.user.token, json: { asset_ids: [ids['d.txt']], path: 'Folder/Sub' } })
    t.equal(await statusOf(ids['d.txt']), 'pending', 'an asset added to a covered folder later is covered')
    // the request completes when every covered asset has a final status
    await decide(ids['c.txt'], { status: 'approved' }, bob.token)
    await decide(ids['d.txt'], { status: 'rejected', comment: 'no' }, ann.token)
    t.equal(await statusOf(ids['d.txt']), 'rejected', 'all: one rejection rejects')
    t.equal((await knex('review_requests').where({ id: r1.body.reviewrequest.id }).first()).state, 'completed')
    const history = (await s.request('PATCH', `/assets/${ids['d.txt']}/review_request`, { token: bob.token, json: { status: 'approved' } })).body.reviewrequest.history
    t.ok(history.filter((h: any) => h.action === 'decided').length >= 6, 'every decision is kept as history')

    // rule any on b; the requester cancels; then force
    const r2 = await ask({ asset_ids: [ids['b.txt']], approver_ids: [ann.id, bob.id], rule: 'any' })
    await decide(ids['b.txt'], { status: 'rejected' }, ann.token)
    t.equal(await statusOf(ids['b.txt']), 'pending', 'any: one rejection of two does not reject')
    await decide(ids['b.txt'], { status: 'approved' }, bob.token)
    t.equal(await statusOf(ids['b.txt']), 'approved', 'any: one approval approves')
    assertProblem(t, await s.request('DELETE', `/assets/${ids['b.txt']}/review_request`, { token: ann.token, json: { gallery_id: g.id } }), 403)
    const cancelled = await s.request('DELETE', `/assets/${ids['b.txt']}/review_request`, { token: s.user.token, json: { gallery_id: g.id } })
    t.equal(cancelled.body.reviewrequest.state, 'cancelled')
    t.equal(await statusOf(ids['b.txt']), null, 'a cancelled request no longer decides')
    t.equal(r2.status, 201)

    // force-approve (newer listing): earlier requests covering them are superseded
    assertProblem(t, await s.request('PUT', `/galleries/${g.id}/review_request`, { token: ann.token, json: { asset_ids: [ids['d.txt']] } }), 403)
    assertProblem(t, await s.request('PUT', `/galleries/${g.id}/review_request`, { token: s.user.token, json: {} }), 422, ['asset_ids'])
    const forced = await s.request('PUT', `/galleries/${g.id}/review_request`, { token: s.user.token, json: { paths: ['Folder'] } })
    t.match(forced.body.reviewrequest, { state: 'forced', closed_by_id: s.user.id })
    t.equal(await statusOf(ids['d.txt']), 'approved')
    t.equal((await knex('review_requests').where({ id: r1.body.reviewrequest.id }).first()).state, 'superseded')
    assertProblem(t, await decide(ids['d.txt'], { status: 'rejected' }, ann.token), 404)

    // older listing: POST asks every reader of the gallery, a second POST forces
    const old1 = await s.request('POST', `/assets/${ids['b.txt']}/review_request`, { token: s.user.token, json: { gallery_id: g.id } })
    t.equal(old1.status, 201, old1.text)
    t.same(old1.body.reviewrequest.approvers.map((a: any) => a.user_id).sort(), [ann.id, bob.id].sort())
    const old2 = await s.request('POST', `/assets/${ids['b.txt']}/review_request`, { token: s.user.token, json: { gallery_id: g.id } })
    t.equal(old2.body.reviewrequest.state, 'forced')
    t.equal(await statusOf(ids['b.txt']), 'approved')

    // events on the outbox
    const events = (await knex('event_outbox').select('name')).map((e: any) => e.name)
    for (const name of ['review.requested', 'review.status-changed', 'review.completed']) t.ok(events.includes(name), `${name} published`)
  },
  withMail,
)

onEachDatabase(
  t,
  'share_via_email and review links: real SMTP, guest tokens scoped, hashed, expiring, revocable, rate-limited',
  async (t, s) => {
    mail.messages.length = 0
    const knex = s.runtime.db.knex
    const { g, ids, ann } = await setup(s)
    const share = (json: unknown, token = s.user.token) => s.request('PUT', `/galleries/${g.id}/share_via_email`, { token, json })

    assertProblem(t, await s.request('PUT', `/galleries/${g.id}/share_via_email`, { json: { email: 'viewer@example.test' } }), 401)
    assertProblem(t, await share({ email: 'not-an-address' }), 422, ['email'])
    assertProblem(t, await share({ email: 'v@example.test', expires_at: '2001-01-01T00:00:00Z' }), 422, ['expires_at'])
    assertProblem(t, await share({ email: 'v@example.test', expires_at: 'soon' }), 422, ['expires_at'])
    assertProblem(t, await share({ email: 'v@example.test', allow_download: true }, ann.token), 403)
    t.equal(mail.messages.length, 0)

    const shared = await share({ email: 'viewer@example.test', message: 'Cut 2', allow_approval: true })
    t.equal(shared.status, 201, shared.text)
    t.match(shared.body.galleryshare, { email: 'viewer@example.test', allow_approval: true, allow_download: false })
    t.equal(mail.messages.length, 1)
    const token = tokenIn(mail.messages[0].raw)!
    t.ok(token, 'the mail carries the guest link')
    t.match(parseMail(mail.messages[0].raw).body, `${PUBLIC}/api/v1/galleries/${g.id}?guest_token=`)
    t.notOk(JSON.stringify(await knex('gallery_shares').select('*')).includes(token), 'only the hash is stored')

    const guest = (method: string, p: string, json?: unknown) => s.request(method, p, { token, json })
    const seen = await guest('GET', `/galleries/${g.id}`)
    t.equal(seen.status, 200)
    t.equal(seen.body.gallery.guest, true)
    t.equal((await s.request('GET', `/galleries/${g.id}/assets`, { query: { guest_token: token } })).body.assets.length, 2, 'the guest_token parameter works too')
    t.equal((await guest('GET', `/galleries/${g.id}/count_assets`)).body.hash.count, 3)
    assertProblem(t, await guest('PUT', `/galleries/${g.id}`, { gallery: { name: 'x' } }), 403)
    assertProblem(t, await guest('GET', '/projects'), 403) // wrong scope: a route that does not take guest links
    assertProblem(t, await guest('GET', `/assets/${ids['a.txt']}`), 403)
    assertProblem(t, await guest('GET', `/galleries/${g.id}/assets/${ids['a.txt']}/download`), 403)
    const other = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Other' } } })).body.gallery
    assertProblem(t, await guest('GET', `/galleries/${other.id}`), 404) // wrong gallery
    assertProblem(t, await s.request('GET', `/galleries/${g.id}`, { token: 'mg_' + 'x'.repeat(43) }), 401)

    // review links: an address as approver gets its own link, and its decision counts
    const r = await s.request('POST', `/galleries/${g.id}/review_request`, { token: s.user.token, json: { asset_ids: [ids['a.txt']], approver_emails: ['viewer@example.test', 'client@example.test'], rule: 'any' } })
    t.equal(r.status, 201, r.text)
    t.equal(mail.messages.length, 3)
    const clientToken = tokenIn(mail.messages.find((m) => m.to.includes('client@example.test'))!.raw)!
    const decided = await s.request('PATCH', `/assets/${ids['a.txt']}/review_request`, { token: clientToken, json: { status: 'approved', comment: 'ok from the client' } })
    t.equal(decided.status, 200, decided.text)
    t.match(decided.body.reviewrequest.history.find((h: any) => h.action === 'decided'), { actor_email: 'client@example.test', status: 'approved' })
    t.equal((await guest('GET', `/galleries/${g.id}/assets`)).body.assets.find((a: any) => a.id === ids['a.txt']).review_status, 'approved')

    // a view-only share cannot approve
    await share({ email: 'viewonly@example.test' })
    const viewOnly = tokenIn(mail.messages[mail.messages.length - 1].raw)!
    assertProblem(t, await s.request('PATCH', `/assets/${ids['a.txt']}/review_request`, { token: viewOnly, json: { status: 'approved' } }), 403)

    // revoked and expired links stop working
    const listed = await s.request('GET', `/galleries/${g.id}/shares`, { token: s.user.token })
    const first = listed.body.gallery_shares.find((x: any) => x.email === 'viewer@example.test' && x.purpose === 'share')
    t.ok(first.access_count > 0, 'uses are counted')
    assertProblem(t, await s.request('DELETE', `/galleries/${g.id}/shares/${first.id}`, { token: ann.token }), 403)
    t.equal((await s.request('DELETE', `/galleries/${g.id}/shares/${first.id}`, { token: s.user.token })).status, 200)
    assertProblem(t, await guest('GET', `/galleries/${g.id}`), 401)
    await knex('gallery_shares').where({ email: 'client@example.test' }).update({ expires_at: new Date(Date.now() - 1000) })
    assertProblem(t, await s.request('GET', `/galleries/${g.id}`, { token: clientToken }), 401)

    // a refused mailbox: 5xx from SMTP, and the share is gone again
    const before = Number((await knex('gallery_shares').count({ n: '*' }).first())!.n)
    const refused = await share({ email: 'nobody@example.test' })
    t.ok(refused.status >= 500, `refused mailbox: ${refused.status}`)
    t.equal(Number((await knex('gallery_shares').count({ n: '*' }).first())!.n), before, 'no link stays valid that nobody received')

    // rate limit per user and hour
    const rows = Array.from({ length: 50 }, (_, i) => ({ gallery_id: g.id, shared_by_id: s.user.id, email: `x${i}@example.test`, token_hash: String(i).padStart(64, "f"), purpose: 'share', allow_download: false, allow_approval: false, expires_at: new Date(Date.now() + 1e6), access_count: 0, created_at: new Date(), updated_at: new Date() }))
    await knex('gallery_shares').insert(rows)
    const limited = await share({ email: 'late@example.test' })
    assertProblem(t, limited, 429)
    t.equal(limited.headers.get('retry-after'), '600')
    t.ok((await knex('event_outbox').where({ name: 'gallery.shared' }).first()), 'gallery.shared published')
  },
  withMail,
)

onEachDatabase(t, 'gallery style presets: images checked by magic bytes and pixels, variants, in use is 409', async (t, s) => {
  const dir = path.join(s.dataDir, 'generated')
  await writeTree(dir, { 'x.txt': 'x' })
  const png = path.join(dir, 'logo.png')
  await sharp({ create: { width: 800, height: 400, channels: 3, background: '#336699' } }).png().toFile(png)
  const fake = path.join(dir, 'fake.png')
  await writeFile(fake, 'GIF89a not a png at all')
  const broken = path.join(dir, 'broken.png')
  const pngBytes = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#ff0000' } }).png().toBuffer()
  await writeFile(broken, pngBytes.subarray(0, 60))
  const form = async (fields: Record<string, string>, files: Record<string, string> = {}) => {
    const f = new FormData()
    for (const [k, v] of Object.entries(fields)) f.append(k, v)
    for (const [k, file] of Object.entries(files)) f.append(k, new Blob([new Uint8Array(await (await import('node:fs/promises')).readFile(file))]), path.basename(file))
    return f
  }
  const create = async (fields: Record<string, string>, files: Record<string, string> = {}, token = s.admin.token) => s.request('POST', '/gallery_style_presets', { token, multipart: await form(fields, files) })

  assertProblem(t, await create({ 'gallery_style_preset[name]': 'P' }, {}, s.user.token), 403)
  assertProblem(t, await create({ 'gallery_style_preset[name]': 'P' }, { logo: fake }), 415)
  assertProblem(t, await create({ 'gallery_style_preset[name]': 'P' }, { logo: broken }), 422)
  assertProblem(t, await s.request('POST', '/gallery_style_presets', { token: s.admin.token, json: { gallery_style_preset: { name: 'P', primary_color: 'not a colour!' } } }), 422)
  t.same((await s.request('GET', '/gallery_style_presets', { token: s.user.token })).body.gallery_style_presets, [])

  const made = await create({ 'gallery_style_preset[name]': 'Brand', 'gallery_style_preset[primary_color]': '#112233', 'gallery_style_preset[watermark_text]': 'CONFIDENTIAL', 'gallery_style_preset[watermark_opacity]': '0.3' }, { logo: png })
  t.equal(made.status, 201, made.text)
  t.match(made.body.gallerystylepreset, { name: 'Brand', primary_color: '#112233', watermark_text: 'CONFIDENTIAL', watermark_opacity: 0.3, logo: { format: 'png', width: 800, height: 400, variants: { small: { width: 128, height: 64 }, large: { width: 512, height: 256 } } } })
  const id = made.body.gallerystylepreset.id
  assertProblem(t, await s.request('POST', '/gallery_style_presets', { token: s.admin.token, json: { gallery_style_preset: { name: 'Brand' } } }), 409)
  const changed = await s.request('PUT', `/gallery_style_presets/${id}`, { token: s.admin.token, json: { gallery_style_preset: { font: 'Inter', remove_images: ['logo'] } } })
  t.match(changed.body.gallerystylepreset, { font: 'Inter', primary_color: '#112233', logo: null })

  const g = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Branded', gallery_style_preset_id: id } } })).body.gallery
  t.equal(g.gallery_style_preset.name, 'Brand')
  assertProblem(t, await s.request('DELETE', `/gallery_style_presets/${id}`, { token: s.admin.token }), 409)
  await s.request('PUT', `/galleries/${g.id}`, { token: s.user.token, json: { gallery: { gallery_style_preset_id: null } } })
  t.equal((await s.request('DELETE', `/gallery_style_presets/${id}`, { token: s.admin.token })).status, 200)
  assertProblem(t, await s.request('DELETE', `/gallery_style_presets/${id}`, { token: s.admin.token }), 404)
})
