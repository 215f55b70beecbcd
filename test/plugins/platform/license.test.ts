import t from 'tap'
import { generateKeyPairSync, sign } from 'node:crypto'
import { assertProblem, onEachDatabase, startTestServer } from '../../../core/testing/index.js'
import { definePlugin } from '../../../core/plugin/contract.js'
import { canonicalJson, machineIdOf } from '../../../plugins/platform/index.js'

const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const rawPublic = publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('base64')
const other = generateKeyPairSync('ed25519')

/** a module sold separately: off until a license grants it (or, without a license, its key) */
const studio = definePlugin({
  name: 'studio',
  version: '1.0.0',
  activeByDefault: false,
  verifyActivationKey: (key) => key === 'legacy-studio-key',
  register(api) {
    api.routes.get('/studio/ping', { access: 'authenticated' }, () => ({ hash: { pong: true } }))
  },
})

function licenseFile(body: Record<string, unknown>, key = privateKey) {
  const license = { customer: 'ACME Post', expires_at: new Date(Date.now() + 86_400_000).toISOString(), modules: ['studio'], max_users: 25, max_sites: 1, ...body }
  return { license, signature: sign(null, Buffer.from(canonicalJson(license)), key).toString('base64') }
}

onEachDatabase(
  t,
  'license: machine id, open mode without one, a signed one grants and drops modules live, bad ones are 422',
  async (t, s) => {
    const mid = await s.request('GET', '/machine_id', { token: s.admin.token })
    t.equal(mid.status, 200)
    t.match(mid.body.hash.machine_id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    t.equal(mid.body.hash.machine_id, machineIdOf(s.runtime.config.secretKey), 'derived from the data dir key')
    assertProblem(t, await s.request('GET', '/machine_id', { token: s.user.token }), 403)
    assertProblem(t, await s.request('GET', '/license'), 401)
    const machineId = mid.body.hash.machine_id

    const open = await s.request('GET', '/license', { token: s.admin.token })
    t.match(open.body.license, { status: 'open', modules: [], licensable_modules: ['studio'] })
    assertProblem(t, await s.request('GET', '/studio/ping', { token: s.user.token }), 404)

    const post = (json: unknown) => s.request('POST', '/license', { token: s.admin.token, json })
    const licensesStored = async () => Number((await s.runtime.db.knex('platform_licenses').count({ n: '*' }))[0].n)

    // refused: each a 422 naming `license`, and nothing stored
    assertProblem(t, await post(licenseFile({ machine_id: 'another-machine' })), 422, ['license'])
    assertProblem(t, await post(licenseFile({ machine_id: machineId, expires_at: '2020-01-01T00:00:00Z' })), 422, ['license'])
    assertProblem(t, await post(licenseFile({ machine_id: machineId }, other.privateKey)), 422, ['license'])
    const tampered = licenseFile({ machine_id: machineId })
    tampered.license.max_users = 1000
    assertProblem(t, await post(tampered), 422, ['license'])
    assertProblem(t, await post({ license: 'not json' }), 422, ['license'])
    assertProblem(t, await post({ license: { customer: 'x' }, signature: 'AAAA' }), 422, ['license'])
    assertProblem(t, await post({}), 422, ['license'])
    assertProblem(t, await s.request('POST', '/license', { token: s.user.token, json: licenseFile({ machine_id: machineId }) }), 403)
    t.equal(await licensesStored(), 0)

    // a good one, as the file's text: applied in this process, no restart
    const good = licenseFile({ machine_id: machineId })
    const installed = await post({ license: JSON.stringify(good) })
    t.equal(installed.status, 201, installed.text)
    t.match(installed.body.license, { status: 'valid', customer: 'ACME Post', modules: ['studio'], max_users: 25, max_sites: 1, users: 2 })
    const activated = await s.request('PUT', '/settings/activate_module', { token: s.admin.token, json: { module: 'studio' } })
    t.equal(activated.status, 200, 'a granted module activates without a key')
    t.equal((await s.request('GET', '/studio/ping', { token: s.user.token })).status, 200)

    // an invalid one later: 422, the old one stays in force
    assertProblem(t, await post(licenseFile({ machine_id: machineId, modules: [] }, other.privateKey)), 422, ['license'])
    t.equal((await s.request('GET', '/studio/ping', { token: s.user.token })).status, 200, 'the old license stays')

    // a license that drops the module: switched off at once
    const without = await post(licenseFile({ machine_id: machineId, modules: [] }))
    t.equal(without.status, 201)
    assertProblem(t, await s.request('GET', '/studio/ping', { token: s.user.token }), 404)
    t.equal((await s.runtime.db.knex('features').where({ name: 'studio' }).first()).active ? 1 : 0, 0, 'off in the features table too')
    assertProblem(t, await s.request('PUT', '/settings/activate_module', { token: s.admin.token, json: { module: 'studio', key: 'legacy-studio-key' } }), 403)
    t.match((await s.request('GET', '/license', { token: s.admin.token })).body.license, { status: 'valid', modules: [] })
  },
  { extraPlugins: [studio], config: { plugins: { platform: { license: { public_key: rawPublic } } } } },
)

t.test('license: without a license the activation key decides; a license survives a restart; no public key is a 503', async (t) => {
  const s = await startTestServer({ extraPlugins: [studio], config: { plugins: { platform: { license: { public_key: publicKey.export({ format: 'pem', type: 'spki' }).toString() } } } } })
  t.teardown(() => s.close())
  assertProblem(t, await s.request('PUT', '/settings/activate_module', { token: s.admin.token, json: { module: 'studio', key: 'wrong' } }), 403)
  t.equal((await s.request('PUT', '/settings/activate_module', { token: s.admin.token, json: { module: 'studio', key: 'legacy-studio-key' } })).status, 200)
  const machineId = machineIdOf(s.runtime.config.secretKey)
  const multipart = new FormData()
  multipart.append('license', new Blob([JSON.stringify(licenseFile({ machine_id: machineId }))]), 'acme.lic')
  const up = await s.request('POST', '/license', { token: s.admin.token, multipart })
  t.equal(up.status, 201, 'a PEM key; the file as an upload')

  const again = await startTestServer({ extraPlugins: [studio], dataDir: s.dataDir, config: { plugins: { platform: { license: { public_key: rawPublic } } } } })
  t.teardown(() => again.close())
  t.match((await again.request('GET', '/license', { token: again.admin.token })).body.license, { status: 'valid', customer: 'ACME Post' }, 'in force after a restart')

  const keyless = await startTestServer({ extraPlugins: [studio] })
  t.teardown(() => keyless.close())
  assertProblem(t, await keyless.request('POST', '/license', { token: keyless.admin.token, json: licenseFile({ machine_id: 'x' }) }), 503)
})
