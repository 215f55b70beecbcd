import t from 'tap'
import { assertProblem, onEachDatabase, startMailCatcher, parseMail, createProject, readerAndStranger, waitFor, type TestServer, type TestUser } from '../../../core/testing/index.js'
import { notificationServices } from '../../../plugins/notifications/index.js'
import { FANOUT_JOB } from '../../../core/outbox.js'

/** the outbox is empty and no fan-out or email job is pending */
async function settled(s: TestServer) {
  await waitFor('the fan-out', async () => {
    const [{ n }] = await s.runtime.db.knex('event_outbox').whereNull('dispatched_at').count({ n: '*' })
    const [{ j }] = await s.runtime.db.knex('jobs').whereIn('type', [FANOUT_JOB]).whereIn('state', ['queued', 'running']).count({ j: '*' })
    return Number(n) === 0 && Number(j) === 0
  })
}

async function upload(s: TestServer, user: TestUser, projectId: number, names: string[]) {
  const form = new FormData()
  for (const name of names) form.append('file', new Blob([`content of ${name}`]), name)
  const reply = await s.request('POST', `/projects/${projectId}/inject_uploads`, { token: user.token, multipart: form })
  if (reply.status !== 200 && reply.status !== 201) throw new Error(`upload: ${reply.status} ${reply.text}`)
  return reply.body.assets as Array<{ id: number; name: string }>
}

const mail = await startMailCatcher()
t.teardown(() => mail.close())

const rowsOf = async (s: TestServer, userId: number) => s.runtime.db.knex('notifications').where({ user_id: userId }).orderBy('id')

