import path from 'node:path'
import { MikroORM, ReferenceKind, type EntitySchema, type MetadataStorage, type Options } from '@mikro-orm/core'
import type { EntityManager as SqlEntityManager } from '@mikro-orm/knex'
import type { Knex } from '@mikro-orm/knex'
import { FROM_DATABASE } from '../errors.js'
import { SQLITE_SPIN_MS, waitForSqliteLocks } from './sqlite-locks.js'

export type Dialect = 'sqlite' | 'postgresql'
export type EntityManager = SqlEntityManager
export type { Knex }

export interface Database {
  orm: MikroORM
  dialect: Dialect
  /** the query builder behind the ORM, for migrations and the few hot paths that skip entities */
  knex: Knex
  close(): Promise<void>
}

export function dialectOf(databaseUrl: string | undefined): Dialect {
  if (!databaseUrl || databaseUrl.startsWith('sqlite:') || databaseUrl.startsWith('file:')) return 'sqlite'
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) return 'postgresql'
  throw new Error(`Unsupported database URL "${databaseUrl}": use postgres://… or leave it unset for SQLite`)
}

export function sqliteFile(dataDir: string, databaseUrl?: string): string {
  if (!databaseUrl) return path.join(dataDir, 'mamkit.sqlite')
  return path.resolve(databaseUrl.replace(/^(sqlite|file):(\/\/)?/, ''))
}

/**
 * Tables that are read and written with knex only, deliberately without an entity. The ORM's schema
 * diff must neither drop nor describe them; a plain-knex table added later is listed here too
 * (test/core/schema-drift.test.ts fails until it is).
 */
export const TABLES_WITHOUT_ENTITY = [
  'mamkit_migrations', // the migrator's own bookkeeping (migrator.ts)
  'jobs', // the queue claims rows with hand-written SQL and locks (core/jobs/queue.ts)
  'features', // plugin switches, cached per process (core/system/features.ts)
  'storage_journal', // intents of file operations, written and fenced with knex (core/storage/journal.ts)
  'idempotency_keys', // stored answers, claimed with a unique insert (core/idempotency/store.ts)
  'event_outbox', // catalogue events written in the change's transaction, claimed by the fan-out (core/outbox.ts)
  // the search index, written by triggers (plugins/search/migrations.ts): FTS5 and tsvector have no entity form
  'search_properties',
  'search_documents',
  'search_dirty', // documents a bulk value change left for the sweeper (plugins/search/sweep.ts), PostgreSQL only
  'search_lexemes', // the words' lexicon: a prefix searched as its exact lexemes (plugins/search/migrations.ts, 0008), PostgreSQL only
  'search_fts',
  'search_fts_data',
  'search_fts_idx',
  'search_fts_content',
  'search_fts_docsize',
  'search_fts_config',
  'search_fields_fts', // field:value's texts on SQLite (plugins/search/migrations.ts, 0006)
  'search_fields_fts_data',
  'search_fields_fts_idx',
  'search_fields_fts_content',
  'search_fields_fts_docsize',
  'search_fields_fts_config',
]

/**
 * Every table is made by a migration written with knex, and the entities describe those tables as
 * they are. Three habits of knex cannot be stated in an entity the same way for both databases, so
 * they are stated here, per database, for the ORM's schema diff to compare like with like:
 * - foreign keys get no ON UPDATE rule (ids never change), where the ORM assumes ON UPDATE CASCADE;
 * - `defaultTo(0)` writes the quoted literal `'0'`: SQLite keeps that text (booleans as '0'/'1'),
 *   PostgreSQL keeps it on bigint columns (`'0'::bigint`) and folds it on the others (`0`, `false`);
 * - `double` columns are `float` on SQLite (REAL either way).
 * Only the schema description changes: values are read and written as before.
 */
function describeKnexColumns(storage: MetadataStorage, dialect: Dialect) {
  for (const meta of Object.values(storage.getAll())) {
    for (const prop of meta.props) {
      if (prop.kind === ReferenceKind.MANY_TO_ONE || (prop.kind === ReferenceKind.ONE_TO_ONE && prop.owner)) prop.updateRule ??= 'no action'
      const quoted = dialect === 'sqlite' || prop.columnTypes?.[0] === 'bigint'
      const plain = (typeof prop.default === 'number' || typeof prop.default === 'boolean') && prop.defaultRaw === String(prop.default)
      if (quoted && plain) prop.defaultRaw = `'${Number(prop.default)}'` // an explicit `defaultRaw` stays as written
      if (dialect === 'sqlite' && prop.columnTypes?.[0] === 'double') prop.columnTypes = ['float']
    }
  }
}

