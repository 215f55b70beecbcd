import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { assertProblem, onEachDatabase, waitForJob } from '../../../core/testing/index.js'
import { projectWithFiles } from '../assets/fixtures.js'

onEachDatabase(t, 'metrics: Prometheus text, by route pattern; access by loopback, token or administrator, as the settings say', async (t, s) => {
  await s.request('GET', '/status_flags/12345', { token: s.user.token })
  const scrape = await s.request('GET', '/metrics')
  t.equal(scrape.status, 200, 'this machine may (loopback on by default)')
  t.match(scrape.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  t.match(scrape.text, /mamkit_http_requests_total\{method="GET",route="\/api\/v1\/status_flags\/:id",status="404"\} 1/, 'by pattern, not path')
  t.match(scrape.text, /mamkit_http_request_duration_seconds_bucket\{le="0\.005",method="GET",route="\/api\/v1\/status_flags\/:id",status="404"\}/)
  // counted in the request path, handed to prom-client when scraped: a second request adds to the same lines
  await s.request('GET', '/status_flags/23456', { token: s.user.token })
  const again = (await s.request('GET', '/metrics')).text
  const line = (name: string) => new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm')
  const of = (text: string, name: string, labels: string) => [...text.matchAll(line(name))].filter((m) => m[1] === labels).map((m) => Number(m[2]))
  const flag404 = 'method="GET",route="/api/v1/status_flags/:id",status="404"'
  t.same(of(again, 'mamkit_http_requests_total', flag404), [2])
  const buckets = ['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '+Inf'].map((le) => of(again, 'mamkit_http_request_duration_seconds_bucket', `le="${le}",${flag404}`)[0])
  t.equal(buckets.length, 12)
  t.ok(buckets.every((n, i) => n >= 0 && n <= 2 && (i === 0 || n >= buckets[i - 1])), `cumulative buckets (${buckets})`)
  t.equal(buckets[11], 2, '+Inf holds every request')
  t.same(of(again, 'mamkit_http_request_duration_seconds_count', flag404), [2])
  const [sum] = of(again, 'mamkit_http_request_duration_seconds_sum', flag404)
  t.ok(sum > 0 && sum < 10, `the sum in seconds (${sum})`)
  t.match(again, /# TYPE mamkit_http_request_duration_seconds histogram/)
  t.same(of(again, 'mamkit_http_requests_total', 'method="GET",route="/api/v1/metrics",status="200"'), [1], 'the first scrape, counted')
  t.match(scrape.text, /mamkit_db_pool_connections\{state="used"\}/)
  t.match(scrape.text, /# TYPE mamkit_jobs gauge/)
  t.notOk(scrape.text.includes('12345'), 'no ids from paths')

  await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { metrics: { loopback: false, token: 'scrape-me' } } } } })
  assertProblem(t, await s.request('GET', '/metrics'), 403)
  assertProblem(t, await s.request('GET', '/metrics', { headers: { authorization: 'Bearer wrong' } }), 403)
  assertProblem(t, await s.request('GET', '/metrics', { token: s.user.token }), 403)
  t.equal((await s.request('GET', '/metrics', { headers: { authorization: 'Bearer scrape-me' } })).status, 200, 'the token')
  t.equal((await s.request('GET', '/metrics', { token: s.admin.token })).status, 200, 'administrators')
})

