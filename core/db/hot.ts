import type { Knex } from '@mikro-orm/knex'
import type { Dialect } from './orm.js'
import { FROM_DATABASE } from '../errors.js'
import { retryWhileBusy, sqliteWaitOf } from './sqlite-locks.js'

/**
 * A statement run straight on the driver, for the few hot paths where knex's query building and
 * bookkeeping cost more than the database (the job runner's claim, heartbeat and completion:
 * bench/jobs.ts). The connection still comes from knex's pool, so a transaction holding SQLite's
 * single connection is waited for as with any knex query.
 *
 * SQL is written once with `?` placeholders (knex's style: the same text can run through
 * `trx.raw` inside a transaction); PostgreSQL gets `$1…` and a named prepared statement (parsed
 * and planned once per connection), SQLite a prepared statement cached per connection. No `?`
 * may appear in the text other than as a placeholder, and no `??` (knex's identifier binding).
 */
export class HotStatement {
  private readonly pgText: string
  /** better-sqlite3 statements, per connection (the pool may replace a connection) */
  private readonly prepared = new WeakMap<object, any>()

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    /** unique per statement text: PostgreSQL keeps prepared statements by name */
    readonly name: string,
    readonly sql: string,
  ) {
    let n = 0
    this.pgText = sql.replace(/\?/g, () => `$${++n}`)
  }

  /** the rows the statement returns (none for a statement without RETURNING) */
  run<T = any>(params: unknown[]): Promise<T[]> {
    // SQLite: another process's write lock is waited for with the connection given back
    // (sqlite-locks.ts); a single autocommit statement refused the lock wrote nothing
    const waitMs = sqliteWaitOf(this.knex)
    return waitMs === undefined ? this.runOnce(params) : retryWhileBusy(waitMs, () => this.runOnce<T>(params))
  }

  private async runOnce<T = any>(params: unknown[]): Promise<T[]> {
    const client = this.knex.client as any
    const conn = await client.acquireConnection() // knex's: its errors are marked as the database's (orm.ts)
    try {
      if (this.dialect === 'postgresql') return (await conn.query({ name: this.name, text: this.pgText, values: params })).rows
      let stmt = this.prepared.get(conn)
      if (!stmt) this.prepared.set(conn, (stmt = conn.prepare(this.sql)))
      const values = params.map(sqliteValue)
      if (stmt.reader) return stmt.all(values)
      stmt.run(values)
      return []
    } catch (err) {
      // straight from the driver: marked as the database's, so that a lost socket (ECONNRESET) is
      // known as an outage (faultOf) and the runner pauses instead of failing jobs
      if (err && typeof err === 'object' && !Object.isFrozen(err)) Object.defineProperty(err, FROM_DATABASE, { value: true, configurable: true })
      throw err
    } finally {
      client.releaseConnection(conn)
    }
  }

  /** the same statement in a knex transaction (not prepared) */
  async runIn<T = any>(trx: Knex, params: unknown[]): Promise<T[]> {
    const result = await trx.raw(this.sql, params.map((p) => (this.dialect === 'sqlite' ? sqliteValue(p) : p)) as any)
    return this.dialect === 'postgresql' ? result.rows : result
  }
}

/** what knex's SQLite client binds for a value: dates as epoch milliseconds, booleans as 0/1 */
function sqliteValue(v: unknown): unknown {
  if (v instanceof Date) return v.getTime()
  if (typeof v === 'boolean') return v ? 1 : 0
  return v
}
