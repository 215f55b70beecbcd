import { execFile } from 'node:child_process'
import { readFile, rm, stat, symlink, utimes } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { assertProblem, onEachDatabase, waitForAsset, waitForJob, createProject } from '../../../core/testing/index.js'
import { makeStill, readZip } from '../../helpers/media.js'
import { row, writeTree } from '../projects/fixtures.js'

/**
 * Issue 18 item 3: a registered original swapped for a symlink that leads outside its project (the
 * server's secret.key, a still elsewhere) is never read: downloads answer 403 naming the asset (also
 * when the swap happens between prepare and download), package, analysis, proxy and hash jobs fail
 * with the reason. Symlinks that stay inside the project keep working; a FIFO does not hang a read.
 */

const run = promisify(execFile)

/** replaces `file` with a symlink to `target` */
async function plant(file: string, target: string) {
  await rm(file, { force: true })
  await symlink(target, file)
}

onEachDatabase(
  t,
  'originals are read through their checked real path only: planted symlinks refused by downloads, analysis, proxies and hashing',
  async (t, s) => {
    const secretFile = path.join(s.dataDir, 'secret.key')
    const secret = await readFile(secretFile)
    const secretCrc = crc32(secret).toString(16).padStart(8, '0')
    const p = await createProject(s, s.user, { name: 'Planted' })
    // notes.txt looks like the key to a size and mtime check: same length, same modification time
    const secretInfo = await stat(secretFile)
    await writeTree(p.path, { 'notes.txt': 'n'.repeat(secret.length), 'other.txt': 'other', 'inside.txt': 'first', 'sub/real.txt': 'real content', 'fifo.txt': 'f' })
    await utimes(path.join(p.path, 'notes.txt'), secretInfo.atime, secretInfo.mtime)
    await makeStill(path.join(p.path, 'still.jpg'), { width: 320, height: 240 })
    const outsideStill = await makeStill(path.join(s.dataDir, 'outside.jpg'), { width: 64, height: 48, make: 'Elsewhere' })
    const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: ['notes.txt', 'other.txt', 'inside.txt', 'still.jpg', 'fifo.txt'] } })
    t.equal(added.status, 201)
    const id = Object.fromEntries(added.body.assets.map((a: any) => [a.name, a.id])) as Record<string, number>

    // jobs do not run yet: a download is prepared for a real file, then the file is swapped before the job reads it
    const early = await s.request('PUT', `/assets/${id['other.txt']}/prepare_download_highres`, { token: s.user.token })
    t.equal(early.status, 202)
    await plant(path.join(p.path, 'other.txt'), secretFile)
    s.runtime.runner.start()
    const packaged = await waitForJob(s, s.user.token, early.body.assetstate.job_id, { route: '/asset_status' })
    t.match(packaged, { state: 'failed', success: 0, failure: 1, error: `The file of asset ${id['other.txt']} (other.txt) leads outside its storage; it is not read` }, 'the package job fails at once, with the reason')
    t.equal(packaged.attempts, 1, 'not retried: the refusal is permanent')
    const refusedState = await s.request('GET', `/assets/${id['other.txt']}/download_highres`, { token: s.user.token, query: { state_id: String(early.body.assetstate.id) } })
    assertProblem(t, refusedState, 409, ['state_id'])
    t.match(refusedState.body.detail, /leads outside its storage/)
    t.equal((await row(s, 'asset_states', { id: early.body.assetstate.id })).crc32, null, "the key's CRC-32 was never computed")
    const otherAsset = await waitForAsset(s, s.user.token, id['other.txt'])
    t.match(otherAsset, { analysis_state: 'failed', analysis_error: /leads outside its storage/, proxy_state: 'none', proxy_error: /analysis failed/ }, 'the analysis fails with the reason')

    // swapped between prepare and download: the download opens the file once, checks it, and answers 403
    await waitForAsset(s, s.user.token, id['notes.txt'])
    const prepared = await s.request('PUT', `/assets/${id['notes.txt']}/prepare_download_highres`, { token: s.user.token })
    t.equal((await waitForJob(s, s.user.token, prepared.body.assetstate.job_id, { route: '/asset_status' })).state, 'finished')
    const stateQuery = { state_id: String(prepared.body.assetstate.id) }
    const before = await s.request('GET', `/assets/${id['notes.txt']}/download_highres`, { token: s.user.token, query: stateQuery })
    t.equal(readZip(before.buffer)[0].data.toString(), 'n'.repeat(secret.length), 'the real file downloads')
    await plant(path.join(p.path, 'notes.txt'), secretFile)
    const swapped = await s.request('GET', `/assets/${id['notes.txt']}/download_highres`, { token: s.user.token, query: stateQuery })
    assertProblem(t, swapped, 403)
    t.equal(swapped.body.detail, `The file of asset ${id['notes.txt']} (notes.txt) leads outside its storage; it is not read`, 'names the asset')
    t.notOk(swapped.buffer.includes(secret), 'no byte of the key in the answer')
    const ranged = await s.request('GET', `/assets/${id['notes.txt']}/download_highres`, { token: s.user.token, query: stateQuery, headers: { range: 'bytes=0-99' } })
    assertProblem(t, ranged, 403)

    // prepared again with the symlink in place: refused at once, nothing created
    const statesBefore = (await s.runtime.db.knex('asset_states').count({ n: '*' }))[0].n
    const again = await s.request('PUT', `/assets/${id['notes.txt']}/prepare_download_highres`, { token: s.user.token })
    assertProblem(t, again, 403)
    t.match(again.body.detail, new RegExp(`asset ${id['notes.txt']} \\(notes.txt\\)`))
    t.equal((await s.runtime.db.knex('asset_states').count({ n: '*' }))[0].n, statesBefore, 'no download state was created')

    // a symlink that stays inside the project is followed; a FIFO is refused without hanging
    await plant(path.join(p.path, 'inside.txt'), 'sub/real.txt')
    await rm(path.join(p.path, 'fifo.txt'))
    await run('mkfifo', [path.join(p.path, 'fifo.txt')])
    const rehash = await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token })
    const hashed = await waitForJob(s, s.user.token, rehash.body.job.id)
    t.match(hashed, { state: 'finished', success: 2, failure: 3, result: { hashed: 2, failed: 3 } })
    const reasons = Object.fromEntries(hashed.result.errors.map((e: any) => [e.asset_id, e.error]))
    t.match(reasons, {
      [id['notes.txt']]: /notes.txt\) leads outside its storage/,
      [id['other.txt']]: /other.txt\) leads outside its storage/,
      [id['fifo.txt']]: /fifo.txt\) is not a regular file/,
    })
    t.equal((await row(s, 'assets', { id: id['inside.txt'] })).crc32, crc32(Buffer.from('real content')).toString(16).padStart(8, '0'), 'the inside link is hashed')
    for (const name of ['notes.txt', 'other.txt']) t.not((await row(s, 'assets', { id: id[name] })).crc32, secretCrc, `${name}: the key was not hashed`)

    // proxies and analysis of a still swapped for one outside the project
    const still = await waitForAsset(s, s.user.token, id['still.jpg'])
    t.match(still, { proxy_state: 'ready', metadata: { width: 320, camera_make: 'TestCam' } })
    await plant(path.join(p.path, 'still.jpg'), outsideStill)
    const reencode = await s.request('POST', `/assets/${id['still.jpg']}/reencode`, { token: s.user.token })
    t.equal(reencode.status, 202)
    const proxyJob = await waitForJob(s, s.user.token, reencode.body.job.id, { route: '/asset_status' })
    t.match(proxyJob, { state: 'failed', attempts: 1, failure: 1, error: /still.jpg\) leads outside its storage/ })
    t.match((await s.request('GET', `/assets/${id['still.jpg']}`, { token: s.user.token })).body.asset, { proxy_state: 'failed', proxy_error: /leads outside its storage/ })
    const repair = await s.request('PUT', `/projects/${p.id}/repair`, { token: s.user.token })
    await waitForJob(s, s.user.token, repair.body.job.id)
    const reanalysed = await waitForAsset(s, s.user.token, id['still.jpg'], (a) => a.analysis_state === 'failed')
    t.match(reanalysed, { analysis_error: /leads outside its storage/, metadata: { width: 320, camera_make: 'TestCam' } }, 'the metadata of the file outside was not read')
  },
  { runJobs: false },
)
