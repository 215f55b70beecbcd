import path from 'node:path'
import t from 'tap'
import { asValue } from 'awilix'
import { coreServices } from '../../../core/index.js'
import type { MediaTools } from '../../../core/media/tools.js'
import { createProject, databaseKinds, idsByName, startTestServer, upload, waitFor, waitForAsset } from '../../../core/testing/index.js'
import { makeVideo } from '../../helpers/media.js'

/**
 * An analysis that meets a fault of the machine (issue 19: a full disk, the database away) leaves
 * its asset `pending` and runs again later, as a proxy job does; before, the asset showed
 * `failed` (and its proxy `none`, "the analysis failed") until a retry happened to succeed. Only
 * what is wrong with the file itself (no ffprobe, a planted symlink: media-tools and
 * planted-symlinks tests) fails it. The fault is injected where the analysis asks for its tools.
 */
const FAULTS = {
  'a full disk (ENOSPC)': () => Object.assign(new Error('ENOSPC: no space left on device, symlink'), { code: 'ENOSPC' }),
  'the database locked past its wait (SQLITE_BUSY)': () => Object.assign(new Error('SQLITE_BUSY: database is locked'), { code: 'SQLITE_BUSY' }),
}

for (const db of databaseKinds()) {
  for (const [name, makeFault] of Object.entries(FAULTS)) {
    t.test(`an analysis that meets ${name} stays pending and succeeds once the fault is gone [${db}]`, async (t) => {
      const s = await startTestServer({ db, config: { jobs: { diskFullRetryMs: 300 } } })
      t.teardown(() => s.close())
      const real = s.runtime.container.resolve<MediaTools>(coreServices.mediaTools.id)
      let faulty = true
      let faulted = 0
      // the real tools, except that asking for them fails with the fault while `faulty` holds
      const tools: MediaTools = Object.assign(Object.create(real), {
        ready: () => {
          if (!faulty) return real.ready()
          faulted++
          return Promise.reject(makeFault())
        },
      })
      s.runtime.container.register({ [coreServices.mediaTools.id]: asValue(tools), mediaTools: asValue(tools) })

      const clip = await makeVideo(path.join(s.dataDir, 'gen', 'clip.mov'))
      const p = await createProject(s, s.user, { name: 'Faults' })
      const uploaded = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }])
      t.equal(uploaded.status, 201)
      const id = idsByName(uploaded)['clip.mov']
      const knex = s.runtime.db.knex
      // the analysis ran into the fault and was handed back to the queue
      const job = await waitFor('the analysis handed back', async () => {
        if (faulted < 1) return undefined
        const rows = await knex('jobs').where({ type: 'assets.analyse', state: 'queued' })
        return rows.find((r) => JSON.parse(typeof r.payload === 'string' ? r.payload : JSON.stringify(r.payload)).assetId === id)
      })
      t.equal(Number(job.attempts), 0, 'the fault counted no attempt')
      const row = await knex('assets').where({ id }).first()
      t.match(row, { analysis_state: 'pending', analysis_error: null, proxy_state: 'pending' }, 'the asset waits for its analysis: not failed, its proxy still due')

      faulty = false
      const asset = await waitForAsset(s, s.user.token, id)
      t.match(asset, { analysis_state: 'ready', type: 'video', proxy_state: 'ready' }, 'analysed and proxied once the fault is gone')
      const failures = await knex('jobs').where({ type: 'assets.analyse', state: 'failed' })
      t.equal(failures.length, 0, 'no analysis job failed')
    })
  }
}
