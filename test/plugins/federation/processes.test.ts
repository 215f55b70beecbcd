import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { request } from '../../../core/testing/index.js'
import { killAll, login, serveProcess, waitFor } from '../../helpers/process.js'

/**
 * Layer 3, short (FEDERATION.md §9.3): three `mamkit serve` processes on loopback, each with its
 * own data directory and SQLite database and its gossip timer on; one clock a day ahead. Two join
 * the first, all edit at once, and every site ends with the same flags and teams.
 */
const DAY = 86_400_000
t.teardown(killAll)

t.test('three real servers join and converge after concurrent edits', async (t) => {
  const dirs: string[] = []
  t.teardown(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))))
  const start = async (name: string, clockOffsetMs = 0) => {
    const dir = await mkdtemp(path.join(tmpdir(), `mamkit-fed-${name}-`))
    dirs.push(dir)
    const config = path.join(dir, 'mamkit.json')
    await writeFile(config, JSON.stringify({ plugins: { federation: { name, gossipIntervalMs: 300, clockOffsetMs, peerTimeoutMs: 5000 } } }))
    const proc = await serveProcess(dir, undefined, ['--config', config])
    return { name, url: proc.url, proc, token: await login(proc.url) }
  }
  const [a, b, c] = await Promise.all([start('Berlin'), start('Paris'), start('Oslo', DAY)])
  const sites = [a, b, c]
  const req = (s: typeof a, method: string, p: string, json?: unknown, query?: Record<string, string>) => request(s.url, method, p, { token: s.token, json, query })

  for (const joiner of [b, c]) {
    const invite = (await req(a, 'POST', '/federation/initiate_join', { name: joiner.name })).body.invite.invite
    const joined = await req(joiner, 'POST', '/federation/finalize_join', { invite })
    t.equal(joined.status, 200, `${joiner.name} joined: ${joined.text}`)
  }
  await waitFor('every site to see three active sites', async () => {
    const counts = await Promise.all(sites.map(async (s) => (await req(s, 'GET', '/sites')).body.sites.filter((x: any) => x.status === 'active').length))
    return counts.every((n) => n === 3)
  }, 30_000)

  // concurrent edits at all three sites
  await Promise.all(
    sites.flatMap((s) => [
      req(s, 'POST', '/status_flags', { status_flag: { name: `flag of ${s.name}`, color: '#123456' } }),
      req(s, 'POST', '/teams', { team: { name: `team of ${s.name}` } }),
      req(s, 'POST', '/roles', { role: { name: `role of ${s.name}`, role_matrix: { 'projects.create': true } } }),
    ]),
  )
  const view = async (s: typeof a) => {
    const flags = (await req(s, 'GET', '/status_flags')).body.array.map((f: any) => `${f.name}:${f.color}`).sort()
    const teams = (await req(s, 'GET', '/teams')).body.teams.filter((x: any) => !x.user_owned).map((x: any) => x.name).sort()
    const roles = (await req(s, 'GET', '/roles')).body.array.map((r: any) => r.name).sort()
    return JSON.stringify({ flags, teams, roles })
  }
  const converged = await waitFor('the sites to converge', async () => {
    const views = await Promise.all(sites.map(view))
    return views.every((v) => v === views[0]) && views[0].includes('flag of Oslo') && views[0].includes('team of Paris') && views[0]
  }, 30_000)
  t.match(converged, /flag of Berlin.*flag of Oslo.*flag of Paris/)

  // a concurrent edit of one flag at two sites: both fields kept everywhere
  const flagAt = async (s: typeof a) => (await req(s, 'GET', '/status_flags')).body.array.find((f: any) => f.name === 'flag of Berlin')
  const [fa, fb] = await Promise.all([flagAt(a), flagAt(b)])
  await Promise.all([req(a, 'PUT', `/status_flags/${fa.id}`, { status_flag: { color: '#ff0000' } }), req(b, 'PUT', `/status_flags/${fb.id}`, { status_flag: { name: 'flag renamed in Paris' } })])
  await waitFor('both edits everywhere', async () => {
    const views = await Promise.all(sites.map(view))
    return views.every((v) => v.includes('flag renamed in Paris:#ff0000'))
  }, 30_000)
  const health = (await req(a, 'GET', '/sites')).body.sites.filter((x: any) => !x.self)
  t.ok(health.every((x: any) => x.link.last_ok_at), 'every link has exchanged')
})
