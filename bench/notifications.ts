/**
 * Fan-out benchmark (issue 13): `--events` catalogue events (default 10,000), each concerning a team of
 * `--users` users (default 100), published through the outbox in transactions of `--batch` events
 * (default 100) while the fan-out job runs; one webhook subscribed to them posts to a real receiver in
 * a child process (test/helpers/webhook-receiver: it checks every signature).
 *
 *   npx tsc -p . && node dist/bench/notifications.js [--events 10000] [--users 100] [--batch 100] [--only sqlite,postgresql]
 *
 * SQLite, and PostgreSQL on a scratch database when MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL
 * names a server. The server runs in this process (the fan-out and the delivery job are what is
 * measured); the receiver is a separate process. Printed per database:
 *
 *   publish/s          events written to the outbox per second (with their fan-out job queued)
 *   notifications/s    notification rows written per second, first publish to the last row
 *   webhooks/s         deliveries the receiver got per second, first publish to the last one
 *   latency p50/p99    event time (publish) to the receiver's arrival, per delivery
 */
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { scratchDatabase, type DbKind } from '../core/testing/index.js'
import { MamRuntime } from '../core/runtime.js'
import { createApiKey, createUser } from '../core/auth/accounts.js'
import { coreServices, type Outbox } from '../core/index.js'
import { builtinPlugins } from '../plugins/index.js'
import { projectCreated } from '../plugins/projects/events.js'
import { startReceiver } from '../test/helpers/webhook-receiver.js'

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '10000' },
    users: { type: 'string', default: '100' },
    batch: { type: 'string', default: '100' },
    only: { type: 'string' },
  },
})
const EVENTS = Number(values.events)
const USERS = Number(values.users)
const BATCH = Number(values.batch)
const pgUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
const kinds = (values.only?.split(',') ?? ['sqlite', 'postgresql']).filter((k) => k === 'sqlite' || pgUrl) as DbKind[]

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

interface Row {
  db: string
  publishPerS: number
  notificationsPerS: number
  webhooksPerS: number
  p50: number
  p99: number
  notifications: number
  deliveries: number
}

async function run(db: DbKind): Promise<Row> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-bench-notifications-'))
  const scratch = await scratchDatabase(db, pgUrl)
  const receiver = await startReceiver()
  const runtime = await MamRuntime.create({
    plugins: builtinPlugins,
    config: { dataDir, databaseUrl: scratch.databaseUrl, logLevel: 'silent', plugins: { webhooks: { allow_private_targets: true } } },
  })
  try {
    const knex = runtime.db.knex
    const em = runtime.container.resolve<any>(coreServices.em.id).fork()
    const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
    await createApiKey(em, admin, 'bench')
    // the users the events concern: one team, read on the project the events are about
    const now = new Date()
    const [team] = await knex('teams').insert({ name: 'listeners', created_at: now, updated_at: now }).returning('id')
    const teamId = Number(typeof team === 'object' ? team.id : team)
    for (let i = 0; i < USERS; i++) {
      const u = await createUser(em, { username: `listener-${i}`, password: 'listener-password' })
      await knex('team_memberships').insert({ team_id: teamId, user_id: u.id, created_at: now })
    }
    const [project] = await knex('projects')
      .insert({ uuid: crypto.randomUUID(), name: 'Announced', storage: 'media_1', folder: 'announced', size: 0, is_library_project: false, deleted: false, custom_metadata: '{}', created_by_id: admin.id, created_at: now, updated_at: now })
      .returning('id')
    const projectId = Number(typeof project === 'object' ? project.id : project)
    await knex('access_rights').insert({ team_id: teamId, object_type: 'project', object_id: projectId, read: true, write: false, created_at: now, updated_at: now })
    const webhooks = runtime.container.resolve<any>('webhooks.service')
    const { secret } = await webhooks.create({ url: receiver.url, events: ['project.created'] }, admin.id)
    await receiver.setSecret(secret)
    await sleep(500) // the runner settles after boot (the events of the setup are none: rows were written directly)

    const outbox = runtime.container.resolve<Outbox>(coreServices.outbox.id)
    const started = performance.now()
    for (let i = 0; i < EVENTS; i += BATCH) {
      const items = Array.from({ length: Math.min(BATCH, EVENTS - i) }, (_, j) => ({
        event: projectCreated,
        payload: { project_id: projectId, name: `event ${i + j}`, storage: 'media_1', created_by_id: admin.id, team_id: teamId },
        options: { subjectId: projectId, actorId: admin.id },
      }))
      await knex.transaction((trx) => outbox.publishMany(trx, items))
    }
    const published = performance.now()
    const wanted = EVENTS * USERS
    let notifiedAt = 0
    let deliveredAt = 0
    let notifications = 0
    let deliveries = 0
    for (;;) {
      if (!notifiedAt) {
        const [{ n }] = await knex('notifications').count({ n: '*' })
        notifications = Number(n)
        if (notifications >= wanted) notifiedAt = performance.now()
      }
      if (!deliveredAt) {
        deliveries = (await receiver.received()).length
        if (deliveries >= EVENTS) deliveredAt = performance.now()
      }
      if (notifiedAt && deliveredAt) break
      const hook = await knex('webhooks').first('active', 'disabled_reason')
      if (!hook.active || hook.active === 0) throw new Error(`the webhook switched itself off: ${hook.disabled_reason}`)
      if (performance.now() - started > 30 * 60_000) throw new Error(`gave up: ${notifications}/${wanted} notifications, ${deliveries}/${EVENTS} deliveries`)
      await sleep(250)
    }
    const got = await receiver.received()
    const latencies = got.map((r) => r.at - Date.parse(r.body.time)).sort((a, b) => a - b)
    const invalid = got.filter((r) => !r.valid).length
    if (invalid) throw new Error(`${invalid} deliveries failed their signature check`)
    return {
      db,
      publishPerS: EVENTS / ((published - started) / 1000),
      notificationsPerS: notifications / ((notifiedAt - started) / 1000),
      webhooksPerS: deliveries / ((deliveredAt - started) / 1000),
      p50: pct(latencies, 50),
      p99: pct(latencies, 99),
      notifications,
      deliveries,
    }
  } finally {
    await runtime.close()
    await receiver.close()
    await scratch.drop()
    await rm(dataDir, { recursive: true, force: true })
  }
}

const rows: Row[] = []
for (const db of kinds) {
  process.stderr.write(`${db}: ${EVENTS} events × ${USERS} users …\n`)
  rows.push(await run(db))
}
const f = (n: number) => (n >= 100 ? Math.round(n).toLocaleString('en') : n.toFixed(1))
console.log(`\n${EVENTS.toLocaleString('en')} events to ${USERS} users (${BATCH} per transaction), ${os.cpus().length} CPUs, load ${os.loadavg()[0].toFixed(1)}\n`)
console.log('| database | publish/s | notifications/s | webhooks/s | event → webhook p50 / p99 |')
console.log('|---|---|---|---|---|')
for (const r of rows) console.log(`| ${r.db} | ${f(r.publishPerS)} | ${f(r.notificationsPerS)} (${r.notifications.toLocaleString('en')}) | ${f(r.webhooksPerS)} (${r.deliveries.toLocaleString('en')}) | ${Math.round(r.p50)} / ${Math.round(r.p99)} ms |`)
