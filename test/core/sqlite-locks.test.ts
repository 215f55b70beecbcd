/**
 * SQLite's wait for another connection's write lock (core/db/sqlite-locks.ts, issue 19): short
 * inside SQLite, asynchronous beyond, so the event loop runs meanwhile. The other connection here
 * lives in the same process and lets go of its lock from a timer: had the wait held the event loop,
 * that timer could not fire and every wait below would end in SQLITE_BUSY. Transactions begin
 * IMMEDIATE and are begun again, so their callbacks run once; single statements run again; past the
 * configured wait the busy error is thrown, a 503 fault, with nothing written.
 */
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { openDatabase, type Database } from '../../core/db/orm.js'
import { HotStatement } from '../../core/db/hot.js'
import { faultOf } from '../../core/errors.js'

const Sqlite = createRequire(import.meta.url)('better-sqlite3') as new (file: string) => { exec(sql: string): void; close(): void }

const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-sqlitelocks-'))
t.teardown(() => rm(dir, { recursive: true, force: true }))

async function open(waitMs: number): Promise<{ db: Database; holder: { exec(sql: string): void; close(): void } }> {
  const db = await openDatabase({ dataDir: dir, databaseUrl: `sqlite:${path.join(dir, `locks-${waitMs}.sqlite`)}`, entities: [], waitMs })
  await db.knex.raw('create table if not exists notes (id integer primary key, text text not null)')
  const holder = new Sqlite(path.join(dir, `locks-${waitMs}.sqlite`))
  return { db, holder }
}

/** holds the write lock from the other connection, releasing it from a timer after `ms` */
function holdFor(holder: { exec(sql: string): void }, ms: number): { releasedAt: () => number } {
  holder.exec('begin immediate')
  let releasedAt = 0
  setTimeout(() => {
    holder.exec('commit')
    releasedAt = Date.now()
  }, ms)
  return { releasedAt: () => releasedAt }
}

t.test('within the wait: a transaction, a statement, a transaction without callback and a hot statement wait and succeed', async (t) => {
  const { db, holder } = await open(20_000)
  t.teardown(async () => {
    holder.close()
    await db.close()
  })
  const count = async () => Number((await db.knex('notes').count({ n: '*' }))[0].n)

  let runs = 0
  let lock = holdFor(holder, 300)
  await db.knex.transaction(async (trx) => {
    runs++
    await trx('notes').insert({ text: 'in a transaction' })
  })
  t.ok(lock.releasedAt() > 0, 'the transaction began once the other connection let go (from a timer: the event loop ran)')
  t.equal(runs, 1, 'its callback ran once')

  lock = holdFor(holder, 300)
  await db.knex('notes').insert({ text: 'a single statement' })
  t.ok(lock.releasedAt() > 0, 'a single statement waited for the lock and ran')

  // the ORM's way: a transaction without a callback, committed by hand
  lock = holdFor(holder, 300)
  const trx = await db.knex.transaction()
  await trx('notes').insert({ text: 'by hand' })
  await trx.commit()
  t.ok(lock.releasedAt() > 0, 'a transaction begun without a callback waited too')

  const hot = new HotStatement(db.knex, 'sqlite', 'test_hot_insert', 'insert into notes (text) values (?)')
  lock = holdFor(holder, 300)
  await hot.run(['a hot statement'])
  t.ok(lock.releasedAt() > 0, 'a hot statement waited too')

  // reads never wait: WAL lets them read beside the other connection's write
  holder.exec('begin immediate')
  holder.exec("insert into notes (text) values ('uncommitted')")
  t.equal(await count(), 4, 'a read answers while the lock is held, without the uncommitted row')
  holder.exec('rollback')
  t.same((await db.knex('notes').orderBy('id').select('text')).map((r: any) => r.text), ['in a transaction', 'a single statement', 'by hand', 'a hot statement'], 'each write is there once')
})

t.test('past the wait: SQLITE_BUSY, a database_unavailable fault, nothing written, the callback never run', async (t) => {
  const { db, holder } = await open(300)
  t.teardown(async () => {
    holder.close()
    await db.close()
  })
  holder.exec('begin immediate')
  let ran = false
  const refused = await db.knex
    .transaction(async (trx) => {
      ran = true
      await trx('notes').insert({ text: 'never' })
    })
    .then(() => undefined, (err: unknown) => err)
  t.match(refused, { code: /^SQLITE_BUSY/ }, 'the transaction ends in SQLITE_BUSY')
  t.equal(faultOf(refused), 'database_unavailable', 'a 503 fault')
  t.notOk(ran, 'its callback never ran')
  const statement = await db.knex('notes').insert({ text: 'never' }).then(() => undefined, (err: unknown) => err)
  t.match(statement, { code: /^SQLITE_BUSY/ }, 'a single statement too')
  const hot = await new HotStatement(db.knex, 'sqlite', 'test_hot_insert_2', 'insert into notes (text) values (?)').run(['never']).then(() => undefined, (err: unknown) => err)
  t.match(hot, { code: /^SQLITE_BUSY/ }, 'a hot statement too')
  holder.exec('rollback')
  t.equal(Number((await db.knex('notes').count({ n: '*' }))[0].n), 0, 'nothing was written')
  await db.knex('notes').insert({ text: 'after' })
  t.equal(Number((await db.knex('notes').count({ n: '*' }))[0].n), 1, 'the connection works once the lock is gone')
  // an error of the callback itself is not retried, even one that looks like a busy database
  let calls = 0
  const own = await db.knex
    .transaction(async () => {
      calls++
      throw Object.assign(new Error('busy elsewhere'), { code: 'SQLITE_BUSY' })
    })
    .then(() => undefined, (err: unknown) => err)
  t.match(own, { message: 'busy elsewhere' })
  t.equal(calls, 1, 'a transaction whose callback ran is never run again')
})