onEachDatabase(t, 'traffic: bytes served by downloads are counted per instance and month; subscription show, options, subscribe, unsubscribe', async (t, s) => {
  const { assets } = await projectWithFiles(s, 'Traffic', { 'clip.bin': 'x'.repeat(100_000) })
  const id = assets[0].id
  const prepared = await s.request('PUT', `/assets/${id}/prepare_download_highres`, { token: s.user.token })
  t.equal(prepared.status, 202, prepared.text)
  await waitForJob(s, s.user.token, prepared.body.assetstate.job_id)
  const zip = await s.request('GET', `/assets/${id}/download_highres`, { token: s.user.token, query: { state_id: String(prepared.body.assetstate.id) } })
  t.equal(zip.status, 200)
  const part = await s.request('GET', `/assets/${id}/download_highres`, { token: s.user.token, query: { state_id: String(prepared.body.assetstate.id) }, headers: { range: 'bytes=0-999' } })
  t.equal(part.status, 206)

  const used = await s.request('GET', '/subscription/traffic_consumption', { token: s.admin.token })
  t.equal(used.status, 200)
  const { hash } = used.body
  t.equal(hash.instance, 'default')
  t.equal(hash.month, new Date().toISOString().slice(0, 7))
  // what went over the wire: both bodies and their headers, nothing for other routes
  t.ok(hash.by_kind.download >= zip.buffer.length + 1000, `at least the bodies (${hash.by_kind.download})`)
  t.ok(hash.by_kind.download < zip.buffer.length + 1000 + 4000, 'and not much more (headers)')
  t.equal(hash.by_kind.proxy + hash.by_kind.share, 0)
  t.equal(hash.bytes, hash.by_kind.download)
  const rows = await s.runtime.db.knex('platform_traffic').select('instance', 'kind', 'bytes')
  t.same(rows.map((r: any) => [r.instance, r.kind, Number(r.bytes)]), [['default', 'download', hash.bytes]], 'stored per instance and month')
  assertProblem(t, await s.request('GET', '/subscription/traffic_consumption', { token: s.user.token }), 403)
  assertProblem(t, await s.request('GET', '/subscription/show'), 401)

  // subscribe, look, unsubscribe
  const sub = await s.request('POST', '/instance_subscription', { token: s.admin.token, json: { instance_subscription: { instance: 'north', plan: 'studio', options: ['proxies', 'sharing'] } } })
  t.equal(sub.status, 201)
  t.match(sub.body.subscription, { instance: 'north', subscribed: true, plan: 'studio', options: ['proxies', 'sharing'] })
  t.match((await s.request('GET', '/subscription/options', { token: s.admin.token })).body, { hash: { plan: 'studio', options: ['proxies', 'sharing'] } })
  t.match((await s.request('GET', '/subscription/show', { token: s.admin.token })).body.subscription, { instance: 'north', period_start: /-01T00:00:00.000Z$/ })
  t.equal((await s.request('GET', '/subscription/traffic_consumption', { token: s.admin.token })).body.hash.bytes, 0, 'a new instance starts at 0')
  assertProblem(t, await s.request('POST', '/instance_subscription', { token: s.admin.token, json: { instance_subscription: { plan: '' } } }), 422, ['instance_subscription[plan]'])
  assertProblem(t, await s.request('POST', '/instance_subscription', { token: s.user.token, json: { instance_subscription: { plan: 'x' } } }), 403)
  const off = await s.request('PUT', '/instance_settings', { token: s.admin.token, json: { subscribed: false } })
  t.equal(off.status, 200)
  t.equal(off.body.subscription.subscribed, false)
  assertProblem(t, await s.request('PUT', '/instance_settings', { token: s.admin.token, json: { instance_settings: { subscribed: 'maybe' } } }), 422, ['instance_settings[subscribed]'])
  const audit = await s.runtime.db.knex('platform_setting_changes').where({ setting: 'subscription.subscribed' }).count({ n: '*' })
  t.equal(Number(audit[0].n), 2, 'subscribing and unsubscribing are audited')
})

/** a local stand-in for a Slack-style chat Web API (users.list with cursor paging), not the real service */
async function localChatApi(t: any) {
  const seen: string[] = []
  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://x')
    seen.push(`${url.pathname} ${req.headers.authorization}`)
    res.setHeader('content-type', 'application/json')
    if (req.headers.authorization !== 'Bearer xoxb-test') return res.end(JSON.stringify({ ok: false, error: 'invalid_auth' }))
    const pages: Record<string, object> = {
      '': { ok: true, members: [{ name: 'alice', profile: { display_name: 'Alice A' } }, { name: 'gone', deleted: true }], response_metadata: { next_cursor: 'p2' } },
      p2: { ok: true, members: [{ name: 'bob', profile: { display_name: 'Bobby' } }], response_metadata: { next_cursor: '' } },
    }
    res.end(JSON.stringify(pages[url.searchParams.get('cursor') ?? ''] ?? { ok: false, error: 'invalid_cursor' }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`, seen }
}

onEachDatabase(t, 'chat: validate_chat_username against a local stand-in of a Slack-style Web API; 503 when unconfigured', async (t, s) => {
  const check = (username: string, token = s.user.token) => s.request('GET', '/integrations/validate_chat_username', { token, query: { username } })
  assertProblem(t, await check('alice'), 503)
  assertProblem(t, await s.request('GET', '/integrations/validate_chat_username', { query: { username: 'alice' } }), 401)
  const chat = await localChatApi(t)
  await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { chat: { api_url: chat.url, token: 'xoxb-test' } } } } })
  t.same((await check('alice')).body, { hash: { username: 'alice', valid: true } })
  t.equal((await check('@Bobby')).body.hash.valid, true, 'display names on later pages, any case')
  t.equal((await check('gone')).body.hash.valid, false, 'deleted members do not count')
  t.equal((await check('mallory')).body.hash.valid, false)
  t.ok(chat.seen.every((l) => l === '/api/users.list Bearer xoxb-test'))
  assertProblem(t, await s.request('GET', '/integrations/validate_chat_username', { token: s.user.token }), 422, ['username'])
  await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { chat: { token: 'wrong' } } } } })
  const refused = await check('alice')
  assertProblem(t, refused, 503)
  t.match(refused.body.detail, /invalid_auth/)
  await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { chat: { api_url: 'http://127.0.0.1:1/api', token: 'x' } } } } })
  assertProblem(t, await check('alice'), 503)
})
