import t from 'tap'
import { assertProblem, onEachDatabase, createProject, waitFor, type TestServer } from '../../../core/testing/index.js'
import { startReceiver } from '../../helpers/webhook-receiver.js'

const count = async (s: TestServer, table: string) => Number((await s.runtime.db.knex(table).count({ n: '*' }))[0].n)

onEachDatabase(t, 'webhooks: administrators only; private targets and bad input are refused', async (t, s) => {
  const body = { webhook: { url: 'https://93.184.215.14/hook', events: ['project.created'] } }
  assertProblem(t, await s.request('GET', '/webhooks'), 401)
  assertProblem(t, await s.request('POST', '/webhooks', { json: body }), 401)
  for (const [method, path] of [['GET', '/webhooks'], ['POST', '/webhooks'], ['GET', '/webhooks/1'], ['PUT', '/webhooks/1'], ['DELETE', '/webhooks/1'], ['GET', '/webhooks/1/deliveries'], ['POST', '/webhooks/1/deliveries/1/redeliver']])
    assertProblem(t, await s.request(method, path, { token: s.user.token, json: method === 'GET' ? undefined : body }), 403)

  const bad: Array<[unknown, string[]]> = [
    [{ webhook: { url: 'http://127.0.0.1:9/hook', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'http://localhost/hook', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'http://10.1.2.3/hook', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'http://169.254.169.254/latest/meta-data', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'http://[::1]/hook', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'http://[::ffff:127.0.0.1]/hook', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'ftp://example.com/hook', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'not a url', events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'https://93.184.215.14/hook', events: ['no.such-event'] } }, ['webhook[events][0]']],
    [{ webhook: { url: 'https://93.184.215.14/hook', events: [] } }, ['webhook[events]']],
    [{ webhook: { url: 'https://93.184.215.14/hook', events: ['*', 'job.failed'] } }, ['webhook[events]']],
    [{ webhook: { events: ['*'] } }, ['webhook[url]']],
    [{ webhook: { url: 'https://93.184.215.14/hook' } }, ['webhook[events]']],
    [{ webhook: { url: 'https://93.184.215.14/hook', events: ['*'], active: 'maybe' } }, ['webhook[active]']],
    [{ webhook: { url: 'https://93.184.215.14/hook', events: ['*'], secret: 'mine' } }, ['webhook[secret]']],
  ]
  for (const [json, params] of bad) assertProblem(t, await s.request('POST', '/webhooks', { token: s.admin.token, json }), 422, params)
  t.equal(await count(s, 'webhooks'), 0, 'refused requests write nothing')
  assertProblem(t, await s.request('GET', '/webhooks/12345', { token: s.admin.token }), 404)
  assertProblem(t, await s.request('GET', '/webhooks/12345/deliveries', { token: s.admin.token }), 404)
})

const receiver = await startReceiver()
t.teardown(() => receiver.close())

