import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, createProject, onEachDatabase, waitForJob, type TestServer } from '../../../core/testing/index.js'
import { identityOf } from '../../../core/index.js'
import type { TierService } from '../../../plugins/strategies/tier.js'
import type { StorageJournal } from '../../../core/index.js'
import { exists, listTree, writeTree } from '../projects/fixtures.js'
import { diskStrategy, sha, targetRoot } from './fixtures.js'
import { randomBytes } from 'node:crypto'

const dir = await targetRoot(t)
const slowRoot = await mkdtemp(path.join(tmpdir(), 'mamkit-slow-'))
t.teardown(() => rm(slowRoot, { recursive: true, force: true }))
/** each test its own slow storage, emptied after each database's run (project folders are named alike) */
const slowOf = (name: string) => path.join(slowRoot, name)
const storagesConfig = (name: string) => ({ storage: { storages: { slow: slowOf(name) } } })

const FILES = { 'a.txt': 'alpha', 'Media/clip.mov': randomBytes(2 * 1024 * 1024 + 5), 'Media/Sub/still.jpg': randomBytes(4096), '.hidden/settings.xml': '<x/>' }
const knex = (s: TestServer) => s.runtime.db.knex
const tierService = (s: TestServer) => s.runtime.container.resolve<TierService>('strategies.tier')
const journal = (s: TestServer) => s.runtime.container.resolve<StorageJournal>('projects.storageJournal')
const rowOf = (s: TestServer, id: number) => knex(s)('projects').where({ id }).first('storage', 'folder', 'updated_at')
const ctx = (signal = new AbortController().signal, progress: (f: number) => void = () => {}) => ({ signal, progress, log: { warn() {}, info() {}, error() {} } as any })

async function projectWithFiles(s: TestServer, name: string) {
  const p = await createProject(s, s.user, name)
  await writeTree(p.path, FILES)
  await mkdir(path.join(p.path, 'Empty/Folder'), { recursive: true })
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: ['a.txt', 'Media/clip.mov'] } })
  if (added.status !== 201) throw new Error(`addassets ${added.status} ${added.text}`)
  return p
}

async function assertWhole(t: any, root: string, what: string) {
  for (const [f, data] of Object.entries(FILES)) t.equal(sha(await readFile(path.join(root, f))), sha(Buffer.from(data)), `${what}: ${f} byte-identical`)
  t.ok(await exists(path.join(root, 'Empty/Folder')), `${what}: empty folders too`)
}