onEachDatabase(t, 'notifications: who hears an event, the list, read state and paging', async (t, s) => {
  const routes: Array<[string, string]> = [
    ['GET', '/notifications'], ['GET', '/notifications/1'], ['POST', '/notifications/1/toggle_read'], ['POST', '/notification/mark_all_read'],
    ['GET', '/notification_settings'], ['PUT', '/notification_settings'], ['GET', '/notification_settings/defaults'], ['PUT', '/notification_settings/defaults'],
  ]
  for (const [method, path] of routes) assertProblem(t, await s.request(method, path), 401)
  assertProblem(t, await s.request('GET', '/notification_settings/defaults', { token: s.user.token }), 403)
  assertProblem(t, await s.request('PUT', '/notification_settings/defaults', { token: s.user.token, json: { notification_settings: { 'job.failed': 'off' } } }), 403)

  const p = await createProject(s, s.user, { name: 'Told' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  await settled(s)
  // project.created concerns the creator's team and the administrators; the creator caused it
  t.same((await rowsOf(s, s.admin.id)).map((r: any) => r.kind), ['project.created'], 'the administrator hears of the new project')
  t.same(await rowsOf(s, s.user.id), [], 'not the user who created it')

  const assets = await upload(s, s.user, p.id, ['one.txt', 'two.txt', 'three.txt'])
  await settled(s)
  const readerRows = await rowsOf(s, reader.id)
  t.equal(readerRows.length, 3, 'a reader of the project hears of each upload')
  t.same(readerRows.map((r: any) => Number(r.subject_id)).sort(), assets.map((a) => a.id).sort())
  t.same(await rowsOf(s, stranger.id), [], 'a user who cannot read the project hears nothing')
  t.same((await rowsOf(s, s.user.id)).filter((r: any) => r.kind === 'asset.ingested'), [], 'nor the uploader')

  // the list: newest first, keyset paging, unread filter
  const list = await s.request('GET', '/notifications', { token: reader.token })
  t.equal(list.status, 200)
  t.same(Object.keys(list.body), ['notifications'])
  t.equal(list.headers.get('x-unread-count'), '3')
  const ids = list.body.notifications.map((n: any) => n.id)
  t.same(ids, [...ids].sort((a: number, b: number) => b - a), 'newest first')
  t.match(list.body.notifications[0], { id: Number, kind: 'asset.ingested', event_id: String, title: /arrived|uploaded|three\.txt|two\.txt|one\.txt/, subject_type: 'asset', subject_id: Number, actor_id: s.user.id, payload: { project_id: p.id, project_name: 'Told' }, read: false, read_at: null, created_at: String })
  const first = await s.request('GET', '/notifications', { token: reader.token, query: { per_page: '2' } })
  t.equal(first.body.notifications.length, 2)
  const after = first.headers.get('x-next-after')!
  t.ok(after, 'a cursor for the next page')
  const second = await s.request('GET', '/notifications', { token: reader.token, query: { per_page: '2', after } })
  t.same(second.body.notifications.map((n: any) => n.id), ids.slice(2), 'the next page continues after the cursor')
  assertProblem(t, await s.request('GET', '/notifications', { token: reader.token, query: { after: 'garbage!' } }), 422, ['after'])
  assertProblem(t, await s.request('GET', '/notifications', { token: reader.token, query: { unread: 'maybe' } }), 422, ['unread'])
  assertProblem(t, await s.request('GET', '/notifications', { token: reader.token, query: { per_page: '0' } }), 422, ['per_page'])

  // one notification; another user's is not found
  const one = await s.request('GET', `/notifications/${ids[0]}`, { token: reader.token })
  t.equal(one.status, 200)
  t.equal(one.body.notification.id, ids[0])
  assertProblem(t, await s.request('GET', `/notifications/${ids[0]}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', `/notifications/${ids[0]}`, { token: s.admin.token }), 404)
  assertProblem(t, await s.request('POST', `/notifications/${ids[0]}/toggle_read`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/notifications/abc', { token: reader.token }), 422, ['id'])
  assertProblem(t, await s.request('GET', '/notifications/999999', { token: reader.token }), 404)

  // toggle: read, unread again; two toggles at once leave it as it was
  const toggled = await s.request('POST', `/notifications/${ids[0]}/toggle_read`, { token: reader.token })
  t.equal(toggled.status, 200)
  t.match(toggled.body.notification, { id: ids[0], read: true, read_at: String })
  t.same((await s.request('GET', '/notifications', { token: reader.token, query: { unread: 'true' } })).body.notifications.map((n: any) => n.id), ids.slice(1), 'unread=true')
  const back = await s.request('POST', `/notifications/${ids[0]}/toggle_read`, { token: reader.token })
  t.match(back.body.notification, { read: false, read_at: null })
  await Promise.all([s.request('POST', `/notifications/${ids[1]}/toggle_read`, { token: reader.token }), s.request('POST', `/notifications/${ids[1]}/toggle_read`, { token: reader.token })])
  t.equal((await s.request('GET', `/notifications/${ids[1]}`, { token: reader.token })).body.notification.read, false, 'two toggles at once cancel out')

  // mark all read: only the caller's
  const marked = await s.request('POST', '/notification/mark_all_read', { token: reader.token })
  t.equal(marked.status, 200)
  t.same(marked.body, { hash: { marked_read: 3, unread: 0 } })
  t.same((await s.request('GET', '/notifications', { token: reader.token, query: { unread: 'true' } })).body.notifications, [])
  t.ok((await rowsOf(s, s.admin.id)).every((r: any) => !r.read || r.read === 0), 'the administrator’s stay unread')

  // idempotent by event id: the same events delivered again write nothing
  const service = s.runtime.container.resolve(notificationServices.service.id) as any
  const event = { id: readerRows[0].event_id, name: 'asset.ingested', time: new Date().toISOString(), subject: { type: 'asset', id: Number(readerRows[0].subject_id) }, actor_id: s.user.id, payload: JSON.parse(readerRows[0].payload) }
  await service.deliver([event, event])
  t.equal((await rowsOf(s, reader.id)).length, 3, 'a repeated fan-out adds nothing')
})

onEachDatabase(t, 'notification settings: per kind, over the administrators’ defaults; unknown kinds are refused', async (t, s) => {
  const mine = await s.request('GET', '/notification_settings', { token: s.user.token })
  t.equal(mine.status, 200)
  t.same(Object.keys(mine.body), ['notification_settings'])
  for (const kind of ['job.failed', 'job.finished', 'asset.ingested', 'asset.proxy-ready', 'project.created', 'user.invited'])
    t.match(mine.body.notification_settings[kind], { in_app: true, email: 'off', source: 'built-in', description: String, subject: String }, kind)

  const bad: Array<[unknown, string[]]> = [
    [{ notification_settings: { 'no.such-kind': 'off' } }, ['notification_settings[no.such-kind]']],
    [{ notification_settings: { 'job.failed': { email: 'weekly' } } }, ['notification_settings[job.failed][email]']],
    [{ notification_settings: { 'job.failed': { in_app: 'perhaps' } } }, ['notification_settings[job.failed][in_app]']],
    [{ notification_settings: { 'job.failed': 'sometimes' } }, ['notification_settings[job.failed]']],
    [{}, ['notification_settings']],
  ]
  for (const [json, params] of bad) {
    const reply = await s.request('PUT', '/notification_settings', { token: s.user.token, json })
    t.equal(reply.status, 422, JSON.stringify(json))
    t.ok(params.every((p) => (reply.body.errors ?? []).some((e: any) => e.param === p)), `names ${params}: ${JSON.stringify(reply.body.errors)}`)
  }
  t.equal(Number((await s.runtime.db.knex('notification_settings').count({ n: '*' }))[0].n), 0, 'refused requests write nothing')
  // one unknown kind among valid ones: nothing is written
  const mixed = await s.request('PUT', '/notification_settings', { token: s.user.token, json: { notification_settings: { 'job.failed': 'off', 'nope.nope': 'off' } } })
  assertProblem(t, mixed, 422, ['notification_settings[nope.nope]'])
  t.equal(Number((await s.runtime.db.knex('notification_settings').count({ n: '*' }))[0].n), 0)

  // defaults (administrators) apply to users without a choice of their own
  const defaults = await s.request('PUT', '/notification_settings/defaults', { token: s.admin.token, json: { notification_settings: { 'asset.ingested': { email: 'daily' } } } })
  t.equal(defaults.status, 200)
  t.match(defaults.body.notification_settings['asset.ingested'], { in_app: true, email: 'daily', source: 'default' })
  t.match((await s.request('GET', '/notification_settings/defaults', { token: s.admin.token })).body.notification_settings['asset.ingested'], { email: 'daily', source: 'default' })
  t.match((await s.request('GET', '/notification_settings', { token: s.user.token })).body.notification_settings['asset.ingested'], { email: 'daily', source: 'default' })

  // the user's own choice overrides; form parameters work too; `default` drops it again
  const own = await s.request('PUT', '/notification_settings', { token: s.user.token, form: { 'notification_settings[asset.ingested][email]': 'immediately', 'notification_settings[job.failed]': 'off' } })
  t.equal(own.status, 200, own.text)
  t.match(own.body.notification_settings['asset.ingested'], { in_app: true, email: 'immediately', source: 'user' })
  t.match(own.body.notification_settings['job.failed'], { in_app: false, email: 'off', source: 'user' })
  t.match((await s.request('GET', '/notification_settings', { token: s.admin.token })).body.notification_settings['asset.ingested'], { email: 'daily', source: 'default' }, 'others keep the default')
  const reset = await s.request('PUT', '/notification_settings', { token: s.user.token, json: { notification_settings: { 'asset.ingested': 'default' } } })
  t.match(reset.body.notification_settings['asset.ingested'], { email: 'daily', source: 'default' })
  const resetDefault = await s.request('PUT', '/notification_settings/defaults', { token: s.admin.token, json: { notification_settings: { 'asset.ingested': 'default' } } })
  t.match(resetDefault.body.notification_settings['asset.ingested'], { email: 'off', source: 'built-in' })

  // a kind switched off writes no notification
  const p = await createProject(s, s.user, { name: 'Quiet' })
  const { reader } = await readerAndStranger(s, p.id)
  await s.request('PUT', '/notification_settings', { token: reader.token, json: { notification_settings: { 'asset.ingested': 'off' } } })
  await upload(s, s.user, p.id, ['muted.txt'])
  await settled(s)
  t.same(await rowsOf(s, reader.id), [], 'off: nothing')
})

onEachDatabase(t, 'notification emails: at once and as digests through the mailer (real SMTP); a refused delivery is retried, the request never waits', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Mailed' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const knex = s.runtime.db.knex
  await knex('users').where({ id: reader.id }).update({ email: 'reader@example.com', firstname: 'Rita' })
  await knex('users').where({ id: stranger.id }).update({ email: 'nobody@example.com' })
  await s.request('PUT', '/notification_settings', { token: reader.token, json: { notification_settings: { 'asset.ingested': { email: 'immediately' } } } })

  mail.messages.length = 0
  const [asset] = await upload(s, s.user, p.id, ['mailed.mov'])
  await settled(s)
  await waitFor('the email', async () => mail.messages.length >= 1)
  t.equal(mail.messages.length, 1)
  t.same(mail.messages[0].to, ['reader@example.com'])
  const raw = mail.messages[0].raw
  t.match(raw, /multipart\/alternative/, 'plain text and HTML')
  t.match(raw, /text\/html/)
  t.match(parseMail(raw).headers.subject, /mailed\.mov/)
  t.match(raw.replace(/=\r?\n/g, ''), new RegExp(`/api/v1/assets/${asset.id}`), 'links to the object')
  const row = await waitFor('the mark', async () => knex('notifications').where({ user_id: reader.id }).whereNotNull('emailed_at').first())
  t.ok(row.emailed_at, 'marked as emailed')
  t.equal(row.email_due_at, null)

  // hourly digest: two events, one mail once it is due
  await s.request('PUT', '/notification_settings', { token: reader.token, json: { notification_settings: { 'asset.ingested': { email: 'hourly', in_app: false } } } })
  await upload(s, s.user, p.id, ['d1.txt', 'd2.txt'])
  await settled(s)
  const pending = await knex('notifications').where({ user_id: reader.id }).whereNotNull('email_due_at')
  t.equal(pending.length, 2, 'two digest entries wait')
  t.ok(pending.every((r: any) => new Date(typeof r.email_due_at === 'number' ? r.email_due_at : r.email_due_at).getTime() > Date.now()), 'due at the next full hour')
  const list = await s.request('GET', '/notifications', { token: reader.token })
  t.equal(list.body.notifications.length, 1, 'in_app false: email only, not in the list')
  await knex('notifications').whereIn('id', pending.map((r: any) => r.id)).update({ email_due_at: new Date(Date.now() - 1000) })
  const sent = await s.runtime.jobs.enqueue('notifications.send-emails', {})
  await waitFor('the digest', async () => ['finished', 'failed'].includes((await s.runtime.jobs.get(sent.id))!.state))
  t.equal(mail.messages.length, 2, 'one digest mail')
  const digest = parseMail(mail.messages[1].raw)
  t.match(digest.headers.subject, /2 notifications \(hourly digest\)/)

  // a mailbox the SMTP server refuses: the upload answers at once, the send job fails and is retried
  await s.request('PUT', '/notification_settings', { token: stranger.token, json: { notification_settings: { 'project.created': { email: 'immediately' } } } })
  await knex('users').where({ id: s.admin.id }).update({ email: 'nobody@example.com' })
  await s.request('PUT', '/notification_settings', { token: s.admin.token, json: { notification_settings: { 'project.created': { email: 'immediately' } } } })
  const started = Date.now()
  await createProject(s, s.user, { name: 'Refused' })
  t.ok(Date.now() - started < 5000, 'the request does not wait for SMTP')
  await settled(s)
  const job = await waitFor('a retried send job', async () => knex('jobs').where({ type: 'notifications.send-emails' }).where('attempts', '>=', 1).whereNotNull('error').first())
  t.match(job.error, /SMTP|mailbox|550/i, 'the SMTP refusal is the job’s error')
  const refused = await knex('notifications').where({ user_id: s.admin.id, kind: 'project.created' }).orderBy('id', 'desc').first()
  t.ok(refused.email_due_at, 'still due: the retry sends it')
  t.equal(refused.emailed_at, null)
}, { config: { plugins: { identity: { mail: { host: '127.0.0.1', port: mail.port, secure: false, from: 'mamkit <mam@example.com>', publicUrl: 'https://mam.example.com' } } } } })
