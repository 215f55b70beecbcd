import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, startMailCatcher, upload, waitFor, waitForAsset, createProject, readerAndStranger, teamWith, grant, type TestServer, type TestUser } from '../../../core/testing/index.js'
import { startReceiver, type Received } from '../../helpers/webhook-receiver.js'
import { makeStill } from '../../helpers/media.js'
import { archivedProject, diskStrategy, targetRoot, waitForArchive } from '../strategies/fixtures.js'

/**
 * The events of issue 13 end to end: each arrives as an in-app notification to the users it concerns
 * who may read its subject (never to one without read rights, never to the one who caused it), and as a
 * signed delivery to a real webhook receiver subscribed to everything.
 */

for (const name of ['MAMKIT_SMTP_HOST', 'MAMKIT_SMTP_PORT', 'MAMKIT_SMTP_SECURE', 'MAMKIT_SMTP_FROM', 'MAMKIT_PUBLIC_URL']) delete process.env[name]
const mail = await startMailCatcher()
t.teardown(() => mail.close())
const receiver = await startReceiver()
t.teardown(() => receiver.close())
const targets = await targetRoot(t)

const config = {
  config: {
    plugins: {
      identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mam@example.test', publicUrl: 'http://mam.example.test' } },
      webhooks: { allow_private_targets: true },
      strategies: { roots: [targets] },
    },
  },
}

/** `kind:subject_id` of a user's notifications, in order */
const told = async (s: TestServer, user: TestUser, kind: string) =>
  (await s.runtime.db.knex('notifications').where({ user_id: user.id, kind }).orderBy('id')).map((r: any) => ({ subject: Number(r.subject_id), payload: JSON.parse(r.payload) }))

/** waits until every outbox event was handed out and no fan-out or delivery job is pending */
async function fannedOut(s: TestServer) {
  await waitFor('the fan-out and the webhook deliveries', async () => {
    const [{ n }] = await s.runtime.db.knex('event_outbox').whereNull('dispatched_at').count({ n: '*' })
    const [{ j }] = await s.runtime.db.knex('jobs').whereIn('type', ['core.outbox-fanout', 'webhooks.deliver']).whereIn('state', ['queued', 'running']).count({ j: '*' })
    const [{ d }] = await s.runtime.db.knex('webhook_deliveries').where({ state: 'pending' }).count({ d: '*' })
    return Number(n) + Number(j) + Number(d) === 0
  })
}

/**
 * A webhook for every event to the receiver; returns what the receiver got since, of `name` about
 * `subjectId` (signatures checked by the receiver). The receiver is shared by both databases' runs.
 */
async function subscribeAll(s: TestServer) {
  const before = (await receiver.received()).length
  const hook = await s.request('POST', '/webhooks', { token: s.admin.token, json: { webhook: { url: `${receiver.url}?${s.db}`, events: ['*'] } } })
  if (hook.status !== 201) throw new Error(hook.text)
  await receiver.setSecret(hook.body.webhook.secret)
  return async (name: string, subjectId: number): Promise<Received[]> => (await receiver.received()).slice(before).filter((r) => r.name === name && r.body?.subject?.id === subjectId)
}

