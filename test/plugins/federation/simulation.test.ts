import t from 'tap'
import { onEachDatabase, startTestServer, type TestServer } from '../../../core/testing/index.js'
import type { FederationService } from '../../../plugins/federation/index.js'
import { converge, fedConfig, fedOf, joinPair } from './helpers.js'

/**
 * Layer 2 (FEDERATION.md §9.2), seeded: three real servers in this process; every site-to-site
 * call goes through a faulty link that drops requests, loses responses (the sender re-sends what
 * was applied), duplicates, and holds requests back to deliver them later, out of order. Two sites
 * run with clocks a day off. Random edits at all sites, then heal: the sites must converge (same
 * root, same records and checksums, same lists through the API), and a write made after seeing
 * another wins whatever the clocks say. A failing seed replays: MAMKIT_FEDERATION_SEED=<seed>.
 */
const SEED = Number(process.env.MAMKIT_FEDERATION_SEED ?? 20261124)
const DAY = 86_400_000

function mulberry32(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

type Call = FederationService['call']
interface Faults { dropped: number; lostResponses: number; duplicated: number; held: number; delivered: number }

function faultyLink(fed: FederationService, rng: () => number, faults: Faults): () => void {
  const real: Call = fed.call.bind(fed)
  const held: (() => Promise<unknown>)[] = []
  const faulty = (async (url: string, method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown) => {
    while (held.length && rng() < 0.5) {
      faults.delivered++
      await held.splice(Math.floor(rng() * held.length), 1)[0]().catch(() => undefined)
    }
    const r = rng()
    if (r < 0.15) {
      faults.dropped++
      throw new Error('link: request dropped')
    }
    if (r < 0.25) {
      faults.lostResponses++
      await real(url, method, path, body)
      throw new Error('link: response lost')
    }
    if (r < 0.32) {
      faults.held++
      held.push(() => real(url, method, path, body))
      throw new Error('link: request held back')
    }
    const res = await real(url, method, path, body)
    if (r < 0.42) {
      faults.duplicated++
      await real(url, method, path, body)
    }
    return res
  }) as Call
  fed.call = faulty
  return () => {
    fed.call = real
  }
}

const pick = <T>(rng: () => number, list: T[]): T | undefined => (list.length ? list[Math.floor(rng() * list.length)] : undefined)

async function listsOf(s: TestServer) {
  const flags = (await s.request('GET', '/status_flags', { token: s.admin.token })).body.array.map((f: any) => `${f.name}:${f.color}`).sort()
  const teams = (await s.request('GET', '/teams', { token: s.admin.token })).body.teams.filter((x: any) => !x.user_owned).map((x: any) => `${x.name}:${x.users.length}`).sort()
  const roles = (await s.request('GET', '/roles', { token: s.admin.token })).body.array.map((r: any) => `${r.name}:${JSON.stringify(Object.entries(r.role_matrix).sort())}`).sort()
  return { flags, teams, roles }
}

onEachDatabase(t, `federation: seeded simulation with loss, duplication, reordering and skewed clocks (seed ${SEED})`, async (t, a) => {
  const rng = mulberry32(SEED)
  const b = await startTestServer({ db: a.db, config: { plugins: { federation: { gossipIntervalMs: 0, clockOffsetMs: -DAY } } } })
  t.teardown(() => b.close())
  const c = await startTestServer({ db: a.db, config: { plugins: { federation: { gossipIntervalMs: 0, clockOffsetMs: DAY } } } })
  t.teardown(() => c.close())
  const sites = [a, b, c]
  await joinPair(a, b)
  await joinPair(a, c)
  await converge(sites)
  const sitesSeen = await Promise.all(sites.map(async (s) => (await s.request('GET', '/sites', { token: s.admin.token })).body.sites.filter((x: any) => x.status === 'active').length))
  t.same(sitesSeen, [3, 3, 3], 'every site knows all three as active')

  const faults: Faults = { dropped: 0, lostResponses: 0, duplicated: 0, held: 0, delivered: 0 }
  const heal = sites.map((s) => faultyLink(fedOf(s), rng, faults))
  let n = 0
  for (let step = 0; step < 60; step++) {
    const s = pick(rng, sites)!
    const auth = { token: s.admin.token }
    const flags: any[] = (await s.request('GET', '/status_flags', auth)).body.array
    const teams: any[] = (await s.request('GET', '/teams', auth)).body.teams.filter((x: any) => !x.user_owned)
    const roles: any[] = (await s.request('GET', '/roles', auth)).body.array.filter((r: any) => !r.builtin)
    const r = rng()
    const color = `#${Math.floor(rng() * 0xffffff).toString(16).padStart(6, '0')}`
    if (r < 0.2) await s.request('POST', '/status_flags', { ...auth, json: { status_flag: { name: `flag ${++n}`, color } } })
    else if (r < 0.35 && flags.length) await s.request('PUT', `/status_flags/${pick(rng, flags).id}`, { ...auth, json: { status_flag: { name: `renamed ${++n}` } } })
    else if (r < 0.45 && flags.length) await s.request('PUT', `/status_flags/${pick(rng, flags).id}`, { ...auth, json: { status_flag: { color } } })
    else if (r < 0.52 && flags.length) await s.request('DELETE', `/status_flags/${pick(rng, flags).id}`, auth)
    else if (r < 0.62) await s.request('POST', '/teams', { ...auth, json: { team: { name: `team ${++n}` } } })
    else if (r < 0.75 && teams.length) {
      const users: any[] = (await s.request('GET', '/users', auth)).body.users
      await s.request('POST', `/teams/${pick(rng, teams).id}/users/${pick(rng, users).id}`, auth)
    } else if (r < 0.82) await s.request('POST', '/roles', { ...auth, json: { role: { name: `role ${++n}`, role_matrix: { 'projects.create': true } } } })
    else if (r < 0.9 && roles.length) {
      const role = pick(rng, roles)
      await s.request('PUT', `/roles/${role.id}`, { ...auth, json: { role: { role_matrix: { 'projects.create': rng() < 0.5, 'templates.manage': rng() < 0.5 } } } })
    } else await fedOf(s).round() // a partial exchange through the faulty links
  }
  t.ok(faults.dropped + faults.lostResponses + faults.held + faults.duplicated > 0, `faults injected: ${JSON.stringify(faults)}`)
  for (const h of heal) h()

  // heal: the sites converge (C1) …
  const root = await converge(sites, 10)
  const records = await Promise.all(sites.map(async (s) => (await s.runtime.db.knex('federation_crdt_state').orderBy('uuid').select('uuid', 'type', 'checksum')).map((r: any) => `${r.type}:${r.uuid}:${r.checksum}`)))
  t.same(records[1], records[0], 'B holds the records and checksums of A')
  t.same(records[2], records[0], 'C holds the records and checksums of A')
  t.type(root, 'string')
  // … and show the same lists (C2)
  const lists = await Promise.all(sites.map(listsOf))
  t.same(lists[1], lists[0], 'the same flags, teams and roles at A and B')
  t.same(lists[2], lists[0], 'the same flags, teams and roles at A and C')
  // idle rounds move nothing (C6)
  const seqs = await Promise.all(sites.map((s) => fedOf(s).store.currentSeq()))
  for (const s of sites) await fedOf(s).round()
  t.same(await Promise.all(sites.map((s) => fedOf(s).store.currentSeq())), seqs, 'converged sites write nothing more')

  // causality beats clocks (C4): C (a day ahead) names a flag; B (a day behind) renames it after seeing that
  const made = await c.request('POST', '/status_flags', { token: c.admin.token, json: { status_flag: { name: 'skew test', color: '#000000' } } })
  t.equal(made.status, 201)
  await converge(sites)
  const atB = (await b.request('GET', '/status_flags', { token: b.admin.token })).body.array.find((f: any) => f.name === 'skew test')
  await b.request('PUT', `/status_flags/${atB.id}`, { token: b.admin.token, json: { status_flag: { name: 'renamed behind' } } })
  await converge(sites)
  for (const s of sites) t.ok((await s.request('GET', '/status_flags', { token: s.admin.token })).body.array.some((f: any) => f.name === 'renamed behind'), 'the later write wins with a clock two days behind')
  // every round is the test's own, A's too: a timer's rounds drew from the seeded faults (a seed did
  // not replay) and merged while the steps edited (that race: concurrent-edits.test)
}, { config: fedConfig })
