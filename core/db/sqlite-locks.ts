import { createRequire } from 'node:module'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Knex } from '@mikro-orm/knex'

/**
 * Waiting for another process's SQLite write lock (a CLI command, a backup, a second server)
 * without freezing this one. better-sqlite3 is synchronous: while SQLite's own busy handler waits
 * (`busy_timeout`), the event loop stands still and every request of the process waits with it.
 * So SQLite waits only SQLITE_SPIN_MS itself; past that a statement or a transaction that met the lock
 * gives its connection back, waits asynchronously with a growing delay and tries again, until the
 * configured wait (`MAMKIT_DB_WAIT_MS`) has passed; then the busy error is thrown (503 with
 * Retry-After, core/errors.ts). Meanwhile the connection serves the other requests: reads never
 * need the lock (WAL), writes meet it and wait the same way.
 *
 * Only work that has not written is tried again:
 * - a transaction begins with `BEGIN IMMEDIATE`, which takes the write lock before its first
 *   statement, so the lock can only be refused at BEGIN, before the transaction's callback ran:
 *   retried, the callback runs once. Inside a transaction no statement waits for the lock any more
 *   (it holds it), and none is retried on its own. The price: a transaction that only reads also
 *   waits while another process writes (in this process every query shares one connection anyway);
 * - a single statement outside a transaction (autocommit) that got SQLITE_BUSY was rolled back by
 *   SQLite as a whole; a query of several statements (knex's schema builder) is not retried;
 * - the job runner's hot statements (core/db/hot.ts) are single autocommit statements.
 */
export const SQLITE_SPIN_MS = 5
/** the first pause after the lock was refused; doubled at each refusal up to MAX_PAUSE_MS */
const FIRST_PAUSE_MS = 5
const MAX_PAUSE_MS = 100

/** SQLITE_BUSY and its extended codes: another connection holds the lock SQLite needs */
export function isSqliteBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY')
}

/** the configured wait per knex client of a SQLite database (only those opened by openDatabase wait) */
const waits = new WeakMap<object, number>()

/** an error of an attempt that must not be tried again (it may have written): thrown as it is */
class Final {
  constructor(readonly err: unknown) {}
}

/**
 * Runs `attempt` until it does not meet another process's lock, pausing asynchronously between
 * tries, for at most `waitMs` from the first try. `attempt` gives its connection back before it
 * throws, and throws a busy error only when it wrote nothing; an error wrapped by `final()` ends
 * the tries at once.
 */
export async function retryWhileBusy<T>(waitMs: number, attempt: (final: (err: unknown) => never) => Promise<T>): Promise<T> {
  const final = (err: unknown): never => {
    throw new Final(err)
  }
  const deadline = Date.now() + waitMs
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
    try {
      return await attempt(final)
    } catch (err) {
      if (err instanceof Final) throw err.err
      const left = deadline - Date.now()
      if (!isSqliteBusy(err) || left <= 0) throw err
      // a little jitter: two processes that met each other do not retry in step
      await sleep(Math.min(left, pause * (0.75 + Math.random() / 2)))
    }
  }
}

/** the wait of a SQLite knex opened by openDatabase, undefined for other databases */
export function sqliteWaitOf(knex: Knex): number | undefined {
  return waits.get((knex as any).client)
}

/**
 * Makes the SQLite knex client `knex` wait for other processes' locks as described above: its
 * transactions take the write lock at BEGIN (IMMEDIATE) and begin again while it is refused, its
 * single statements outside a transaction run again.
 */
export function waitForSqliteLocks(knex: Knex, waitMs: number): void {
  const client = (knex as any).client
  waits.set(client, waitMs)
  patchTransactions()
  const runner = client.runner
  // an own property of the root client: a transaction's client is made from the class's prototype
  // (knex's makeTxClient), so statements inside a transaction keep knex's own runner
  client.runner = function (this: any, builder: any) {
    const r = runner.call(this, builder)
    if (this.transacting) return r
    const run = r.run
    r.run = () =>
      retryWhileBusy(waitMs, async (final) => {
        try {
          return await run.call(r)
        } catch (err) {
          // several statements may have written some; one on a connection it was given is its owner's to retry
          if (isSqliteBusy(err) && (builder._connection || Array.isArray(builder.toSQL()))) final(err)
          r.connection = undefined // knex released it: the next try takes one from the pool again
          throw err
        }
      })
    return r
  }
}

let transactionsPatched = false
/** connections on which BEGIN IMMEDIATE already ran for the transaction knex is about to begin */
const begun = new WeakSet<object>()

/**
 * knex's SQLite transaction class, patched once for the process (it only changes transactions of
 * clients given to waitForSqliteLocks): a top-level transaction takes the write lock with BEGIN
 * IMMEDIATE on the connection it was given, before knex begins it; while the lock is refused the
 * connection goes back to the pool and the transaction tries again after a pause. The callback runs
 * only once BEGIN succeeded, so it runs once.
 */
function patchTransactions() {
  if (transactionsPatched) return
  transactionsPatched = true
  // the class knex's SQLite clients make their transactions with (the knex the ORM loads)
  const fromOrm = createRequire(createRequire(import.meta.url).resolve('@mikro-orm/knex'))
  const proto = fromOrm('knex/lib/dialects/sqlite3/execution/sqlite-transaction.js').prototype
  const acquire = proto.acquireConnection
  const begin = proto.begin
  proto.acquireConnection = function (this: any, config: any, cb: (conn: any) => Promise<unknown>) {
    const waitMs = waits.get(this.client)
    if (waitMs === undefined || this.outerTx || this.client.transacting || config?.connection) return acquire.call(this, config, cb)
    return retryWhileBusy(waitMs, (final) =>
      acquire.call(this, config, async (conn: any) => {
        conn.exec('BEGIN IMMEDIATE') // throws SQLITE_BUSY after SQLITE_SPIN_MS; knex gives the connection back
        begun.add(conn)
        try {
          return await cb(conn)
        } catch (err) {
          // failed before knex began (and so before it could roll back): the lock is not kept
          if (begun.delete(conn)) conn.exec('ROLLBACK')
          return final(err)
        }
      }),
    )
  }
  proto.begin = function (this: any, conn: object) {
    if (begun.delete(conn)) return Promise.resolve()
    return begin.call(this, conn)
  }
}
