/**
 * Issue 13's crash test of the event fan-out, against the real CLI server: the server is SIGKILLed
 * between the change and the fan-out (first held open on purpose, then at a random moment of a burst
 * of changes), restarted on the same data and database, and every committed event still reaches each
 * consumer exactly once: one in-app notification per user and event, one webhook delivery per webhook
 * and event, and the real receiver sees every event id (verified signatures).
 */
import t from 'tap'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import Sqlite from 'better-sqlite3'
import pg from 'pg'
import { databaseKinds, request, scratchDatabase, waitFor } from '../../core/testing/index.js'
import { killAll, login, serveProcess, type ServerProcess } from '../helpers/process.js'
import { startReceiver } from '../helpers/webhook-receiver.js'

const receiver = await startReceiver()
t.teardown(() => receiver.close())
t.teardown(killAll)

// webhooks to the local receiver; job runner as usual
const ENV = { MAMKIT_WEBHOOKS_ALLOW_PRIVATE: 'true' }
// short request timeouts: a delivery the killed process had claimed is retried after 3 timeouts and a job lease
const CONFIG = { plugins: { webhooks: { allow_private_targets: true, timeout_ms: 1000 } } }
// a runner that claims nothing: the window between a change and its fan-out, held open until the kill
const NO_JOBS = { ...ENV, MAMKIT_JOB_CONCURRENCY: '0' }

for (const db of databaseKinds()) {
  t.test(`SIGKILL between a change and its fan-out: notifications and webhooks arrive once each [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-outbox-crash-'))
    const database = await scratchDatabase(db)
    t.teardown(async () => {
      await killAll()
      await database.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const lite = db === 'sqlite' ? () => new Sqlite(path.join(dataDir, 'mamkit.sqlite')) : undefined
    /** one query straight on the database (the server may be dead) */
    async function query(sql: string): Promise<any[]> {
      if (lite) {
        const conn = lite()
        try {
          return conn.prepare(sql).all()
        } finally {
          conn.close()
        }
      }
      const client = new pg.Client({ connectionString: database.databaseUrl })
      await client.connect()
      try {
        return (await client.query(sql)).rows
      } finally {
        await client.end()
      }
    }
    const configFile = path.join(dataDir, 'mamkit.json')
    await writeFile(configFile, JSON.stringify(CONFIG))
    const args = ['--config', configFile]
    const call = (server: ServerProcess, token: string, method: string, route: string, json?: unknown) => request(server.url, method, route, { token, json })

    // first life: the runner claims nothing, so every change stops at its outbox row
    let server = await serveProcess(dataDir, database.databaseUrl, args, NO_JOBS)
    let admin = await login(server.url)
    const hook = await call(server, admin, 'POST', '/webhooks', { webhook: { url: `${receiver.url}?${db}`, events: ['project.created'] } })
    t.equal(hook.status, 201, 'webhook created')
    await receiver.setSecret(hook.body.webhook.secret)
    const made = await call(server, admin, 'POST', '/users', { user: { username: 'alice', password: 'alice-password-1', email: 'alice@example.test' } })
    t.equal(made.status, 201, 'user created')
    const alice = (await request(server.url, 'POST', '/session', { json: { login: 'alice', password: 'alice-password-1' } })).body.authentication_token
    const first: number[] = []
    for (let i = 0; i < 5; i++) {
      const p = await call(server, alice, 'POST', '/projects', { name: `Held ${i}` })
      t.equal(p.status, 201)
      first.push(p.body.project.id)
    }
    const pending = await query(`select event_id from event_outbox where name = 'project.created' and dispatched_at is null`)
    t.equal(pending.length, 5, 'five committed events wait for their fan-out')
    t.same(await query('select id from notifications'), [], 'nobody was told yet')
    server.child.kill('SIGKILL')
    t.match(await server.exited, { signal: 'SIGKILL' })

    // second life: the fan-out of the dead process's events runs once
    server = await serveProcess(dataDir, database.databaseUrl, args, ENV)
    admin = await login(server.url)
    const ids = new Set(pending.map((r) => r.event_id))
    await waitFor('the notifications', async () => (await query(`select event_id from notifications where kind = 'project.created'`)).length === 5)
    await waitFor('the webhook deliveries', async () => {
      const got = new Set((await receiver.received()).map((r) => r.id))
      return [...ids].every((id) => got.has(id))
    })
    const told = (await call(server, admin, 'GET', '/notifications', undefined)).body.notifications.filter((n: any) => n.kind === 'project.created')
    t.same(told.map((n: any) => n.subject_id).sort(), [...first].sort(), 'the administrator is told of each project once')
    const got = (await receiver.received()).filter((r) => ids.has(r.id))
    t.equal(got.length, 5, 'the receiver got each event once')
    t.ok(got.every((r) => r.valid), 'signed')

    // a burst of changes, killed at a random moment: whatever committed is told once per consumer
    const burst = Array.from({ length: 40 }, (_, i) => call(server, alice, 'POST', '/projects', { name: `Burst ${i}` }).catch(() => null))
    await waitFor('some projects of the burst', async () => (await query(`select id from projects where name like 'Burst%'`)).length >= 8)
    server.child.kill('SIGKILL')
    await server.exited
    await Promise.all(burst)
    const left = await query(`select count(*) as n from event_outbox where dispatched_at is null`)
    t.comment(`killed with ${Number(left[0].n)} event(s) not yet handed out`)
    server = await serveProcess(dataDir, database.databaseUrl, args, ENV)
    await waitFor('the outbox to drain and the deliveries to end', async () => {
      const [{ n }] = await query(`select count(*) as n from event_outbox where dispatched_at is null`)
      const [{ d }] = await query(`select count(*) as d from webhook_deliveries where state = 'pending'`)
      return Number(n) + Number(d) === 0
    })
    const events = (await query(`select event_id, subject_id from event_outbox where name = 'project.created'`)).map((r) => ({ id: r.event_id as string, project: Number(r.subject_id) }))
    const projects = (await query(`select id from projects`)).map((r) => Number(r.id))
    t.same(events.map((e) => e.project).sort((a, b) => a - b), projects.sort((a, b) => a - b), 'one event per committed project, none for a change that did not commit')
    const notes = await query(`select event_id, count(*) as n from notifications where kind = 'project.created' group by event_id`)
    t.equal(notes.length, events.length, 'a notification for every event')
    t.ok(notes.every((r) => Number(r.n) === 1), 'and only one each (unique by user and event)')
    const deliveries = await query(`select event_id, count(*) as n from webhook_deliveries where state = 'succeeded' group by event_id`)
    t.equal(deliveries.length, events.length, 'a succeeded webhook delivery for every event')
    t.ok(deliveries.every((r) => Number(r.n) === 1), 'and only one each (unique by webhook and event)')
    const received = new Map<string, number>()
    for (const r of await receiver.received()) received.set(r.id, (received.get(r.id) ?? 0) + 1)
    t.ok(events.every((e) => received.has(e.id)), 'the receiver has every event id')
    // a kill while a POST was on the wire repeats that POST under the same webhook-id (receivers deduplicate by it)
    t.comment(`repeated POSTs after the kill: ${events.filter((e) => (received.get(e.id) ?? 0) > 1).length}`)
    server.child.kill('SIGTERM')
    await server.exited
  })
}
