import http from 'node:http'
import { createHash, generateKeyPairSync, randomUUID, sign } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { assertProblem, onEachDatabase, startTestServer, waitFor } from '../../../core/testing/index.js'
import { encodeHlc } from '../../../plugins/federation/hlc.js'
import { canonical, emptyState, write } from '../../../plugins/federation/kernel.js'
import { signedHeaders } from '../../../plugins/federation/signing.js'
import { shortIdOf } from '../../../plugins/federation/site.js'
import { contentShaOf } from '../../../plugins/federation/transports.js'
import { fedConfig as config, fedOf, helloProof, joinPair } from './helpers.js'

const remoteSite = '11111111-2222-4333-8444-555555555555'
const remoteReplica = `${shortIdOf(remoteSite)}.1`
const wire = (type: string, values: Record<string, any>, uuid = randomUUID()) => ({
  uuid,
  type,
  origin_site: remoteSite,
  owner_site: remoteSite,
  state: canonical(write(emptyState(), remoteReplica, encodeHlc(Date.now(), 0), values)),
})

onEachDatabase(
  t,
  'federation: merge_state, dry_run_merge_state and initial_data through the API',
  async (t, s) => {
    const flag = wire('status_flag', { name: 'Remote', color: '#123456', position: 5 })
    const user = wire('user', { login: 'editor', firstname: 'Eve', lastname: null, email: null, password_hash: null, role: null })
    const flags = async () => (await s.request('GET', '/status_flags', { token: s.admin.token })).body.array.map((f: any) => f.name).sort()

    assertProblem(t, await s.request('POST', '/federation/dry_run_merge_state', { json: { crdts: [flag] } }), 401)
    assertProblem(t, await s.request('POST', '/federation/dry_run_merge_state', { token: s.user.token, json: { crdts: [flag] } }), 403)
    assertProblem(t, await s.request('POST', '/federation/merge_state', { token: s.user.token, json: { crdts: [flag] } }), 403)
    assertProblem(t, await s.request('POST', '/federation/merge_state', { token: s.admin.token, json: { crdts: [{ ...flag, uuid: 'nope' }] } }), 422, ['crdts[0][uuid]'])
    const floaty = { ...flag, uuid: randomUUID(), state: flag.state.replace('"position",', '"position",').replace(/\[5,/, '[5.5,') }
    assertProblem(t, await s.request('POST', '/federation/merge_state', { token: s.admin.token, json: { crdts: [flag, floaty] } }), 422, ['crdts[1][state]'])
    t.same(await flags(), [], 'nothing merged from a refused import')

    // a peer may not claim counters of this site's own replica
    const fed = fedOf(s)
    const mine = fed.replica()
    const forged = { ...flag, uuid: randomUUID(), state: canonical({ v: 1, cc: { [mine]: 7 }, f: { name: [['X', mine, 7, encodeHlc(1, 0)]] } }) }
    assertProblem(t, await s.request('POST', '/federation/merge_state', { token: s.admin.token, json: { crdts: [forged] } }), 422, ['crdts[0][state]'])

    const dry = await s.request('POST', '/federation/dry_run_merge_state', { token: s.admin.token, json: { crdts: [flag, user] } })
    t.equal(dry.status, 200, dry.text)
    t.same(dry.body.merge.report.changed.map((c: any) => c.uuid).sort(), [flag.uuid, user.uuid].sort())
    t.same(dry.body.merge.report.collisions.map((c: any) => `${c.type}:${c.field}:${c.value}`), ['user:login:editor'], 'the login clash is reported before a join')
    t.same(await flags(), [], 'a dry run commits nothing')
    t.notOk(await fed.store.get(flag.uuid))

    // two imports of the same records at once: one row each, one flag
    const [m1, m2] = await Promise.all([1, 2].map(() => s.request('POST', '/federation/merge_state', { token: s.admin.token, json: { crdts: [flag, user] } })))
    t.equal(m1.status, 200, m1.text)
    t.equal(m2.status, 200, m2.text)
    t.same(await flags(), ['Remote'])
    t.equal((await s.runtime.db.knex('federation_crdt_state').where({ uuid: flag.uuid })).length, 1)
    const users = (await s.request('GET', '/users', { token: s.admin.token })).body.users.map((u: any) => u.username)
    t.ok(users.includes(`editor@${shortIdOf(remoteSite)}`), `the remote editor is qualified: ${users}`)
    const again = await s.request('POST', '/federation/merge_state', { token: s.admin.token, json: { crdts: [flag] } })
    t.same(again.body.merge.report.changed, [], 'merging again changes nothing (idempotent)')

    // a concurrent local edit and remote edit of the same flag: both entries kept, the field reported as conflicted
    const local = (await s.request('GET', '/status_flags', { token: s.admin.token })).body.array[0]
    await s.request('PUT', `/status_flags/${local.id}`, { token: s.admin.token, json: { status_flag: { name: 'Local name' } } })
    const concurrent = { ...flag, state: canonical(write(JSON.parse(flag.state), remoteReplica, encodeHlc(1, 0), { name: 'Remote name' })) }
    const conflicted = await s.request('POST', '/federation/dry_run_merge_state', { token: s.admin.token, json: { crdts: [concurrent] } })
    t.same(conflicted.body.merge.report.conflicts, [{ uuid: flag.uuid, type: 'status_flag', fields: ['name'] }])

    // initial_data: admin or signed site; paged with one watermark
    assertProblem(t, await s.request('GET', '/federation/initial_data'), 401)
    assertProblem(t, await s.request('GET', '/federation/initial_data', { token: s.user.token }), 403)
    assertProblem(t, await s.request('GET', '/federation/initial_data', { token: s.admin.token, query: { limit: '0' } }), 422, ['limit'])
    assertProblem(t, await s.request('GET', '/federation/initial_data', { token: s.admin.token, query: { cursor: 'garbage' } }), 422, ['cursor'])
    const seen: string[] = []
    const watermarks = new Set<number>()
    let cursor: string | null = null
    do {
      const page: any = await s.request('GET', '/federation/initial_data', { token: s.admin.token, query: { limit: '2', ...(cursor ? { cursor } : {}) } })
      t.equal(page.status, 200)
      seen.push(...page.body.initial_data.crdts.map((c: any) => c.uuid))
      watermarks.add(page.body.initial_data.watermark.seq)
      cursor = page.body.initial_data.cursor
    } while (cursor)
    const all = await s.runtime.db.knex('federation_crdt_state').select('uuid')
    t.equal(seen.length, all.length, 'every record once')
    t.equal(new Set(seen).size, seen.length)
    t.equal(watermarks.size, 1, 'one watermark for the whole snapshot')
  },
  { config },
)

onEachDatabase(
  t,
  'federation: signed site requests, gossip, sites, hello races',
  async (t, a) => {
    const b = await startTestServer({ db: a.db, config })
    t.teardown(() => b.close())
    await joinPair(a, b)
    const fa = fedOf(a)
    const fb = fedOf(b)
    const gossip = (extra: Record<string, unknown> = {}) => ({ protocol: 1, federation: fa.site.current.federation_uuid, from: fb.site.current.site_uuid, crdts: [], ...extra })

    // signed by B: accepted
    const ok = await fb.call(a.base, 'POST', '/gossip', gossip({ recv_seq: 0 }))
    t.equal(ok.status, 200)
    t.type(ok.body.gossip.root, 'string')
    // not signed: 401; an admin's key is no site: 403
    assertProblem(t, await a.request('POST', '/gossip', { json: gossip() }), 401)
    assertProblem(t, await a.request('POST', '/gossip', { token: a.admin.token, json: gossip() }), 403)
    // an unknown key, a body that is not the signed one, a replayed nonce: 401
    const stranger = generateKeyPairSync('ed25519')
    const strangerUuid = randomUUID()
    const signFor = (key: typeof stranger.privateKey) => (d: string) => sign(null, Buffer.from(d), key).toString('base64')
    const post = (headers: Record<string, string>, body: unknown) => fetch(`${a.url}/gossip`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const unknownSite = await post(signedHeaders(signFor(stranger.privateKey), strangerUuid, 'POST', '/api/v1/gossip', gossip({ from: strangerUuid })), gossip({ from: strangerUuid }))
    t.equal(unknownSite.status, 401, 'a site nobody introduced')
    const bKey = (d: string) => fb.site.sign(d)
    const signed = signedHeaders(bKey, fb.site.current.site_uuid, 'POST', '/api/v1/gossip', gossip())
    t.equal((await post(signed, gossip({ root: '0000000000000000' }))).status, 401, 'the body is not the one signed')
    t.equal((await post(signed, gossip())).status, 200, 'the signed body')
    t.equal((await post(signed, gossip())).status, 401, 'the same nonce again')
    // B may not speak for another site, nor for another federation or protocol
    assertProblem(t, await fb.call(a.base, 'POST', '/gossip', gossip({ from: randomUUID() })), 422)
    t.equal((await fb.call(a.base, 'POST', '/gossip', gossip({ federation: randomUUID() }))).status, 409)
    t.equal((await fb.call(a.base, 'POST', '/gossip', gossip({ protocol: 2 }))).status, 409)

    // a bad state in a gossip page is refused by itself; the rest is applied
    const good = wire('status_flag', { name: 'From B', color: '#000000', position: 1 })
    const bad = { ...wire('status_flag', { name: 'x' }), state: '{"v":1,"cc":{},"f":{"name":[["x","abcdef.1",1,"0000000000010000"]]}}' }
    const mixed = await fb.call(a.base, 'POST', '/gossip', gossip({ crdts: [good, bad], seq_to: 5 }))
    t.equal(mixed.status, 200)
    t.same(mixed.body.gossip.rejected.map((r: any) => r.uuid), [bad.uuid])
    t.equal(mixed.body.gossip.applied_to, null, 'a page with a refused record is not acknowledged')
    t.ok(await fa.store.get(good.uuid))

    // PUT /gossip: equal roll-ups, bad prefixes named
    await fb.round()
    const level1 = await fb.call(a.base, 'PUT', '/gossip', { protocol: 1, level: 1, checksums: await fb.store.rollup(1) })
    t.equal(level1.status, 200)
    t.same(level1.body.gossip.differing, [], 'converged after a round')
    assertProblem(t, await fb.call(a.base, 'PUT', '/gossip', { protocol: 1, level: 1, checksums: { '123': '0000000000000000' } }), 422, ['checksums'])
    assertProblem(t, await fb.call(a.base, 'PUT', '/gossip', { protocol: 1, level: 'rows', prefix: '000' }), 422, ['depth'])
    assertProblem(t, await a.request('PUT', '/gossip', { token: a.admin.token, json: { protocol: 1, level: 1 } }), 403)
    // anti-entropy repairs what a lost push left behind
    await a.request('POST', '/status_flags', { token: a.admin.token, json: { status_flag: { name: 'Lost push', color: '#111111' } } })
    await fa.transaction((em, k) => fa.capture(em, k))
    const peerOfA = (await fb.peers())[0]
    const repaired = await fb.antiEntropy(peerOfA)
    t.ok(repaired.pulled >= 1, `pulled ${repaired.pulled} in ${repaired.roundTrips} round trips`)
    t.ok((await b.request('GET', '/status_flags', { token: b.admin.token })).body.array.some((f: any) => f.name === 'Lost push'))
    t.equal(await fa.store.root(), await fb.store.root())

    // PUT /site/:id: admin only; suspended sites are refused, then let back in; left is final
    const bAtA = (await a.request('GET', '/sites', { token: a.admin.token })).body.sites.find((x: any) => !x.self)
    assertProblem(t, await a.request('PUT', `/site/${bAtA.id}`, { token: a.user.token, json: { site: { status: 'suspended' } } }), 403)
    assertProblem(t, await a.request('PUT', '/site/999', { token: a.admin.token, json: { site: { name: 'x' } } }), 404)
    assertProblem(t, await a.request('PUT', `/site/${bAtA.id}`, { token: a.admin.token, json: { site: { status: 'gone' } } }), 422, ['site[status]'])
    assertProblem(t, await a.request('PUT', '/site/0', { token: a.admin.token, json: { site: { status: 'left' } } }), 422, ['site[status]'])
    const suspended = await a.request('PUT', `/site/${bAtA.id}`, { token: a.admin.token, json: { site: { status: 'suspended', name: 'Paris' } } })
    t.equal(suspended.status, 200, suspended.text)
    t.equal(suspended.body.site.status, 'suspended')
    t.equal((await fb.call(a.base, 'POST', '/gossip', gossip())).status, 403, 'a suspended site is refused')
    t.equal((await a.request('PUT', `/site/${bAtA.id}`, { token: a.admin.token, json: { site: { status: 'active' } } })).status, 200)
    t.equal((await fb.call(a.base, 'POST', '/gossip', gossip())).status, 200)
    t.equal((await a.request('PUT', '/site/0', { token: a.admin.token, json: { site: { name: 'Berlin' } } })).body.site.name, 'Berlin')

    // two hellos with one invite at once: one joins, the other is told the invite was used
    const inv = (await a.request('POST', '/federation/initiate_join', { token: a.admin.token, json: { name: 'C' } })).body.invite.invite.split('|')
    const hello = () => {
      const keys = generateKeyPairSync('ed25519')
      const uuid = randomUUID()
      const pub = keys.publicKey.export({ format: 'der', type: 'spki' }).toString('base64')
      const body = { phase: 'hello', token_id: inv[2], site: { uuid, name: 'C', base_url: null, public_key: pub, replica: `${shortIdOf(uuid)}.1` }, nonce_j: 'n'.repeat(22) }
      const full = { ...body, proof: helloProof(inv[3], body) }
      return fetch(`${a.url}/federation/initiate_join`, { method: 'POST', headers: { ...signedHeaders(signFor(keys.privateKey), uuid, 'POST', '/api/v1/federation/initiate_join', full), 'content-type': 'application/json' }, body: JSON.stringify(full) })
    }
    const statuses = (await Promise.all([hello(), hello()])).map((r) => r.status).sort()
    t.same(statuses, [200, 409], 'single use under a race')
    const badProof = await (async () => {
      const inv2 = (await a.request('POST', '/federation/initiate_join', { token: a.admin.token, json: { name: 'D' } })).body.invite.invite.split('|')
      const keys = generateKeyPairSync('ed25519')
      const uuid = randomUUID()
      const pub = keys.publicKey.export({ format: 'der', type: 'spki' }).toString('base64')
      const full = { phase: 'hello', token_id: inv2[2], site: { uuid, name: 'D', base_url: null, public_key: pub, replica: `${shortIdOf(uuid)}.1` }, nonce_j: 'n'.repeat(22), proof: 'AAAA' }
      return fetch(`${a.url}/federation/initiate_join`, { method: 'POST', headers: { ...signedHeaders(signFor(keys.privateKey), uuid, 'POST', '/api/v1/federation/initiate_join', full), 'content-type': 'application/json' }, body: JSON.stringify(full) })
    })()
    t.equal(badProof.status, 422)
    t.same(((await badProof.json()) as any).errors.map((e: any) => e.param), ['proof'])
    // a pending site (the hello winner) may read the snapshot but not gossip
    t.equal((await a.request('GET', '/sites', { token: a.admin.token })).body.sites.filter((x: any) => x.status === 'pending').length, 1)
  },
  { config },
)

onEachDatabase(
  t,
  'federation: transports are received once and their bytes verified by a job',
  async (t, s) => {
    const bundle = Buffer.from(JSON.stringify({ crdts: [wire('status_flag', { name: 'Bundled', color: '#abcdef', position: 9 })] }))
    const files: Record<string, Buffer> = { '/bundle.json': bundle, '/liar.json': Buffer.from('not what was announced') }
    const source = http.createServer((req, res) => {
      const body = files[req.url ?? '']
      res.statusCode = body ? 200 : 404
      res.end(body ?? '')
    })
    await new Promise<void>((r) => source.listen(0, '127.0.0.1', r))
    t.teardown(() => new Promise<void>((r) => source.close(() => r())))
    const at = `http://127.0.0.1:${(source.address() as AddressInfo).port}`
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
    const fed = fedOf(s)
    const from = fed.site.current.site_uuid
    const manifest = [{ sha256: sha(bundle), size: bundle.length, role: 'bundle', url: `${at}/bundle.json` }]
    const body = { federation_transport: { from_site: from, kind: 'bundle', manifest, content_sha256: contentShaOf(manifest) } }

    assertProblem(t, await s.request('POST', '/federation_transports', { json: body }), 401)
    assertProblem(t, await s.request('POST', '/federation_transports', { token: s.user.token, json: body }), 403)
    assertProblem(t, await s.request('POST', '/federation_transports', { token: s.admin.token, json: { federation_transport: { ...body.federation_transport, content_sha256: '0'.repeat(64) } } }), 422, ['federation_transport[content_sha256]'])
    assertProblem(t, await s.request('POST', '/federation_transports', { token: s.admin.token, json: { federation_transport: { ...body.federation_transport, from_site: randomUUID() } } }), 422, ['federation_transport[from_site]'])
    assertProblem(t, await s.request('POST', '/federation_transports', { token: s.admin.token, json: { federation_transport: { ...body.federation_transport, kind: 'pigeon' } } }), 422, ['federation_transport[kind]'])
    t.equal((await s.runtime.db.knex('federation_transports')).length, 0, 'nothing recorded from refused requests')

    // the same transport twice at once: one record
    const [r1, r2] = await Promise.all([1, 2].map(() => s.request('POST', '/federation_transports', { token: s.admin.token, json: body })))
    t.same([r1.status, r2.status].sort(), [200, 201])
    t.equal(r1.body.federation_transport.id, r2.body.federation_transport.id)
    const id = r1.body.federation_transport.id
    const applied = await waitFor('the bundle applied', async () => {
      const row = await s.runtime.db.knex('federation_transports').where({ id }).first()
      return row.status !== 'pending' && row
    })
    t.equal(applied.status, 'applied', applied.error ?? '')
    t.ok((await s.request('GET', '/status_flags', { token: s.admin.token })).body.array.some((f: any) => f.name === 'Bundled'))
    t.equal((await s.request('POST', '/federation_transports', { token: s.admin.token, json: body })).body.federation_transport.status, 'applied')

    // bytes that are not what the manifest says: failed, with the reason
    const lie = [{ sha256: sha(Buffer.from('the announced content')), size: files['/liar.json'].length, role: 'original', url: `${at}/liar.json` }]
    const lying = await s.request('POST', '/federation_transports', { token: s.admin.token, json: { federation_transport: { from_site: from, kind: 'media', manifest: lie, content_sha256: contentShaOf(lie) } } })
    t.equal(lying.status, 201)
    const failed = await waitFor('the transport failed', async () => {
      const row = await s.runtime.db.knex('federation_transports').where({ id: lying.body.federation_transport.id }).first()
      return row.status !== 'pending' && row
    })
    t.equal(failed.status, 'failed')
    t.match(failed.error, /SHA-256/)
  },
  { config },
)
