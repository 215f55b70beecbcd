import t from 'tap'
import { generateKeyPairSync, sign } from 'node:crypto'
import { assertProblem, createProject, onEachDatabase, upload, type TestServer } from '../../../core/testing/index.js'
import { canonicalJson, machineIdOf } from '../../../plugins/platform/index.js'

const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const rawPublic = publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('base64')

async function install(s: TestServer, limits: Record<string, number | null>) {
  const license = { customer: 'ACME Post', machine_id: machineIdOf(s.runtime.config.secretKey), expires_at: new Date(Date.now() + 86_400_000).toISOString(), modules: [], max_users: null, max_sites: 1, ...limits }
  const reply = await s.request('POST', '/license', { token: s.admin.token, json: { license, signature: sign(null, Buffer.from(canonicalJson(license)), privateKey).toString('base64') } })
  if (reply.status !== 201) throw new Error(`license: ${reply.status} ${reply.text}`)
  return reply
}
const users = async (s: TestServer) => Number((await s.runtime.db.knex('users').count({ n: '*' }))[0].n)
const newUser = (s: TestServer, username: string) => s.request('POST', '/users', { token: s.admin.token, json: { user: { username, password: 'secret-password' } } })

onEachDatabase(
  t,
  'license limits: max_users refuses new accounts with 402 license_limit, also when two creations race; usage in GET /license',
  async (t, s) => {
    const open = await s.request('GET', '/license', { token: s.admin.token })
    t.match(open.body.license, { status: 'open', usage: { users: { used: 2, limit: null }, storage_bytes: { used: 0, limit: null }, sites: { used: 1, limit: null } } })
    t.equal((await newUser(s, 'before-license')).status, 201, 'no license: no limit')

    await install(s, { max_users: 4 })
    t.equal((await newUser(s, 'fourth')).status, 201, 'the fourth of four')
    const refused = await newUser(s, 'fifth')
    assertProblem(t, refused, 402)
    t.match(refused.body, { code: 'license_limit', limit: 'max_users', max_users: 4, users: 4 })
    t.match(refused.body.detail, /max_users/)
    t.equal(await users(s), 4, 'nothing created')
    t.match((await s.request('GET', '/license', { token: s.admin.token })).body.license, { status: 'valid', max_users: 4, users: 4, usage: { users: { used: 4, limit: 4 } } })

    // one place left, two requests at once: exactly one gets it
    await install(s, { max_users: 5 })
    const raced = await Promise.all([newUser(s, 'racer-a'), newUser(s, 'racer-b')])
    t.same(raced.map((r) => r.status).sort(), [201, 402], 'one account made, the other refused')
    t.equal(await users(s), 5)

    // a deleted user frees a place
    const victim = raced.find((r) => r.status === 201)!.body.user.id
    t.equal((await s.request('DELETE', `/users/${victim}`, { token: s.admin.token })).status, 200)
    t.equal((await newUser(s, 'replacement')).status, 201)
  },
  { config: { plugins: { platform: { license: { public_key: rawPublic } } } } },
)

onEachDatabase(
  t,
  'license limits: max_storage_bytes refuses uploads past it with 402 license_limit, also when two uploads race',
  async (t, s) => {
    const p = await createProject(s, s.user, 'Limited')
    t.equal((await upload(s, s.user.token, p.id, [{ name: 'first.bin', data: 'x'.repeat(60) }])).status, 201, 'no license: no limit')
    await install(s, { max_storage_bytes: 100 })

    const over = await upload(s, s.user.token, p.id, [{ name: 'big.bin', data: 'x'.repeat(50) }])
    assertProblem(t, over, 402)
    t.match(over.body, { code: 'license_limit', limit: 'max_storage_bytes', max_storage_bytes: 100, stored_bytes: 60, needed_bytes: 50 })
    const names = async () => (await s.request('GET', `/projects/${p.id}/assets`, { token: s.user.token })).body.assets.map((a: any) => a.name).sort()
    t.same(await names(), ['first.bin'], 'nothing stored')

    // 40 bytes left; two uploads of 30 at once: one fits
    const raced = await Promise.all([upload(s, s.user.token, p.id, [{ name: 'a.bin', data: 'a'.repeat(30) }]), upload(s, s.user.token, p.id, [{ name: 'b.bin', data: 'b'.repeat(30) }])])
    t.same(raced.map((r) => r.status).sort(), [201, 402], 'one upload stored, the other refused')
    t.equal((await names()).length, 2)
    t.match((await s.request('GET', '/license', { token: s.admin.token })).body.license, { max_storage_bytes: 100, usage: { storage_bytes: { used: 90, limit: 100 } } })

    // a license without the limit lifts it at once
    await install(s, { max_storage_bytes: null })
    t.equal((await upload(s, s.user.token, p.id, [{ name: 'later.bin', data: 'x'.repeat(50) }])).status, 201)
  },
  { config: { plugins: { platform: { license: { public_key: rawPublic } } } } },
)
