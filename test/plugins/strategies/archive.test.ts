import { readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, type TestServer } from '../../helpers/index.js'
import { exists, readerAndStranger, row } from '../projects/fixtures.js'
import { FILES, archivedProject, diskStrategy, sha, targetRoot, waitForArchive } from './fixtures.js'

const roots = (dir: string) => ({ config: { plugins: { strategies: { roots: [dir] } } } })

async function assetsOnline(s: TestServer, projectId: number) {
  const rows = await s.runtime.db.knex('assets').where({ project_id: projectId }).select('path', 'online')
  return Object.fromEntries(rows.map((r: any) => [r.path, Boolean(r.online)]))
}

const dir = await targetRoot(t)
{
  onEachDatabase(
    t,
    'archive copies, verifies and releases; unarchive restores byte-identical',
    async (t, s) => {
      const strategy = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-main`), { transmission_check: 'fingerprint' })
      const { p, sums } = await archivedProject(s, 'Finished')
      const before = await row(s, 'projects', { id: p.id })
      t.ok(Number(before.size) > 3 * 1024 * 1024, 'the project is charged with its files')
      const { reader, stranger } = await readerAndStranger(s, p.id)

      // who may archive: writers; strategies must exist
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { json: { strategy: strategy.id } }), 401)
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: reader.token, json: { strategy: strategy.id } }), 403)
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: stranger.token, json: { strategy: strategy.id } }), 404)
      assertProblem(t, await s.request('PUT', '/projects/99999/archive', { token: s.user.token, json: { strategy: strategy.id } }), 404)
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: {} }), 422, ['strategy'])
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: 9999 } }), 422, ['strategy'])
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: 'abc' } }), 422, ['strategy'])
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id, exclude_linked_files: 'maybe' } }), 422, ['exclude_linked_files'])
      t.notOk(await row(s, 'archive_states', { project_id: p.id }), 'refused requests left no state')

      // two requests meet: one archives, the other is told it is running
      const [one, two] = await Promise.all([
        s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: String(strategy.id), exclude_linked_files: 'false' } }),
        s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, form: { strategy: String(strategy.id) } }),
      ])
      const statuses = [one.status, two.status].sort()
      t.same(statuses, [202, 409], 'one request archives, the other gets 409')
      const ok = one.status === 202 ? one : two
      t.match(ok.body.archivestrategystate, { project_id: p.id, archive_strategy_id: strategy.id, direction: 'archive', state: 'queued', exclude_linked_files: false, user_id: s.user.id })
      const done = await waitForArchive(s, p.id)
      t.equal(done.state, 'archived', `archived (${done.error ?? ''})`)

      // the originals are gone, the copies are byte-identical on the target, the rows say offline
      for (const f of Object.keys(FILES)) t.notOk(await exists(path.join(p.path, f)), `${f} released`)
      const key = done.archive_key
      for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(dir, `${s.db}-main`, key, 'files', f))), sum, `${f} on the target is byte-identical`)
      const manifest = JSON.parse(await readFile(path.join(dir, `${s.db}-main`, key, 'manifest.json'), 'utf8'))
      t.same(manifest.files.map((f: any) => f.path).sort(), Object.keys(FILES).sort(), 'the manifest lists every file')
      t.equal(manifest.files.find((f: any) => f.path === 'a.txt').sha256, sums['a.txt'], 'with its checksum')
      t.same(Object.values(await assetsOnline(s, p.id)), [false, false, false], 'assets are offline')
      const after = await row(s, 'projects', { id: p.id })
      t.equal(Number(after.size), 0, 'the project no longer uses online space')
      const shown = (await s.request('GET', `/projects/${p.id}`, { token: s.user.token })).body.project
      t.match(shown, { archive_strategy_id: strategy.id, archive_strategy_state: 'archived' })
      t.ok(await exists(p.path), 'the project folder stays')

      // archiving again: 409; deleting the project: 409 (its files are archived)
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } }), 409)
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/cancel_archiving`, { token: s.user.token }), 409)
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/unarchive`, { token: reader.token }), 403)

      // restore: byte-identical, rows online again, size charged back
      const un = await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token })
      t.equal(un.status, 202, un.text)
      t.equal(un.body.archivestrategystate.direction, 'unarchive')
      const back = await waitForArchive(s, p.id)
      t.equal(back.state, 'online', `restored (${back.error ?? ''})`)
      for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(p.path, f))), sum, `${f} restored byte-identical`)
      t.same(Object.values(await assetsOnline(s, p.id)), [true, true, true], 'assets are online')
      t.equal(Number((await row(s, 'projects', { id: p.id })).size), Number(before.size), 'the size is what it was')
      t.equal((await s.request('GET', `/projects/${p.id}`, { token: s.user.token })).body.project.archive_strategy_state, 'online')
      assertProblem(t, await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token }), 409)

      // a second archive of the same project works again (resting state)
      const again = await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })
      t.equal(again.status, 202)
      t.equal((await waitForArchive(s, p.id)).state, 'archived')
    },
    roots(dir),
  )

  onEachDatabase(
    t,
    'frozen projects are refused; a corrupted archive copy is never restored over; a changed file stays online',
    async (t, s) => {
      const strategy = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-frozen`))
      const { p, sums } = await archivedProject(s, 'Frozen')
      t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
      const frozen = await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })
      assertProblem(t, frozen, 423)
      t.notOk(await row(s, 'archive_states', { project_id: p.id }))
      await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })

      t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })).status, 202)
      const done = await waitForArchive(s, p.id)
      t.equal(done.state, 'archived')
      // bit rot on the target: the restore notices and keeps the file archived
      const copy = path.join(dir, `${s.db}-frozen`, done.archive_key, 'files', 'a.txt')
      await writeFile(copy, 'alphA')
      t.equal((await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token })).status, 202)
      const back = await waitForArchive(s, p.id)
      t.equal(back.state, 'failed')
      t.match(back.error, /1 file\(s\) could not be restored/)
      t.notOk(await exists(path.join(p.path, 'a.txt')), 'the corrupt copy was not restored')
      t.equal(sha(await readFile(path.join(p.path, 'Media/clip.mov'))), sums['Media/clip.mov'], 'the others were')
      const state = (await s.request('PUT', `/projects/${p.id}/clear_archive_errors`, { token: s.user.token })).body.archivestrategystate
      t.equal(state.error, null, 'errors cleared')
      // repaired target: the retry restores the last file
      await writeFile(copy, 'alpha')
      t.equal((await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token })).status, 202)
      t.equal((await waitForArchive(s, p.id)).state, 'online')
      t.equal(sha(await readFile(path.join(p.path, 'a.txt'))), sums['a.txt'])
    },
    roots(dir),
  )
}
