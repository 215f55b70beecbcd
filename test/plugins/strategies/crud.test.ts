import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase } from '../../helpers/index.js'
import { row } from '../projects/fixtures.js'
import { targetRoot } from './fixtures.js'

const dir = await targetRoot(t)
const KINDS = [
  ['archive_strategies', 'archive_strategy', 'archivestrategy'],
  ['backup_strategies', 'backup_strategy', 'backupstrategy'],
  ['asset_copy_to_strategies', 'asset_copy_to_strategy', 'assetcopytostrategy'],
  ['project_copy_to_strategies', 'project_copy_to_strategy', 'projectcopytostrategy'],
] as const

onEachDatabase(
  t,
  'strategies of every kind: create (wrapped, unwrapped, form), list, show, update, delete; validation names parameters as sent',
  async (t, s) => {
    for (const [route, wrap, key] of KINDS) {
      const dest = path.join(dir, s.db, route)
      assertProblem(t, await s.request('POST', `/${route}`, { json: { [wrap]: { name: 'x', destination: dest } } }), 401)
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.user.token, json: { [wrap]: { name: 'x', destination: dest } } }), 403)
      const made = await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'Tape', destination: dest, transmission_check: 'checksum' } } })
      t.equal(made.status, 201, made.text)
      t.match(made.body[key], { id: Number, name: 'Tape', destination: dest, target_kind: 'disk', format: 'plain', admin_only: false, enabled: true })
      const id = made.body[key].id
      // unwrapped JSON and forms work the same
      const flat = await s.request('POST', `/${route}`, { token: s.admin.token, json: { name: 'Flat', destination: dest, admin_only: 'true' } })
      t.equal(flat.status, 201, flat.text)
      t.equal(flat.body[key].admin_only, true)
      const form = await s.request('POST', `/${route}`, { token: s.admin.token, form: { [`${wrap}[name]`]: 'Form', [`${wrap}[destination]`]: dest, [`${wrap}[enabled]`]: 'false' } })
      t.equal(form.status, 201, form.text)
      t.equal(form.body[key].enabled, false)
      // duplicates and bad input: 409 / 422 naming the parameter as it was sent
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'Tape', destination: dest } } }), 409, [`${wrap}[name]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { destination: dest } } }), 422, [`${wrap}[name]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { name: 'N', destination: '/etc/mamkit' } }), 422, ['destination'])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: path.join(dir, s.db, '..', '..', 'escape') } } }), 422, [`${wrap}[destination]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: 'relative/dir' } } }), 422, [`${wrap}[destination]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: dest, transmission_check: 'crc' } } }), 422, [`${wrap}[transmission_check]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: dest, format: 'tar' } } }), 422, [`${wrap}[format]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: 's3://bucket/x' } } }), 422, [`${wrap}[target][access_key_id]`, `${wrap}[target][secret_access_key]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: 's3://B_ad/x', target: { access_key_id: 'a', secret_access_key: 'b' } } } }), 422, [`${wrap}[destination]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: dest, includes: ['../up'] } } }), 422, [`${wrap}[includes][0]`])
      assertProblem(t, await s.request('POST', `/${route}`, { token: s.admin.token, json: { [wrap]: { name: 'N', destination: dest, bogus: 1 } } }), 422)
      t.equal(Number((await s.runtime.db.knex('strategies').where({ name: 'N' }).count({ n: '*' }))[0].n), 0, 'refused requests stored nothing')

      // list and show: admin-only strategies are invisible to others; disk paths are for administrators
      const asAdmin = await s.request('GET', `/${route}`, { token: s.admin.token })
      t.same(asAdmin.body.array.map((x: any) => x.name), ['Flat', 'Form', 'Tape'])
      const asUser = await s.request('GET', `/${route}.json`, { token: s.user.token })
      t.same(asUser.body.array.map((x: any) => x.name), ['Form', 'Tape'])
      t.equal(asUser.body.array[1].destination, null, 'a server path is not shown to a plain user')
      assertProblem(t, await s.request('GET', `/${route}/${flat.body[key].id}`, { token: s.user.token }), 404)
      t.equal((await s.request('GET', `/${route}/${id}`, { token: s.user.token })).body[key].name, 'Tape')
      assertProblem(t, await s.request('GET', `/${route}/99999`, { token: s.admin.token }), 404)

      // update
      assertProblem(t, await s.request('PUT', `/${route}/${id}`, { token: s.user.token, json: { name: 'x' } }), 403)
      const upd = await s.request('PUT', `/${route}/${id}`, { token: s.admin.token, json: { [wrap]: { name: 'Tape 2', enabled: false } } })
      t.equal(upd.status, 200, upd.text)
      t.match(upd.body[key], { name: 'Tape 2', enabled: false, destination: dest })
      assertProblem(t, await s.request('PUT', `/${route}/${id}`, { token: s.admin.token, json: { name: 'Flat' } }), 409, ['name'])
      assertProblem(t, await s.request('PUT', `/${route}/99999`, { token: s.admin.token, json: { name: 'x' } }), 404)

      if (route.includes('copy_to')) {
        assertProblem(t, await s.request('DELETE', `/${route}/${id}`, { token: s.user.token }), 403)
        t.equal((await s.request('DELETE', `/${route}/${id}`, { token: s.admin.token })).status, 200)
        assertProblem(t, await s.request('DELETE', `/${route}/${id}`, { token: s.admin.token }), 404)
      } else assertProblem(t, await s.request('DELETE', `/${route}/${id}`, { token: s.admin.token }), 405)
    }

    // two creations of one name meet: one wins, the other is a 409
    const dest = path.join(dir, s.db, 'race')
    const replies = await Promise.all([1, 2, 3].map(() => s.request('POST', '/archive_strategies', { token: s.admin.token, json: { name: 'Same', destination: dest } })))
    t.same(replies.map((r) => r.status).sort(), [201, 409, 409])

    // S3 targets: the secret is sealed at rest and never shown
    const s3 = await s.request('POST', '/archive_strategies', {
      token: s.admin.token,
      json: { archive_strategy: { name: 'Bucket', destination: 's3://my-bucket/archive', target: { endpoint: 'http://127.0.0.1:9', access_key_id: 'AK', secret_access_key: 'very-secret', storage_class: 'STANDARD' } } },
    })
    t.equal(s3.status, 201, s3.text)
    t.match(s3.body.archivestrategy, { target_kind: 's3', destination: 's3://my-bucket/archive', target: { endpoint: 'http://127.0.0.1:9', access_key_id: 'AK', secret_access_key_set: true } })
    t.notOk('secret_access_key' in s3.body.archivestrategy.target)
    const stored = await row(s, 'strategies', { id: s3.body.archivestrategy.id })
    t.notMatch(String(stored.target), /very-secret/, 'the secret is not stored in clear')
    assertProblem(t, await s.request('PUT', `/archive_strategies/${s3.body.archivestrategy.id}`, { token: s.admin.token, json: { target: { endpoint: 'ftp://x' } } }), 422, ['target[endpoint]'])

    // the configuration lists target kinds
    const conf = await s.request('GET', '/archive_strategies/configuration', { token: s.user.token })
    t.equal(conf.status, 200)
    t.same(Object.keys(conf.body.hash.targets), ['disk', 's3'])
    t.same(conf.body.hash.transmission_checks, ['none', 'size', 'checksum', 'fingerprint'])
  },
  { config: { plugins: { strategies: { roots: [dir] } } } },
)