const marked = new WeakSet<object>()

/**
 * Marks every error a query or a connection attempt throws as the database's (FROM_DATABASE), on
 * the knex client's prototype so transactions' clients (made from it) are marked too: a bare
 * `connect ECONNREFUSED` is then known as a database outage (503), while the same code from a
 * webhook or another outgoing call stays that call's error.
 */
function markDatabaseErrors(knex: Knex) {
  const proto = Object.getPrototypeOf((knex as any).client)
  if (marked.has(proto)) return
  marked.add(proto)
  const mark = (err: unknown) => {
    if (err && typeof err === 'object' && !Object.isFrozen(err)) Object.defineProperty(err, FROM_DATABASE, { value: true, configurable: true })
    throw err
  }
  for (const method of ['acquireConnection', 'query'] as const) {
    const original = proto[method]
    proto[method] = function (this: unknown, ...args: unknown[]) {
      const result = original.apply(this, args)
      return result && typeof result.then === 'function' ? result.then(undefined, mark) : result
    }
  }
}

/** statements kept per SQLite connection; the least recently used go first past this */
const SQLITE_STATEMENTS = 500
const cachedStatements = new WeakSet<object>()

/**
 * knex's better-sqlite3 client prepares every statement anew on every query (a third of a small
 * query's CPU: `prepare` was 9–12 % of a SQLite server's busy time under the route sweep, beside
 * the query itself). The same SQL text is prepared once per connection here and the statement
 * reused, for the ORM's queries and knex's alike. better-sqlite3 runs a statement synchronously
 * (`all`/`run`), so one statement is never in use twice at a time; SQLite re-prepares a statement
 * itself when the schema changed under it (a migration). Queries that ask for their own integer
 * mode (`safeIntegers`) are prepared for themselves, as before.
 */
function cacheSqliteStatements(knex: Knex) {
  const proto = Object.getPrototypeOf((knex as any).client)
  if (cachedStatements.has(proto)) return
  cachedStatements.add(proto)
  const byConnection = new WeakMap<object, Map<string, any>>()
  literalSqliteLimits(knex)
  proto._query = async function (this: any, connection: any, obj: any) {
    if (!obj.sql) throw new Error('The query is empty')
    if (!connection) throw new Error('No connection provided')
    const safeIntegers = this._optSafeIntegers(obj.options)
    let statement
    if (safeIntegers !== undefined) {
      statement = connection.prepare(obj.sql)
      statement.safeIntegers(safeIntegers)
    } else {
      let statements = byConnection.get(connection)
      if (!statements) byConnection.set(connection, (statements = new Map()))
      statement = statements.get(obj.sql)
      if (statement) {
        // most recently used last: the first key is the one to drop
        statements.delete(obj.sql)
      } else {
        statement = connection.prepare(obj.sql)
        if (statements.size >= SQLITE_STATEMENTS) statements.delete(statements.keys().next().value!)
      }
      statements.set(obj.sql, statement)
    }
    const bindings = this._formatBindings(obj.bindings)
    if (statement.reader) {
      obj.response = statement.all(bindings)
      return obj
    }
    const response = statement.run(bindings)
    obj.response = response
    obj.context = { lastID: response.lastInsertRowid, changes: response.changes }
    return obj
  }
}

/**
 * SQLite (3.46 on) lets the planner read a LIMIT bound as a parameter, and so marks the statement
 * expired whenever that parameter is bound: a cached statement with `limit ?` was compiled again
 * on every run (a 23-column page of assets: 16 µs for an empty page against 3 µs with the LIMIT
 * written in; every knex `first()` paid it too). knex's SQLite compiler writes the LIMIT as a
 * number instead: knex parsed it with parseInt, so it is an integer, never text from a request.
 * One statement text per LIMIT value: the statement cache above is bounded.
 */
function literalSqliteLimits(knex: Knex) {
  const compiler = Object.getPrototypeOf((knex as any).client.queryCompiler(knex.queryBuilder()))
  const bound = compiler.limit
  compiler.limit = function (this: { single: { limit?: unknown } }) {
    const n = this.single.limit
    return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? `limit ${n}` : bound.call(this)
  }
}