onEachDatabase(
  t,
  'POST /projects/tier: copy, verify, switch, remove the old tree; refusals; a policy; two requests at once',
  async (t, s) => {
    const slow = slowOf('a')
    t.teardown(() => rm(slow, { recursive: true, force: true }))
    const p = await projectWithFiles(s, 'Tiered')
    const before = await rowOf(s, p.id)
    t.equal(before.storage, 'default')

    assertProblem(t, await s.request('POST', '/projects/tier', { json: { project_id: p.id, storage: 'slow' } }), 401)
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.user.token, json: { project_id: p.id, storage: 'slow' } }), 403)
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: 999999, storage: 'slow' } }), 404)
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id, storage: 'tape' } }), 422, ['storage'])
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id } }), 422, ['storage'])
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { storage: 'slow' } }), 422, ['project_ids'])
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { storage: 'slow', last_used_before: 'last tuesday' } }), 422, ['last_used_before'])
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_ids: [p.id], older_than_days: 3, storage: 'slow' } }), 422, ['older_than_days'])
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id, storage: 'default' } }), 409, ['storage'])
    // frozen: 423, like an archive
    t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id, storage: 'slow' } }), 423)
    t.equal((await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })).status, 200)
    // being archived: 409
    const archive = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-tier`))
    await knex(s)('archive_states').insert({ project_id: p.id, archive_strategy_id: archive.id, direction: 'archive', stage: 'copying', state: 'copying', archive_key: 'k', created_at: new Date(), updated_at: new Date() })
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id, storage: 'slow' } }), 409)
    await knex(s)('archive_states').where({ project_id: p.id }).delete()
    t.equal(await knex(s)('jobs').where({ type: 'strategies.tier' }).count({ n: '*' }).then((r: any) => Number(r[0].n)), 0, 'no refused request queued a job')
    t.same(await rowOf(s, p.id), before, 'nor changed the project')

    const moved = await s.request('POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id, storage: 'slow' } })
    t.equal(moved.status, 202, moved.text)
    t.equal(moved.body.jobs.length, 1)
    const job = await waitForJob(s, s.admin.token, moved.body.job.id)
    t.equal(job.state, 'finished', job.error ?? '')
    const after = await rowOf(s, p.id)
    t.match(after, { storage: 'slow', folder: before.folder })
    await assertWhole(t, path.join(slow, before.folder), 'on slow')
    t.notOk(await exists(p.path), 'the old tree is gone')
    t.same((await listTree(slow)).filter((f) => f.startsWith('.mamkit')), [], 'no staging left on the target')
    const shown = await s.request('GET', `/projects/${p.id}`, { token: s.admin.token })
    t.equal(shown.body.project.storage, 'slow')
    t.equal(shown.body.project.path, path.join(slow, before.folder), 'the path follows')
    const asset = await s.request('GET', '/assets/by_path', { token: s.user.token, query: { project_id: String(p.id), path: 'Media/clip.mov' } })
    t.equal(asset.status, 200, `the asset is found at its path on the new storage: ${asset.text.slice(0, 200)}`)

    // a policy: not used for 30 days; the moved project is on slow already, the fresh one is too new
    const old = await projectWithFiles(s, 'Old and idle')
    const fresh = await createProject(s, s.user, 'Fresh')
    await knex(s)('projects').where({ id: old.id }).update({ created_at: new Date(Date.now() - 90 * 86_400_000) })
    await knex(s)('projects').where({ id: p.id }).update({ created_at: new Date(Date.now() - 90 * 86_400_000) })
    const policy = await s.request('POST', '/projects/tier', { token: s.admin.token, json: { storage: 'slow', older_than_days: 30 } })
    t.equal(policy.status, 202, policy.text)
    t.same(policy.body.jobs.map((j: any) => j.project_id), [old.id], 'only the idle project on another storage')
    t.equal((await waitForJob(s, s.admin.token, policy.body.job.id)).state, 'finished')
    t.equal((await rowOf(s, old.id)).storage, 'slow')
    t.equal((await rowOf(s, fresh.id)).storage, 'default')
    assertProblem(t, await s.request('POST', '/projects/tier', { token: s.admin.token, json: { storage: 'slow', older_than_days: 30 } }), 422, ['older_than_days'])

    // back, twice at once: the claim on the project lets exactly one through, the other is a 409
    const racing = await Promise.all([1, 2].map(() => s.request('POST', '/projects/tier', { token: s.admin.token, form: { 'project_ids[]': String(p.id), storage: 'default' } })))
    const accepted = racing.filter((r) => r.status === 202)
    t.equal(accepted.length, 1, `exactly one accepted (${racing.map((r) => r.status).join(', ')})`)
    for (const r of racing.filter((x) => x.status !== 202)) assertProblem(t, r, 409)
    t.equal(await knex(s)('jobs').where({ type: 'strategies.tier', project_id: p.id }).whereIn('state', ['queued', 'running']).count({ n: '*' }).then((r: any) => Number(r[0].n)) <= 1, true, 'one move queued')
    for (const r of accepted) t.equal((await waitForJob(s, s.admin.token, r.body.job.id)).state, 'finished')
    t.equal(await knex(s)('tier_claims').where({ project_id: p.id }).count({ n: '*' }).then((r: any) => Number(r[0].n)), 0, 'the finished job gave its claim up')
    t.equal((await rowOf(s, p.id)).storage, 'default')
    await assertWhole(t, p.path, 'back on default')
    t.notOk(await exists(path.join(slow, before.folder)), 'nothing left on slow')
  },
  { config: { plugins: { strategies: { roots: [dir] }, ...storagesConfig('a') } } },
)

onEachDatabase(
  t,
  'tier: stopped mid-way rolls back; a crash before or after the switch is repaired from the journal',
  async (t, s) => {
    const slow = slowOf('b')
    t.teardown(() => rm(slow, { recursive: true, force: true }))
    const p = await projectWithFiles(s, 'Interrupted')
    const row = await rowOf(s, p.id)

    // stopped after the first file: the copy goes, the project stays whole where it was
    const stop = new AbortController()
    await t.rejects(tierService(s).tier(s.em(), p.id, 'slow', ctx(stop.signal, () => stop.abort())))
    t.equal((await rowOf(s, p.id)).storage, 'default')
    await assertWhole(t, p.path, 'after the stop')
    t.same(await listTree(slow), [], 'nothing left on the target storage')
    t.equal(await knex(s)('storage_journal').count({ n: '*' }).then((r: any) => Number(r[0].n)), 0, 'the journal entry ended')

    // a process killed while copying: its entry lapsed, the half copy sits in the staging folder
    const staging = path.join(slow, `.mamkit-tier-${p.id}`)
    await mkdir(staging, { recursive: true })
    await writeFile(path.join(staging, 'a.txt'), 'alp')
    const dead = async (payload: unknown) => {
      await knex(s)('storage_journal').insert({ kind: 'strategies.tier', scope: `project:${p.id}`, exclusive: true, payload: JSON.stringify(payload), owner: 'dead-host:1:abc', lease_until: new Date(Date.now() - 60_000), created_at: new Date(), updated_at: new Date() })
    }
    const id = async (f: string) => {
      const i = await identityOf(f)
      return i ? { dev: i.dev, ino: i.ino } : null
    }
    const intent = { projectId: p.id, from: { storage: 'default', folder: row.folder }, to: { storage: 'slow', folder: row.folder }, source: await id(p.path), staging: await id(staging) }
    await dead(intent)
    t.equal(await journal(s).reconcile(), 1, 'repaired')
    t.notOk(await exists(staging), 'before the switch: the half copy goes')
    t.equal((await rowOf(s, p.id)).storage, 'default')
    await assertWhole(t, p.path, 'rolled back')

    // killed after the switch, before the old tree went: the repair finishes the move
    const final = path.join(slow, row.folder)
    await cp(p.path, final, { recursive: true })
    await knex(s)('projects').where({ id: p.id }).update({ storage: 'slow' })
    await dead({ ...intent, staging: await id(final) })
    t.equal(await journal(s).reconcile(), 1, 'repaired')
    t.notOk(await exists(p.path), 'after the switch: the old tree goes')
    await assertWhole(t, final, 'finished')
    t.equal((await rowOf(s, p.id)).storage, 'slow')

    // a rerun of a job whose project moved already is done at once (at least once)
    const again = await tierService(s).tier(s.em(), p.id, 'slow', ctx())
    t.match(again, { moved: false, storage: 'slow' })

    // claims (jobs do not run in this server): a queued move holds the project, an ended one does not
    const claims = () => knex(s)('tier_claims').where({ project_id: p.id }).select('job_id')
    const home = { token: s.admin.token, json: { project_id: p.id, storage: 'default' } }
    const first = await s.request('POST', '/projects/tier', home)
    t.equal(first.status, 202, first.text)
    t.same((await claims()).map((c: any) => Number(c.job_id)), [first.body.job.id], 'claimed for its job')
    assertProblem(t, await s.request('POST', '/projects/tier', home), 409)
    await knex(s)('jobs').where({ id: first.body.job.id }).update({ state: 'failed' })
    const second = await s.request('POST', '/projects/tier', home)
    t.equal(second.status, 202, `a claim whose job failed is taken over: ${second.text}`)
    t.same((await claims()).map((c: any) => Number(c.job_id)), [second.body.job.id])
    // a request that died between its claim and its job: the claim holds for a while, then lapses
    await knex(s)('jobs').where({ id: second.body.job.id }).update({ state: 'cancelled' })
    await knex(s)('tier_claims').where({ project_id: p.id }).update({ job_id: null, created_at: new Date() })
    assertProblem(t, await s.request('POST', '/projects/tier', home), 409)
    await knex(s)('tier_claims').where({ project_id: p.id }).update({ created_at: new Date(Date.now() - 10 * 60_000) })
    t.equal((await s.request('POST', '/projects/tier', home)).status, 202, 'a claim without a job for minutes lapses')
    t.equal((await claims()).length, 1)
  },
  { runJobs: false, config: { plugins: { strategies: { roots: [dir] }, ...storagesConfig('b') } } },
)
