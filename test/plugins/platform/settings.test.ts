import t from 'tap'
import { assertProblem, onEachDatabase } from '../../../core/testing/index.js'

const auditRows = async (s: any) =>
  (await s.runtime.db.knex('platform_setting_changes').orderBy('id').select('plugin', 'setting', 'old_value', 'new_value', 'user_id', 'username')).map((r: any) => ({
    ...r,
    user_id: Number(r.user_id),
  }))

onEachDatabase(
  t,
  'settings: shown grouped by plugin, changed live, audited, secrets masked',
  async (t, s) => {
    assertProblem(t, await s.request('GET', '/settings'), 401)
    assertProblem(t, await s.request('GET', '/settings', { token: s.user.token }), 403)
    assertProblem(t, await s.request('PUT', '/settings', { token: s.user.token, json: { settings: { platform: { metrics: { loopback: false } } } } }), 403)

    const shown = await s.request('GET', '/settings.json', { token: s.admin.token })
    t.equal(shown.status, 200)
    t.same(Object.keys(shown.body), ['settings'], 'root key `settings` (wire.md)')
    t.match(shown.body.settings.platform, {
      metrics: { loopback: true, token: '' },
      branding: { max_bytes: 20 * 1024 * 1024 },
      chat: { api_url: '', token: '' },
      subscription: { instance: 'default', plan: 'self-hosted' },
    })
    t.equal(shown.body.settings.platform.license.public_key, 'from-the-file', 'the configuration file is the base')

    // a change is in force at once, in this process: api.settings() reads it
    const settingsOf = () => s.runtime.loaded.settings.get<any>('platform')
    const put = await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { metrics: { token: 's3cret-token' }, chat: { api_url: 'http://127.0.0.1:9/api' } } } } })
    t.equal(put.status, 200)
    t.equal(put.body.settings.platform.metrics.token, '********', 'secrets are masked in answers')
    t.equal(put.body.settings.platform.chat.api_url, 'http://127.0.0.1:9/api')
    t.equal(settingsOf().metrics.token, 's3cret-token', 'in force without a restart')
    t.equal(settingsOf().metrics.loopback, true, 'members not sent keep their values')

    // the masked value sent back changes nothing; other members change
    const again = await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { metrics: { token: '********', loopback: false } } } } })
    t.equal(again.status, 200)
    t.same(settingsOf().metrics, { token: 's3cret-token', loopback: false })

    // form bodies are coerced like every form
    const form = await s.request('PUT', '/settings', { token: s.admin.token, form: { 'settings[platform][branding][max_pixels]': '1000000' } })
    t.equal(form.status, 200, form.text)
    t.equal(settingsOf().branding.max_pixels, 1_000_000)

    // bad input names the setting as sent and changes nothing
    const before = JSON.stringify(settingsOf())
    const auditBefore = (await auditRows(s)).length
    const bad: Array<[unknown, string[]]> = [
      [{ settings: { platform: { branding: { max_bytes: 'big' } } } }, ['settings[platform][branding][max_bytes]']],
      [{ settings: { platform: { branding: { max_bytes: 1 } } } }, ['settings[platform][branding][max_bytes]']],
      [{ settings: { platform: { metrics: { unknown: 1 } } } }, ['settings[platform][metrics][unknown]']],
      [{ settings: { platform: { chat: { api_url: 'file:///etc/passwd' } } } }, ['settings[platform][chat][api_url]']],
      [{ settings: { nosuch: { a: 1 } } }, ['settings[nosuch]']],
      [{ settings: { platform: { license: { public_key: 'mine' } } } }, ['settings[platform][license][public_key]']],
      [{ settings: { platform: { metrics: { loopback: true }, branding: { max_pixels: -5 } } } }, ['settings[platform][branding][max_pixels]']],
      [{ other: 1 }, ['other', 'settings']],
    ]
    for (const [json, params] of bad) assertProblem(t, await s.request('PUT', '/settings', { token: s.admin.token, json }), 422, params)
    t.equal(JSON.stringify(settingsOf()), before, 'refused changes leave the settings in force')
    t.equal((await auditRows(s)).length, auditBefore, 'and write no audit')

    // audited: who, old → new, secrets redacted
    const audit = await auditRows(s)
    t.same(
      audit.map((a: any) => [a.setting, a.old_value, a.new_value, a.username]),
      [
        ['chat.api_url', '""', '"http://127.0.0.1:9/api"', 'admin'],
        ['metrics.token', '"[redacted]"', '"[redacted]"', 'admin'],
        ['metrics.loopback', 'true', 'false', 'admin'],
        ['branding.max_pixels', '50000000', '1000000', 'admin'],
      ],
    )
    t.ok(audit.every((a: any) => a.user_id === s.admin.id && a.plugin === 'platform'))
    t.notOk(JSON.stringify(audit).includes('s3cret'), 'the secret is in no audit row')
    const changes = await s.request('GET', '/settings/changes', { token: s.admin.token, query: { per_page: '2' } })
    t.equal(changes.status, 200)
    t.equal(changes.headers.get('x-total-count'), '4')
    t.same(changes.body.setting_changes.map((c: any) => c.setting), ['branding.max_pixels', 'metrics.loopback'], 'newest first')
    t.match(changes.body.setting_changes[0], { plugin: 'platform', old_value: 50000000, new_value: 1000000, user_id: s.admin.id, username: 'admin', created_at: String })
    assertProblem(t, await s.request('GET', '/settings/changes', { token: s.user.token }), 403)

    // another process sharing the database picks the change up; a restart keeps it
    await s.runtime.container.resolve<any>('platform.settings').refresh()
    t.equal(settingsOf().metrics.loopback, false)
  },
  { config: { plugins: { platform: { license: { public_key: 'from-the-file' } } } } },
)

onEachDatabase(t, 'settings: two administrators changing different members at once both keep their change', async (t, s) => {
  const replies = await Promise.all([
    s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { subscription: { plan: 'studio' } } } } }),
    s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { platform: { subscription: { instance: 'north' } } } } }),
  ])
  t.same(replies.map((r) => r.status), [200, 200])
  const row = await s.runtime.db.knex('platform_settings').where({ plugin: 'platform' }).first()
  t.same(JSON.parse(row.value), { subscription: { plan: 'studio', instance: 'north' } }, 'both overrides stored')
  await s.runtime.container.resolve<any>('platform.settings').refresh()
  t.match(s.runtime.loaded.settings.get<any>('platform').subscription, { plan: 'studio', instance: 'north' })
})
