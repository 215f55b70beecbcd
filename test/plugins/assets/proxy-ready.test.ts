import path from 'node:path'
import t from 'tap'
import { coreServices, type Knex, type Outbox } from '../../../core/index.js'
import { createProject, idsByName, onEachDatabase, upload, waitFor, waitForAsset } from '../../../core/testing/index.js'
import { makeStill } from '../../helpers/media.js'

/**
 * `asset.proxy-ready` is written in the transaction that records the proxies as ready: a proxy job
 * that fails after writing the event (here the outbox fails once right after its insert, as a lost
 * database connection or a full disk would) leaves neither the state nor the event, and its retry
 * tells the asset's readers once. A still is enough (sharp only, no ffmpeg).
 */

onEachDatabase(t, 'asset.proxy-ready: once per proxy made, also when the job is retried after the event was written', async (t, s) => {
  const knex = s.runtime.container.resolve<Knex>(coreServices.knex.id)
  const outbox = s.runtime.container.resolve<Outbox>(coreServices.outbox.id)
  const publishMany = outbox.publishMany.bind(outbox)
  let failures = 0
  outbox.publishMany = async (db, items) => {
    const published = await publishMany(db, items)
    if (!failures && items.some((i) => i.event.name === 'asset.proxy-ready')) {
      failures++
      throw new Error('injected: the outbox failed after writing the event')
    }
    return published
  }

  const p = await createProject(s, s.user, { name: 'Ready once' })
  const still = await makeStill(path.join(s.dataDir, 'gen', 'still.jpg'))
  const id = idsByName(await upload(s, s.user.token, p.id, [{ name: 'still.jpg', file: still }]))['still.jpg']
  // the first run fails once the event is written; the retry (2 s later) makes the proxies again
  const jobs = () => knex('jobs').where({ type: 'assets.proxy', asset_id: id })
  const job = await waitFor('the proxy job, retried, to finish', async () => {
    const row = await jobs().first()
    return row && ['finished', 'failed'].includes(row.state) ? row : null
  })
  t.equal(failures, 1, 'the injected failure happened')
  t.match(job, { state: 'finished', attempts: 2 }, 'finished on its second run')
  t.match(await waitForAsset(s, s.user.token, id), { proxy_state: 'ready', proxy_error: null })
  const ready = await knex('event_outbox').where({ name: 'asset.proxy-ready', subject_id: id })
  t.equal(ready.length, 1, 'one asset.proxy-ready event, from the run that committed')
})
