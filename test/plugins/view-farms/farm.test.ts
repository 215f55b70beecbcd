/**
 * The view farm across real processes: two `mamkit serve` on one database (a shared SQLite file,
 * or one PostgreSQL database), each a node. Commands sent to one process reach the other through
 * the database (NOTIFY on PostgreSQL, the heartbeat's read on SQLite): a stopped node leaves every
 * job to the other, a revoked node's running job is retried elsewhere and it claims no more,
 * pause_all holds every claim until unpause_all.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { databaseKinds, request, scratchDatabase, waitFor } from '../../../core/testing/index.js'
import { killAll, login, serveProcess, type ServerProcess } from '../../helpers/process.js'

const PLUGIN = fileURLToPath(new URL('../../fixtures/jobs-plugin.js', import.meta.url))
const lines = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean)

for (const db of databaseKinds()) {
  t.test(`two processes, two nodes [${db}]`, async (t) => {
    const work = await mkdtemp(path.join(tmpdir(), 'mamkit-farm-'))
    const scratch = await scratchDatabase(db)
    t.teardown(async () => {
      await killAll()
      await scratch.drop()
      await rm(work, { recursive: true, force: true })
    })
    const databaseUrl = scratch.databaseUrl ?? `sqlite:${path.join(work, 'shared.sqlite')}`
    const start = (name: string) => serveProcess(path.join(work, name), databaseUrl, ['--plugin', PLUGIN])
    // processes of one installation share its server key (sealed secrets in the database: S3 targets, the federation site key)
    const secret = `${randomBytes(32).toString('base64')}\n`
    for (const name of ['a', 'b', 'c']) {
      await mkdir(path.join(work, name))
      await writeFile(path.join(work, name, 'secret.key'), secret, { mode: 0o600 })
    }
    // one after the other: the first one migrates the database
    const a = await start('a')
    const b = await start('b')
    const token = await login(a.url)
    const call = (server: ServerProcess, method: string, pathname: string, json?: unknown) => request(server.url, method, pathname, { token, json })
    const nodes = async (server = a) => (await call(server, 'GET', '/view_farms')).body.view_farm_nodes as any[]
    const nodeOf = async (server: ServerProcess) => (await nodes()).find((n) => n.pid === server.child.pid)
    const enqueue = async (name: string, payload: Record<string, unknown>) => {
      const reply = await call(a, 'POST', `/jobs_test/${name}`, payload)
      if (reply.status !== 200) throw new Error(`enqueue: ${reply.status} ${reply.text}`)
      return reply.body.job.id as number
    }
    const stateOf = async (id: number) => (await call(a, 'GET', `/status/${id}`)).body.job.state
    /** two heartbeats of the node after now: what it would claim, it has claimed */
    const twoBeats = async (id: number) => {
      const beat = async () => (await nodes()).find((n) => n.id === id)?.heartbeat_at
      for (let i = 0; i < 2; i++) {
        const seen = await beat()
        await waitFor(`a heartbeat of node ${id}`, async () => (await beat()) !== seen)
      }
    }

    await waitFor('both nodes claim', async () => (await nodes()).filter((n) => n.activity === 'claiming').length === 2)
    const nodeA = await nodeOf(a)
    const nodeB = await nodeOf(b)
    t.not(nodeA.id, nodeB.id)
    t.not(nodeA.worker_id, nodeB.worker_id)

    // stop B through A: B drains and A takes every job
    const file = path.join(work, 'ran')
    t.equal((await call(a, 'POST', `/view_farms/${nodeB.id}/stop`)).status, 200)
    await waitFor('B idle', async () => (await nodeOf(b)).activity === 'idle')
    const first = await Promise.all(Array.from({ length: 12 }, () => enqueue('append', { file, ms: 20 })))
    // a run appends its line before its outcome is written: wait for the outcomes
    await waitFor('12 jobs finished', async () => (await Promise.all(first.map(stateOf))).every((s) => s === 'finished'))
    const runs = (await lines(file)).map((l) => l.split(' ').map(Number))
    t.same(runs.map(([id]) => id).sort((x, y) => x - y), [...first].sort((x, y) => x - y), 'every job ran once')
    t.same([...new Set(runs.map(([, pid]) => pid))], [a.child.pid], 'a stopped node took no job: the other took all')

    // revoke B while it runs a job: the job is handed back and A runs it
    t.equal((await call(b, 'POST', `/view_farms/${nodeB.id}/start`)).status, 200, 'a command through B itself')
    t.equal((await call(a, 'POST', `/view_farms/${nodeA.id}/stop`)).status, 200)
    await waitFor('A idle, B claiming', async () => (await nodeOf(a)).activity === 'idle' && (await nodeOf(b)).activity === 'claiming')
    // the stepper waits for a line in its gate file: it runs until the test lets it end
    const gate = path.join(work, 'gate')
    const marker = path.join(work, 'marker')
    const long = await enqueue('stepper', { steps: 1, gate, marker })
    await waitFor('B runs the long job', async () => (await nodeOf(b))?.running_jobs.some((j: any) => j.id === long))
    t.equal((await call(a, 'POST', `/view_farms/${nodeA.id}/start`)).status, 200)
    const revoke = await call(a, 'DELETE', `/view_farms/revoke?id=${nodeB.id}`)
    t.equal(revoke.status, 200)
    t.same(revoke.body.viewfarmnode.released_job_ids, [long], 'its running job was handed back')
    await waitFor('A retries the job', async () => (await nodeOf(a))?.running_jobs.some((j: any) => j.id === long))
    await waitFor('B stopped its run', async () => (await lines(marker)).some((l) => l.startsWith('aborted')))
    await writeFile(gate, 'go\n')
    await waitFor('the long job finished', async () => (await stateOf(long)) === 'finished')
    // B's run stops when its heartbeat finds the lease gone (lease-lost) or when it finds its node gone (shutdown)
    const marks = await lines(marker)
    t.same(marks.filter((l) => l.startsWith('start')), ['start 1', 'start 1'], 'run on B, then on A: the handed-back attempt was not counted')
    t.equal(marks.filter((l) => l.startsWith('aborted')).length, 1, `B stopped its run (${marks.join('; ')})`)
    await waitFor('B says it was revoked', () => /was revoked/.test(b.output()))
    t.same((await nodes()).map((n) => n.id), [nodeA.id], 'B is no node any more')
    const after = path.join(work, 'after-revoke')
    const later = await Promise.all(Array.from({ length: 6 }, () => enqueue('append', { file: after, ms: 20 })))
    await waitFor('6 jobs finished', async () => (await Promise.all(later.map(stateOf))).every((s) => s === 'finished'))
    t.same([...new Set((await lines(after)).map((l) => Number(l.split(' ')[1])))], [a.child.pid], 'a revoked process claims nothing')
    t.equal((await call(b, 'GET', '/view_farms')).status, 200, 'the revoked process still serves requests')

    // a third process joins; pause_all holds every claim, unpause_all releases them
    const c = await start('c')
    await waitFor('C claims', async () => (await nodeOf(c))?.activity === 'claiming')
    const nodeC = await nodeOf(c)
    const paused = await call(a, 'POST', '/view_farms/pause_all')
    t.same(paused.body.view_farm_nodes.map((n: any) => n.id).sort(), [nodeA.id, nodeC.id].sort(), 'both running nodes paused')
    await waitFor('both idle', async () => (await nodes()).every((n) => n.state === 'paused' && n.activity === 'idle'))
    const held = await Promise.all(Array.from({ length: 4 }, () => enqueue('quick', { value: 'held' })))
    await twoBeats(nodeA.id)
    await twoBeats(nodeC.id)
    for (const id of held) t.equal(await stateOf(id), 'queued', `job ${id} stays queued while the farm is paused`)
    const unpaused = await call(c, 'POST', '/view_farms/unpause_all')
    t.equal(unpaused.body.view_farm_nodes.length, 2)
    await waitFor('the held jobs ran', async () => (await Promise.all(held.map(stateOf))).every((s) => s === 'finished'))
    t.pass('unpause_all: every held job ran')

    // a clean stop marks the node offline at once; a process restarted on the host takes its node
    // over, with the name and the state the farm gave it
    t.equal((await call(a, 'PUT', `/view_farms/${nodeC.id}`, { viewfarmnode: { name: 'encoder-c' } })).status, 200)
    t.equal((await call(a, 'POST', `/view_farms/${nodeC.id}/stop`)).status, 200)
    c.child.kill('SIGTERM')
    t.same(await c.exited, { code: 0, signal: null }, 'SIGTERM: clean exit')
    const gone = (await nodes()).find((n) => n.id === nodeC.id)
    t.equal(gone.state, 'offline')
    t.equal(gone.requested_state, 'stopped')
    const d = await start('c')
    const taken = await waitFor('the restarted process took the node over', async () => {
      const node = await nodeOf(d)
      return node?.activity === 'idle' && node
    })
    t.match(taken, { id: nodeC.id, name: 'encoder-c', state: 'stopped', pid: d.child.pid }, 'same node, same name, still stopped')
    t.equal((await nodes()).length, 2, 'no new node')
    t.equal((await call(a, 'POST', `/view_farms/${nodeA.id}/stop`)).status, 200)
    await waitFor('A idle', async () => (await nodeOf(a)).activity === 'idle')
    const stillQueued = await enqueue('quick', {})
    await twoBeats(nodeC.id)
    t.equal(await stateOf(stillQueued), 'queued', 'a stopped node claims nothing after its restart either')
    t.equal((await call(a, 'POST', `/view_farms/${nodeC.id}/start`)).status, 200)
    await waitFor('the restarted node runs the job', async () => (await stateOf(stillQueued)) === 'finished')
    d.child.kill('SIGTERM')
    t.same(await d.exited, { code: 0, signal: null }, 'SIGTERM: clean exit')
    for (const server of [a, b]) {
      server.child.kill('SIGTERM')
      t.same(await server.exited, { code: 0, signal: null }, 'SIGTERM: clean exit')
    }
  })
}
