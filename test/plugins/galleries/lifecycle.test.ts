import t from 'tap'
import { parseMail, startMailCatcher } from '../../../core/testing/index.js'
import { assertProblem, onEachDatabase, type TestServer } from '../../helpers/index.js'
import { createProject, teamWith } from '../projects/fixtures.js'

/** deleting a gallery trashes its hidden uploads project; gallery events reach the gallery's readers (notifications) */

for (const name of ['MAMKIT_SMTP_HOST', 'MAMKIT_SMTP_PORT', 'MAMKIT_SMTP_SECURE', 'MAMKIT_SMTP_FROM', 'MAMKIT_PUBLIC_URL']) delete process.env[name]
const mail = await startMailCatcher()
t.teardown(mail.close)
const withMail = { config: { plugins: { identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mam@example.test', publicUrl: 'http://mam.example.test' } } } } }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const upload = (s: TestServer, galleryId: number, name: string) => {
  const form = new FormData()
  form.append('file', new Blob([Buffer.from(`content of ${name}`)]), name)
  return s.request('POST', `/galleries/${galleryId}/inject_uploads`, { token: s.user.token, multipart: form })
}

onEachDatabase(t, 'deleting a gallery trashes its uploads project unless another gallery shows its files', async (t, s) => {
  const knex = s.runtime.db.knex
  const create = async (name: string) => (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name } } })).body.gallery
  const g = await create('With uploads')
  t.equal((await upload(s, g.id, 'one.txt')).status, 201)
  const projectId = Number((await knex('galleries').where({ id: g.id }).first()).uploads_project_id)
  t.ok(projectId)

  // a reader of the gallery may not delete it: nothing is trashed
  const reader = await s.createUser('reader')
  await s.request('PUT', `/galleries/${g.id}/teams`, { token: s.user.token, json: { team_id: await teamWith(s, 'readers', reader), read: true } })
  assertProblem(t, await s.request('DELETE', `/galleries/${g.id}`, { token: reader.token }), 403)
  t.equal((await knex('projects').where({ id: projectId }).first()).deleted ? 1 : 0, 0)

  const deleted = await s.request('DELETE', `/galleries/${g.id}`, { token: s.user.token })
  t.equal(deleted.status, 200, deleted.text)
  const trashed = await knex('projects').where({ id: projectId }).first()
  t.ok(Boolean(trashed.deleted), 'the uploads project is in the trash')
  t.match(trashed.folder, /^\.mamkit-trash\//)
  t.notOk((await s.request('GET', '/projects', { token: s.admin.token })).body.projects.some((p: any) => p.id === projectId), 'no longer listed')
  assertProblem(t, await s.request('DELETE', `/galleries/${g.id}`, { token: s.user.token }), 404)

  // an uploads project whose file another gallery shows stays
  const g2 = await create('Shared uploads')
  const up = await upload(s, g2.id, 'two.txt')
  const p2 = Number((await knex('galleries').where({ id: g2.id }).first()).uploads_project_id)
  const admins = (await s.request('POST', '/galleries', { token: s.admin.token, json: { gallery: { name: 'Admin picks' } } })).body.gallery
  t.equal((await s.request('POST', `/galleries/${admins.id}/addassets`, { token: s.admin.token, json: { asset_ids: [up.body.assets[0].id] } })).status, 201)
  t.equal((await s.request('DELETE', `/galleries/${g2.id}`, { token: s.user.token })).status, 200)
  t.notOk(Boolean((await knex('projects').where({ id: p2 }).first()).deleted), 'kept: another gallery shows its file')
  t.equal((await s.request('GET', `/galleries/${admins.id}/count_assets`, { token: s.admin.token })).body.hash.count, 1)

  // a gallery without uploads: nothing else changes
  const projects = Number((await knex('projects').where({ deleted: true }).count({ n: '*' }).first())!.n)
  const g3 = await create('No uploads')
  t.equal((await s.request('DELETE', `/galleries/${g3.id}`, { token: s.user.token })).status, 200)
  t.equal(Number((await knex('projects').where({ deleted: true }).count({ n: '*' }).first())!.n), projects)

  // two deletes at once: one 200, one 404, the project trashed once
  const g4 = await create('Raced')
  await upload(s, g4.id, 'three.txt')
  const p4 = Number((await knex('galleries').where({ id: g4.id }).first()).uploads_project_id)
  const both = await Promise.all([1, 2].map(() => s.request('DELETE', `/galleries/${g4.id}`, { token: s.user.token })))
  t.same(both.map((r) => r.status).sort(), [200, 404], both.map((r) => r.text).join(' '))
  t.ok(Boolean((await knex('projects').where({ id: p4 }).first()).deleted))
})

