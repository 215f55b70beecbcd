/** cancel, includes, linked files and a full target, with the archive engine run step by step (jobs off) */
import { execFileSync } from 'node:child_process'
import { link, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase } from '../../helpers/index.js'
import { exists, row } from '../projects/fixtures.js'
import { FILES, archivedProject, diskStrategy, runArchive, sha, targetRoot } from './fixtures.js'

const dir = await targetRoot(t)
const options = { runJobs: false, config: { plugins: { strategies: { roots: [dir] } } } }

onEachDatabase(
  t,
  'cancel before and during the release leaves the project whole online and the target empty',
  async (t, s) => {
    const dest = path.join(dir, `${s.db}-cancel`)
    const strategy = await diskStrategy(s, 'archive_strategies', dest)
    const { p, sums } = await archivedProject(s, 'Cancelled', FILES, false)
    const size = Number((await row(s, 'projects', { id: p.id })).size)

    // queued, then cancelled before it ran
    t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })).status, 202)
    const reader = await s.createUser('nobody')
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/cancel_archiving`, { token: reader.token }), 404)
    const cancel = await s.request('PUT', `/projects/${p.id}/cancel_archiving`, { token: s.user.token })
    t.equal(cancel.status, 200, cancel.text)
    t.equal(cancel.body.archivestrategystate.cancelled, true)
    await runArchive(s, p.id)
    let st = await row(s, 'archive_states', { project_id: p.id })
    t.equal(st.state, 'cancelled')
    for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(p.path, f))), sum, `${f} online`)
    t.same(await readdir(dest).catch(() => []), [], 'nothing stays on the target')

    // archived completely, then a cancel that arrives while releasing: everything comes back
    t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })).status, 202)
    await runArchive(s, p.id)
    st = await row(s, 'archive_states', { project_id: p.id })
    t.equal(st.state, 'archived')
    t.equal(Number((await row(s, 'projects', { id: p.id })).size), 0)
    await s.runtime.db.knex('archive_states').where({ id: st.id }).update({ state: 'releasing', cancelled: true })
    await runArchive(s, p.id)
    st = await row(s, 'archive_states', { project_id: p.id })
    t.equal(st.state, 'cancelled')
    for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(p.path, f))), sum, `${f} back online byte-identical`)
    const online = await s.runtime.db.knex('assets').where({ project_id: p.id }).pluck('online')
    t.ok(online.every(Boolean), 'assets online')
    t.equal(Number((await row(s, 'projects', { id: p.id })).size), size, 'size charged back')
    t.same(await readdir(dest).catch(() => []), [], 'the copies were removed from the target')
    t.equal(Number((await s.runtime.db.knex('archive_files').where({ project_id: p.id }).count({ n: '*' }))[0].n), 0)

    // clear_all_archive_errors: administrators only
    assertProblem(t, await s.request('PUT', '/projects/clear_all_archive_errors', { token: s.user.token }), 403)
    t.equal((await s.request('PUT', '/projects/clear_all_archive_errors', { token: s.admin.token })).status, 200)
  },
  options,
)

onEachDatabase(
  t,
  'includes limit what is archived; exclude_linked_files keeps hard-linked files online',
  async (t, s) => {
    const strategy = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-inc`), { includes: ['Media'] })
    const { p } = await archivedProject(s, 'Partial', FILES, false)
    await link(path.join(p.path, 'Media/Sub/still.jpg'), path.join(p.path, '.still-link'))
    t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id, exclude_linked_files: 'true' } })).status, 202)
    await runArchive(s, p.id)
    t.equal((await row(s, 'archive_states', { project_id: p.id })).state, 'archived')
    t.notOk(await exists(path.join(p.path, 'Media/clip.mov')), 'Media archived')
    t.ok(await exists(path.join(p.path, 'Media/Sub/still.jpg')), 'a hard-linked file stays')
    t.ok(await exists(path.join(p.path, 'a.txt')), 'files outside the includes stay')
    t.ok(await exists(path.join(p.path, 'Docs/notes.txt')))
  },
  options,
)

// a target on a size-limited tmpfs: the copy fails, partial objects go, nothing is released
const small = await mkdtemp(path.join(tmpdir(), 'mamkit-small-'))
let mounted = false
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', small], { stdio: 'ignore' })
  mounted = true
} catch {
  t.comment('cannot mount a tmpfs here (needs root): the disk-full case is not run')
}
t.teardown(async () => {
  if (mounted) execFileSync('umount', [small])
  await rm(small, { recursive: true, force: true })
})
if (mounted)
  onEachDatabase(
    t,
    'a full target: the file fails with the reason, no partial copy, nothing released',
    async (t, s) => {
      const dest = path.join(small, s.db)
      await mkdir(dest)
      const strategy = await diskStrategy(s, 'archive_strategies', dest)
      const { p, sums } = await archivedProject(s, 'TooBig', FILES, false)
      t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })).status, 202)
      await runArchive(s, p.id).catch((err) => t.comment(`run: ${err.message}`))
      const st = await row(s, 'archive_states', { project_id: p.id })
      t.equal(st.state, 'failed')
      t.match(st.error, /could not be archived/)
      const failed = await s.runtime.db.knex('archive_files').where({ project_id: p.id, state: 'failed' }).select('path', 'error')
      // the files in flight beside the big one may meet the full disk too
      t.ok(failed.some((f: any) => f.path === 'Media/clip.mov'), 'the big file failed')
      for (const f of failed) t.match(f.error, /is full/, `${f.path}: the reason`)
      for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(p.path, f))), sum, `${f} still online`)
      const left = execFileSync('find', [dest, '-name', '.mamkit-part-*']).toString().trim()
      t.equal(left, '', 'no partial file left on the target')
      t.notOk(await exists(path.join(dest, st.archive_key, 'files', 'Media/clip.mov')))
      const shown = await s.request('PUT', `/projects/${p.id}/clear_archive_errors`, { token: s.user.token })
      t.equal(shown.status, 200)
      t.equal((await row(s, 'archive_files', { project_id: p.id, path: 'Media/clip.mov' })).state, 'pending', 'the failed file is retried by the next run')
    },
    { ...options, config: { plugins: { strategies: { roots: [dir, small] } } } },
  )
