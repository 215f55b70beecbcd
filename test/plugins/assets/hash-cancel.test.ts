import { open, readdir, readlink } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createProject, onEachDatabase, waitFor, waitForJob } from '../../../core/testing/index.js'

/**
 * Cancelling a rehash while its worker threads read the originals (issue 19). The job closes each
 * original's descriptor once its task settled; piscina's abort used to reject the task at once and
 * terminate the thread, whose read could still be queued on the descriptor the job then closed
 * (or on a number the process had reused for another file). The tasks now watch the cancellation
 * themselves and settle once their read did: no thread is terminated, no descriptor stays open.
 */
onEachDatabase(t, 'a cancelled rehash stops its reads before the originals close: no thread terminated, no descriptor left', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Big files' })
  // sparse: gigabytes to read (and hash) without taking the space
  for (const name of ['a.bin', 'b.bin', 'c.bin', 'd.bin', 'e.bin', 'f.bin']) {
    const file = await open(path.join(p.path, name), 'w')
    await file.truncate(16 * 2 ** 30)
    await file.close()
  }
  const reindex = await s.request('PUT', `/projects/${p.id}/reindex`, { token: s.user.token })
  t.equal((await waitForJob(s, s.user.token, reindex.body.job.id)).state, 'finished')

  const pool = (s.runtime.runner as any).workerPool()
  let terminated = 0
  pool.on('workerDestroy', () => terminated++)
  const rehash = await s.request('PUT', `/projects/${p.id}/rehash`, { token: s.user.token })
  const id = rehash.body.job.id
  await waitFor('the rehash to read', async () => (await s.request('GET', `/status/${id}`, { token: s.user.token })).body.job.state === 'running')
  await waitFor('a worker thread', () => pool.threads.length > 0)
  await sleep(300)
  const cancel = await s.request('DELETE', `/status/${id}`, { token: s.user.token })
  t.equal(cancel.status, 200)
  const job = await waitForJob(s, s.user.token, id)
  t.equal(job.state, 'cancelled')
  t.equal(terminated, 0, 'no worker thread was terminated: the tasks stopped between two reads')

  const open_ = []
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '')
    if (target.startsWith(p.path)) open_.push(target)
  }
  t.same(open_, [], 'no original is left open')
})