onEachDatabase(
  t,
  'quota.near-limit: once per crossing of 90 % of a project or team quota, to its readers and the administrators; two uploads that cross together tell it once',
  async (t, s) => {
    const delivered = await subscribeAll(s)
    const p = await createProject(s, s.user, { name: 'Filling' })
    const { reader, stranger } = await readerAndStranger(s, p.id)
    t.equal((await s.request('PUT', `/projects/${p.id}/quota`, { token: s.admin.token, json: { quota: 1000 } })).status, 200)
    const put = async (bytes: number, name: string) => {
      const r = await upload(s, s.user.token, p.id, [{ name, data: Buffer.alloc(bytes, 'x') }])
      if (r.status !== 201) throw new Error(r.text)
    }
    await put(500, 'half.bin')
    await fannedOut(s)
    t.same(await told(s, s.admin, 'quota.near-limit'), [], 'at 50 % nobody is told')
    await put(420, 'most.bin')
    await fannedOut(s)
    const adminHeard = await told(s, s.admin, 'quota.near-limit')
    t.equal(adminHeard.length, 1, 'crossing 90 % tells the administrator')
    t.match(adminHeard[0], { subject: p.id, payload: { scope: 'project', project_id: p.id, project_name: 'Filling', team_id: null, quota: 1000, used: 920, percent: 92, uploaded_by_id: s.user.id } })
    t.equal((await told(s, reader, 'quota.near-limit')).length, 1, 'and a reader of the project')
    t.equal((await told(s, s.user, 'quota.near-limit')).length, 1, 'and the uploader: the upload is no actor of the warning')
    t.same(await told(s, stranger, 'quota.near-limit'), [], 'not a user who cannot read the project')
    await put(30, 'more.bin')
    await fannedOut(s)
    t.equal((await told(s, s.admin, 'quota.near-limit')).length, 1, 'above the line already: no second warning')
    const hooks = await delivered('quota.near-limit', p.id)
    t.equal(hooks.length, 1, 'one webhook delivery')
    t.match(hooks[0], { valid: true, body: { name: 'quota.near-limit', actor_id: null, payload: { scope: 'project', percent: 92 } } })

    // a refused upload (over the quota) warns nobody and changes nothing
    const refused = await upload(s, s.user.token, p.id, [{ name: 'too-big.bin', data: Buffer.alloc(200, 'x') }])
    assertProblem(t, refused, 507)
    // usage goes down (the asset is deleted) and up again: a second crossing, a second warning
    const more = (await s.request('GET', `/projects/${p.id}/assets`, { token: s.user.token })).body.assets.find((a: any) => a.name === 'most.bin')
    const destroyed = await s.request('DELETE', '/assets/destroy', { token: s.user.token, json: { asset_ids: [more.id] } })
    t.ok(destroyed.status < 300, 'destroyed')
    await waitFor('the size to drop', async () => Number((await s.runtime.db.knex('projects').where({ id: p.id }).first('size')).size) <= 600)
    await put(400, 'again.bin')
    await fannedOut(s)
    t.equal((await told(s, s.admin, 'quota.near-limit')).length, 2, 'crossing again warns again')

    // a team quota: two uploads into two projects of one team that only together cross it: one warning
    const cutter = await s.createUser('cutter')
    const team = await teamWith(s, 'cutters', cutter)
    const a = await createProject(s, s.admin, { name: 'Team A' })
    const b = await createProject(s, s.admin, { name: 'Team B' })
    for (const q of [a, b]) await grant(s, q.id, team, { read: true, write: true })
    t.equal((await s.request('PUT', `/projects/${a.id}/quota_team/${team}`, { token: s.admin.token, json: { quota: 10_000 } })).status, 200)
    const [ua, ub] = await Promise.all([
      upload(s, cutter.token, a.id, [{ name: 'a.bin', data: Buffer.alloc(4600, 'a') }]),
      upload(s, cutter.token, b.id, [{ name: 'b.bin', data: Buffer.alloc(4600, 'b') }]),
    ])
    t.same([ua.status, ub.status], [201, 201], 'both uploads fit')
    await fannedOut(s)
    const teamHeard = await told(s, cutter, 'quota.near-limit')
    t.equal(teamHeard.length, 1, 'the team member is told once')
    t.match(teamHeard[0].payload, { scope: 'team', team_id: team, team_name: 'cutters', quota: 10_000, used: 9200, percent: 92, uploaded_by_id: cutter.id })
    t.notOk((await told(s, reader, 'quota.near-limit')).some((n) => n.payload.scope === 'team'), 'not a user outside the team')
  },
  config,
)