async function settled(s: TestServer) {
  for (let i = 0; i < 600; i++) {
    const [{ n }] = await s.runtime.db.knex('event_outbox').whereNull('dispatched_at').count({ n: '*' })
    const [{ j }] = await s.runtime.db.knex('jobs').where('type', 'core.outbox-fanout').whereIn('state', ['queued', 'running']).count({ j: '*' })
    if (Number(n) === 0 && Number(j) === 0) return
    await sleep(100)
  }
  throw new Error('the fan-out did not settle')
}

onEachDatabase(
  t,
  'gallery events reach readers of the gallery: review requested, decided, completed, shared',
  async (t, s) => {
    const knex = s.runtime.db.knex
    const kinds = async (userId: number) => (await knex('notifications').where({ user_id: userId }).orderBy('id')).map((r: any) => `${r.kind}:${r.subject_type}:${r.subject_id}`)
    const p = await createProject(s, s.user, { name: 'Events source' })
    const asset = (await s.request('POST', `/projects/${p.id}/inject_uploads`, { token: s.user.token, multipart: (() => { const f = new FormData(); f.append('file', new Blob([Buffer.from('x')]), 'a.txt'); return f })() })).body.assets[0]
    const g = (await s.request('POST', '/galleries', { token: s.user.token, json: { gallery: { name: 'Told' } } })).body.gallery
    await s.request('POST', `/galleries/${g.id}/addassets`, { token: s.user.token, json: { asset_ids: [asset.id] } })
    const ann = await s.createUser('ann')
    const bob = await s.createUser('bob')
    const outsider = await s.createUser('outsider')
    await s.request('PUT', `/galleries/${g.id}/teams`, { token: s.user.token, json: { team_id: await teamWith(s, 'gallery readers', ann, bob), read: true } })
    await settled(s)
    await knex('notifications').delete()

    const asked = await s.request('POST', `/galleries/${g.id}/review_request`, { token: s.user.token, json: { asset_ids: [asset.id], approver_ids: [ann.id], rule: 'all' } })
    t.equal(asked.status, 201, asked.text)
    await settled(s)
    t.same(await kinds(ann.id), [`review.requested:gallery:${g.id}`], 'the approver, a reader of the gallery, is told')
    t.same(await kinds(bob.id), [], 'a reader who is not an approver is not')
    t.same(await kinds(s.user.id), [], 'nor the requester who caused it')

    t.equal((await s.request('PATCH', `/assets/${asset.id}/review_request`, { token: ann.token, json: { gallery_id: g.id, status: 'approved' } })).status, 200)
    await settled(s)
    t.same(await kinds(s.user.id), [`review.status-changed:gallery:${g.id}`, `review.completed:gallery:${g.id}`], 'the requester hears of the decision and the completion')
    t.same(await kinds(ann.id), [`review.requested:gallery:${g.id}`], 'the approver is not told of their own decision')

    mail.messages.length = 0
    t.equal((await s.request('PUT', `/galleries/${g.id}/share_via_email`, { token: s.user.token, json: { email: 'client@example.test' } })).status, 201)
    t.ok(parseMail(mail.messages[0].raw).body.includes('guest_token='))
    await settled(s)
    t.ok((await kinds(bob.id)).includes(`gallery.shared:gallery:${g.id}`), 'readers hear the gallery was shared')
    t.ok((await kinds(ann.id)).includes(`gallery.shared:gallery:${g.id}`))
    t.same(await kinds(outsider.id), [], 'a user without read on the gallery hears nothing')
    t.notOk((await kinds(s.user.id)).some((k) => k.startsWith('gallery.shared')), 'nor the sharer')
  },
  withMail,
)