/** knex's console warnings, into the log at most once per 10 s */
function quietly(log?: { warn(obj: object, msg: string): void }) {
  let last = 0
  return (message: unknown) => {
    if (Date.now() - last < 10_000) return
    last = Date.now()
    log?.warn({ detail: String(message).slice(0, 300) }, 'database connection warning (repeats within 10 s not logged)')
  }
}

export async function openDatabase(options: {
  dataDir: string
  databaseUrl?: string
  entities: EntitySchema<any, any>[]
  debug?: boolean
  /** the longest wait for a connection or a lock (config.database.waitMs) */
  waitMs?: number
  log?: { warn(obj: object, msg: string): void }
}): Promise<Database> {
  const waitMs = options.waitMs ?? 15_000
  const dialect = dialectOf(options.databaseUrl)
  const common: Options = {
    entities: options.entities,
    discovery: {
      warnWhenNoEntities: false,
      disableDynamicFileAccess: true,
      // a class field's initial value is the application's default, not the column's: the column
      // defaults are the ones the migrations made, declared with `default` in the entity schemas
      inferDefaultValues: false,
      afterDiscovered: (storage) => describeKnexColumns(storage, dialect),
    },
    schemaGenerator: { skipTables: TABLES_WITHOUT_ENTITY },
    forceUtcTimezone: true,
    allowGlobalContext: false,
    debug: options.debug ?? false,
    // ids are integers everywhere (wire.md); bigint columns would come back as strings
    ignoreUndefinedInQuery: true,
    driverOptions: {
      // a pool slot or a new connection: past this the request answers 503 instead of waiting through an outage
      acquireConnectionTimeout: waitMs,
      // knex's own console warnings ("Connection Error: …") on every connection a restart ends: into the log, once per burst
      log: { warn: quietly(options.log), error: quietly(options.log), deprecate: () => {}, debug: () => {} },
    },
  }
  // only the driver in use is loaded: the other one (PostgreSQL's is ~0.7 s of module loading on
  // a loaded machine) made every start-up and restart slower (issue 19)
  const orm =
    dialect === 'sqlite'
      ? await MikroORM.init({
          ...common,
          driver: (await import('@mikro-orm/better-sqlite')).BetterSqliteDriver,
          dbName: sqliteFile(options.dataDir, options.databaseUrl),
          // one connection: SQLite serialises writers anyway, and pragmas stay put
          pool: {
            min: 1,
            max: 1,
            idleTimeoutMillis: 2 ** 31 - 1,
            afterCreate(conn: any, done: (err: Error | null, conn: unknown) => void) {
              // WAL lets a CLI command or a second server read and write beside a running one
              conn.pragma('journal_mode = WAL')
              // SQLite's own wait for another process's lock blocks the event loop: kept short, the
              // rest of the wait is asynchronous (sqlite-locks.ts); past it SQLITE_BUSY, answered 503
              conn.pragma(`busy_timeout = ${SQLITE_SPIN_MS}`)
              conn.pragma('synchronous = NORMAL')
              conn.pragma('foreign_keys = ON')
              // SQLite's page cache is 2 MiB by default: at a million assets a listing page's 100 rows
              // and its folder's index entries were read from the file on every request (a system
              // call per page). 64 MiB at most, taken as pages are read
              conn.pragma('cache_size = -65536')
              done(null, conn)
            },
          } as any,
        })
      : await MikroORM.init({
          ...common,
          driver: (await import('@mikro-orm/postgresql')).PostgreSqlDriver,
          clientUrl: options.databaseUrl,
          pool: { min: 0, max: 10 },
          driverOptions: {
            ...common.driverOptions,
            // a server that stopped answering (not refusing) must not hold a connection attempt for minutes
            connection: { connectionTimeoutMillis: waitMs, keepAlive: true },
          },
        })
  const knex = (orm.em as unknown as SqlEntityManager).getKnex()
  markDatabaseErrors(knex)
  if (dialect === 'sqlite') {
    cacheSqliteStatements(knex)
    waitForSqliteLocks(knex, Math.max(0, waitMs))
  }
  return { orm, dialect, knex, close: () => orm.close(true) }
}