onEachDatabase(
  t,
  'share.received and asset.proxy-ready: the account behind the address hears of the share when it may read the asset; readers hear of the proxy',
  async (t, s) => {
    const delivered = await subscribeAll(s)
    const p = await createProject(s, s.user, { name: 'Stills' })
    const { reader, stranger } = await readerAndStranger(s, p.id)
    const knex = s.runtime.db.knex
    await knex('users').where({ id: reader.id }).update({ email: 'Reader@Example.test' })
    await knex('users').where({ id: stranger.id }).update({ email: 'stranger@example.test' })
    const still = await makeStill(path.join(s.dataDir, 'generated', 'still.jpg'))
    const up = await upload(s, s.user.token, p.id, [{ name: 'still.jpg', file: still }])
    t.equal(up.status, 201, 'uploaded')
    const image = await waitForAsset(s, s.user.token, up.body.assets[0].id)
    t.match(image, { proxy_state: 'ready' })
    await fannedOut(s)
    t.match(await told(s, reader, 'asset.proxy-ready'), [{ subject: image.id, payload: { asset_id: image.id, project_id: p.id, proxies: Array } }], 'a reader hears the proxy is ready')
    t.same(await told(s, stranger, 'asset.proxy-ready'), [], 'a stranger does not')
    t.equal((await delivered('asset.proxy-ready', image.id)).length, 1, 'delivered to the webhook')

    const toReader = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'reader@example.test' } })
    t.equal(toReader.status, 200, 'shared with the reader')
    const toStranger = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'stranger@example.test' } })
    t.equal(toStranger.status, 200)
    const toNobody = await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'someone@elsewhere.test' } })
    t.equal(toNobody.status, 200)
    // refused shares publish nothing
    assertProblem(t, await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: stranger.token, json: { email: 'reader@example.test' } }), 404)
    assertProblem(t, await s.request('PUT', `/assets/${image.id}/share_via_email`, { token: s.user.token, json: { email: 'a@b' } }), 422, ['email'])
    await fannedOut(s)
    const heard = await told(s, reader, 'share.received')
    t.equal(heard.length, 1, 'the reader behind the address (matched without regard to case) is told once')
    t.match(heard[0], { subject: image.id, payload: { asset_id: image.id, share_id: toReader.body.asset_share.id, email: 'reader@example.test', shared_by_id: s.user.id, recipient_ids: [reader.id] } })
    t.same(await told(s, stranger, 'share.received'), [], 'an address whose account cannot read the asset gets the mail, not an in-app notification')
    t.same(await told(s, s.user, 'share.received'), [], 'nor the sharer')
    t.same(await told(s, s.admin, 'share.received'), [], 'nor anybody else')
    const hooks = await delivered('share.received', image.id)
    t.equal(hooks.length, 3, 'every share is delivered to the webhook')
    t.ok(hooks.every((h) => h.valid && h.body.actor_id === s.user.id))
    t.equal(Number((await knex('event_outbox').where({ name: 'share.received' }).count({ n: '*' }))[0].n), 3, 'three events, none for the refused shares')
  },
  config,
)

onEachDatabase(
  t,
  'project.archived, project.unarchived and user.invited reach the readers (or administrators) and the webhook, once each',
  async (t, s) => {
    const delivered = await subscribeAll(s)
    const strategy = await diskStrategy(s, 'archive_strategies', path.join(targets, `${s.db}-events`))
    const { p } = await archivedProject(s, 'Vaulted', { 'a.txt': 'alpha', 'Media/b.bin': Buffer.alloc(3000, 'b') })
    const { reader, stranger } = await readerAndStranger(s, p.id)
    const archived = await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })
    t.equal(archived.status, 202, 'archiving')
    t.equal((await waitForArchive(s, p.id)).state, 'archived')
    await fannedOut(s)
    const payload = { project_id: p.id, name: 'Vaulted', archive_strategy_id: strategy.id, archive_strategy_name: strategy.name, files: 2, bytes: 3005, requested_by_id: s.user.id }
    t.match(await told(s, reader, 'project.archived'), [{ subject: p.id, payload }], 'a reader hears the project was archived')
    t.match(await told(s, s.admin, 'project.archived'), [{ subject: p.id, payload }], 'and the administrator')
    t.same(await told(s, stranger, 'project.archived'), [], 'not a stranger')
    t.same(await told(s, s.user, 'project.archived'), [], 'nor the user who archived it')
    t.match(await delivered('project.archived', p.id), [{ valid: true, body: { actor_id: s.user.id, payload } }])

    const un = await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token })
    t.equal(un.status, 202, 'unarchiving')
    t.equal((await waitForArchive(s, p.id)).state, 'online')
    await fannedOut(s)
    t.match(await told(s, reader, 'project.unarchived'), [{ subject: p.id, payload: { ...payload } }], 'a reader hears it is back online')
    t.same(await told(s, stranger, 'project.unarchived'), [])
    t.equal((await delivered('project.unarchived', p.id)).length, 1)
    t.equal(Number((await s.runtime.db.knex('event_outbox').whereIn('name', ['project.archived', 'project.unarchived']).count({ n: '*' }))[0].n), 2, 'one event each')

    // user.invited: administrators, not the one who invited, not other users
    const second = await s.createUser('second-admin', { admin: true })
    const invited = await s.request('POST', '/users/invite', { token: s.admin.token, json: { user: { username: 'ivy', email: 'ivy@example.test' } } })
    t.equal(invited.status, 201, 'invited')
    await fannedOut(s)
    t.match(await told(s, second, 'user.invited'), [{ subject: invited.body.user.id, payload: { user_id: invited.body.user.id, username: 'ivy' } }])
    t.same(await told(s, s.admin, 'user.invited'), [], 'not the administrator who invited')
    t.same(await told(s, reader, 'user.invited'), [], 'not a plain user')
    t.equal((await delivered('user.invited', invited.body.user.id)).length, 1)
  },
  config,
)
