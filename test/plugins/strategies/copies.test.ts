import { readdir, readFile, writeFile, copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, startTestServer, scratchDatabase } from '../../helpers/index.js'
import { waitForJob } from '../projects/fixtures.js'
import { FILES, archivedProject, diskStrategy, sha, targetRoot } from './fixtures.js'
import type { Copier } from '../../../plugins/strategies/copier.js'
import { execFileSync } from 'node:child_process'

const dir = await targetRoot(t)
const options = { config: { plugins: { strategies: { roots: [dir] } } } }

onEachDatabase(
  t,
  'copy_to of an asset, a folder and a project: verified copies, jobs at /copy_to_status',
  async (t, s) => {
    const dest = path.join(dir, `${s.db}-copies`)
    const assetStrategy = await diskStrategy(s, 'asset_copy_to_strategies', dest)
    const projectStrategy = await diskStrategy(s, 'project_copy_to_strategies', path.join(dir, `${s.db}-pcopies`), { contents: 'media' })
    const { p, sums } = await archivedProject(s, 'Copied')
    const asset = (await s.runtime.db.knex('assets').where({ project_id: p.id, path: 'Media/clip.mov' }).first('id')).id
    const stranger = await s.createUser('stranger')

    assertProblem(t, await s.request('PUT', `/assets/${asset}/copy_to`, { json: { strategy: assetStrategy.id } }), 401)
    assertProblem(t, await s.request('PUT', `/assets/${asset}/copy_to`, { token: stranger.token, json: { strategy: assetStrategy.id } }), 404)
    assertProblem(t, await s.request('PUT', `/assets/${asset}/copy_to`, { token: s.user.token, json: {} }), 422, ['strategy'])
    assertProblem(t, await s.request('PUT', `/assets/${asset}/copy_to`, { token: s.user.token, json: { strategy: projectStrategy.id } }), 422, ['strategy'])
    const copier = s.runtime.container.resolve<Copier>('strategies.copier')
    const inWorkers = copier.inWorkers
    const one = await s.request('PUT', `/assets/${asset}/copy_to`, { token: s.user.token, json: { strategy: assetStrategy.id } })
    t.equal(one.status, 202, one.text)
    const job = await waitForJob(s, s.user.token, one.body.job.id)
    t.equal(job.state, 'finished', job.error ?? '')
    const status = await s.request('GET', `/copy_to_status/${one.body.job.id}`, { token: s.user.token })
    t.equal(status.body.job.state, 'finished')
    assertProblem(t, await s.request('GET', `/copy_to_status/${one.body.job.id}`, { token: stranger.token }), 404)
    const tree = path.join(dest, `Copied-${p.id}`)
    t.equal(sha(await readFile(path.join(tree, 'Media/clip.mov'))), sums['Media/clip.mov'], 'the asset copied byte-identical')
    t.ok(copier.inWorkers > inWorkers, 'the 3 MiB clip was copied and hashed in a worker thread (the batched one-pass copy of an archive)')
    t.same((await readdir(tree, { recursive: true })).filter((f) => String(f).includes('.mamkit-part-')), [], 'no temporary left on the target')

    // a folder
    assertProblem(t, await s.request('PUT', '/assets/copy_folder_to', { token: s.user.token, json: { project_id: p.id, path: '../x', strategy: assetStrategy.id } }), 422, ['path'])
    assertProblem(t, await s.request('PUT', '/assets/copy_folder_to', { token: s.user.token, json: { project_id: p.id, path: 'a.txt', strategy: assetStrategy.id } }), 422, ['path'])
    const folder = await s.request('PUT', '/assets/copy_folder_to', { token: s.user.token, json: { project_id: p.id, path: 'Media/Sub', strategy: assetStrategy.id } })
    t.equal(folder.status, 202, folder.text)
    t.equal((await waitForJob(s, s.user.token, folder.body.job.id)).state, 'finished')
    t.equal(sha(await readFile(path.join(tree, 'Media/Sub/still.jpg'))), sums['Media/Sub/still.jpg'])

    // a project, media only (Docs/notes.txt is no asset)
    const proj = await s.request('PUT', `/projects/${p.id}/copy_to`, { token: s.user.token, json: { strategy: projectStrategy.id } })
    t.equal(proj.status, 202, proj.text)
    t.equal((await waitForJob(s, s.user.token, proj.body.job.id)).state, 'finished')
    const ptree = path.join(dir, `${s.db}-pcopies`, `Copied-${p.id}`)
    t.equal(sha(await readFile(path.join(ptree, 'a.txt'))), sums['a.txt'])
    t.notOk(await readFile(path.join(ptree, 'Docs/notes.txt')).catch(() => null), 'project files left out of a media copy')
    for (const f of Object.keys(FILES)) t.ok(await readFile(path.join(p.path, f)), `${f} still online`)

    const deleting = await diskStrategy(s, 'project_copy_to_strategies', path.join(dir, `${s.db}-del`), { delete_project: true })
    assertProblem(t, await s.request('PUT', `/projects/${p.id}/copy_to`, { token: s.user.token, json: { strategy: deleting.id } }), 501)
  },
  options,
)