onEachDatabase(
  t,
  'webhooks: signed deliveries to a real receiver, retries, the log, redelivery, automatic disabling',
  async (t, s) => {
    const before = (await receiver.received()).length
    const created = await s.request('POST', '/webhooks', { token: s.admin.token, form: { 'webhook[url]': receiver.url, 'webhook[events][]': ['project.created', 'job.failed'] } })
    t.equal(created.status, 201, created.text)
    const hook = created.body.webhook
    t.match(hook, { id: Number, url: receiver.url, events: ['project.created', 'job.failed'], active: true, consecutive_failures: 0, secret: /^whsec_[A-Za-z0-9+/]{32}$/ })
    t.notOk('secret' in (await s.request('GET', `/webhooks/${hook.id}`, { token: s.admin.token })).body.webhook, 'the secret is shown once')
    t.notOk(JSON.stringify((await s.request('GET', '/webhooks', { token: s.admin.token })).body).includes(hook.secret), 'and never listed')
    const stored = await s.runtime.db.knex('webhooks').where({ id: hook.id }).first()
    t.notOk(stored.secret.includes(hook.secret.slice(6)), 'stored sealed, not in clear')
    await receiver.setSecret(hook.secret)
    // only the subscribed events; a webhook for other events hears nothing of these
    const other = await s.request('POST', '/webhooks', { token: s.admin.token, json: { url: receiver.url + '?other', events: ['user.invited'] } })
    t.equal(other.status, 201, 'top-level parameters are wrapped')

    const p = await createProject(s, s.user, { name: 'Hooked' })
    const got = await waitFor('the delivery', async () => (await receiver.received()).slice(before).find((r) => r.body?.payload?.project_id === p.id))
    t.equal(got.valid, true, 'the receiver verified the signature')
    t.match(got.body, { id: got.id, name: 'project.created', time: String, subject: { type: 'project', id: p.id }, actor_id: s.user.id, payload: { project_id: p.id, name: 'Hooked' } })
    const log = await waitFor('the log', async () => {
      const r = await s.request('GET', `/webhooks/${hook.id}/deliveries`, { token: s.admin.token })
      return r.body.deliveries[0]?.state === 'succeeded' && r
    })
    t.same(Object.keys(log.body), ['deliveries'])
    t.match(log.body.deliveries[0], { id: Number, webhook_id: hook.id, event_id: got.id, event_name: 'project.created', state: 'succeeded', attempts: 1, response_code: 204, duration_ms: Number, error: null })
    t.same((await s.request('GET', `/webhooks/${other.body.webhook.id}/deliveries`, { token: s.admin.token })).body.deliveries, [], 'not subscribed: no delivery')

    // the target fails twice: retried with backoff, delivered once
    await receiver.failNext(2)
    const q = await createProject(s, s.user, { name: 'Retried' })
    const retried = await waitFor('the retried delivery', async () => (await receiver.received()).slice(before).find((r) => r.body?.payload?.project_id === q.id))
    t.equal(retried.valid, true)
    const entry = await waitFor('the log entry', async () => (await s.request('GET', `/webhooks/${hook.id}/deliveries`, { token: s.admin.token, query: { state: 'succeeded' } })).body.deliveries.find((d: any) => d.event_id === retried.id))
    t.match(entry, { state: 'succeeded', attempts: 3, response_code: 204 })
    t.equal((await receiver.received()).filter((r) => r.id === retried.id).length, 1, 'received once')

    // manual redelivery: the same event again, under its webhook-id
    const again = await s.request('POST', `/webhooks/${hook.id}/deliveries/${entry.id}/redeliver`, { token: s.admin.token })
    t.equal(again.status, 201)
    t.match(again.body.delivery, { event_id: retried.id, state: 'pending', redelivery_of: entry.id })
    await waitFor('the redelivery', async () => (await receiver.received()).filter((r) => r.id === retried.id).length === 2)
    assertProblem(t, await s.request('POST', `/webhooks/${hook.id}/deliveries/999999/redeliver`, { token: s.admin.token }), 404)
    assertProblem(t, await s.request('POST', `/webhooks/${other.body.webhook.id}/deliveries/${entry.id}/redeliver`, { token: s.admin.token }), 404, undefined)

    // a run of failures switches the webhook off
    await receiver.failNext(1000)
    await createProject(s, s.user, { name: 'Failing' })
    const off = await waitFor('the webhook to switch off', async () => {
      const r = await s.request('GET', `/webhooks/${hook.id}`, { token: s.admin.token })
      return r.body.webhook.active === false && r.body.webhook
    })
    t.match(off, { active: false, consecutive_failures: 4, disabled_reason: /4 failed deliveries in a row/ })
    await receiver.failNext(0)
    const on = await s.request('PUT', `/webhooks/${hook.id}`, { token: s.admin.token, json: { webhook: { active: true } } })
    t.match(on.body.webhook, { active: true, consecutive_failures: 0, disabled_reason: null })
    assertProblem(t, await s.request('PUT', `/webhooks/${hook.id}`, { token: s.admin.token, json: { webhook: { events: ['nope.nope'] } } }), 422, ['webhook[events][0]'])

    const removed = await s.request('DELETE', `/webhooks/${other.body.webhook.id}`, { token: s.admin.token })
    t.equal(removed.status, 200)
    assertProblem(t, await s.request('GET', `/webhooks/${other.body.webhook.id}`, { token: s.admin.token }), 404)
  },
  { config: { plugins: { webhooks: { allow_private_targets: true, retry_scale: 0.0002, disable_after_failures: 4 } } } },
)