onEachDatabase(
  t,
  'project backups: full, incremental (only changed files), retention keep N',
  async (t, s) => {
    const dest = path.join(dir, `${s.db}-backups`)
    const strategy = await diskStrategy(s, 'backup_strategies', dest, { strategy_type: 'incremental', keep: 2 })
    const { p } = await archivedProject(s, 'Backed')
    const backup = async () => {
      const r = await s.request('PUT', `/projects/${p.id}/backup`, { token: s.user.token, json: { strategy: strategy.id } })
      t.equal(r.status, 202, r.text)
      const job = await waitForJob(s, s.user.token, r.body.job.id)
      t.equal(job.state, 'finished', job.error ?? '')
      return (await s.runtime.db.knex('jobs').where({ id: r.body.job.id }).first('result')).result
    }
    const first = JSON.parse(JSON.stringify(await backup()))
    const r1 = typeof first === 'string' ? JSON.parse(first) : first
    t.equal(r1.copied, 4, 'the first backup copies everything')
    await writeFile(path.join(p.path, 'a.txt'), 'alpha changed')
    const r2raw = await backup()
    const r2 = typeof r2raw === 'string' ? JSON.parse(r2raw) : r2raw
    t.equal(r2.copied, 1, 'the incremental one copies the changed file only')
    t.equal(r2.files, 4, 'and lists every file')
    const r3raw = await backup()
    const r3 = typeof r3raw === 'string' ? JSON.parse(r3raw) : r3raw
    t.equal(r3.copied, 0)
    // keep 2: the oldest still holds unchanged files of the kept ones, so it stays
    t.same(r3.pruned, [], 'a backup that kept ones point into is not pruned')
    const manifests = (await readdir(path.join(dest, `project-${p.id}`))).filter((n) => n.endsWith('.manifest.json'))
    t.equal(manifests.length, 3)
  },
  options,
)

onEachDatabase(
  t,
  'PUT /backup: a database backup on the target that a fresh server starts from with the same data',
  async (t, s) => {
    const dest = path.join(dir, `${s.db}-db`)
    const strategy = await diskStrategy(s, 'backup_strategies', dest, { keep: 1 })
    await s.request('POST', '/projects', { token: s.user.token, json: { name: 'Before backup' } })
    assertProblem(t, await s.request('PUT', '/backup', { token: s.user.token, json: { strategy: strategy.id } }), 403)
    const run = async () => {
      const r = await s.request('PUT', '/backup', { token: s.admin.token, json: { strategy: strategy.id } })
      t.equal(r.status, 202, r.text)
      const job = await waitForJob(s, s.admin.token, r.body.job.id, { timeoutMs: 60_000 })
      t.equal(job.state, 'finished', job.error ?? '')
    }
    await run()
    await run()
    const files = await readdir(path.join(dest, 'database'))
    t.equal(files.length, 1, 'retention keeps one')
    const file = path.join(dest, 'database', files[0])
    const restoreDir = await mkdtemp(path.join(tmpdir(), 'mamkit-restored-'))
    t.teardown(() => rm(restoreDir, { recursive: true, force: true }))
    await copyFile(path.join(s.dataDir, 'secret.key'), path.join(restoreDir, 'secret.key'))
    let databaseUrl: string | undefined
    let drop = async () => {}
    if (s.db === 'sqlite') await copyFile(file, path.join(restoreDir, 'mamkit.sqlite'))
    else {
      const scratch = await scratchDatabase('postgresql')
      databaseUrl = scratch.databaseUrl
      drop = scratch.drop
      execFileSync('pg_restore', ['--no-owner', '--dbname', databaseUrl!, file])
    }
    const restored = await startTestServer({ db: s.db, dataDir: restoreDir, databaseUrl })
    t.teardown(async () => {
      await restored.close()
      await drop()
    })
    // the user's API key was in the database: it works on the restored server
    const list = await restored.request('GET', '/projects', { token: s.user.token })
    t.equal(list.status, 200, list.text)
    t.ok(list.body.projects.some((x: any) => x.name === 'Before backup'), 'the project is in the restored database')
  },
  options,
)
