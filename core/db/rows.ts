/**
 * Plain rows read with knex differ by driver: SQLite gives JSON as text, booleans as 0/1 and dates
 * as epoch milliseconds (or numeric strings); PostgreSQL gives bigints as strings. These read a
 * column the same way on both, for the GET paths that skip entity hydration.
 */
export const column = {
  json<T = unknown>(value: unknown, fallback: T): T {
    if (value === null || value === undefined) return fallback
    return (typeof value === 'string' ? JSON.parse(value) : value) as T
  },
  date(value: unknown): Date | null {
    if (value === null || value === undefined) return null
    if (value instanceof Date) return value
    return new Date(typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : (value as string | number))
  },
  bool: (value: unknown): boolean => value === true || value === 1 || value === '1' || value === 't' || value === 'true',
  int: (value: unknown): number => Number(value),
  intOrNull: (value: unknown): number | null => (value === null || value === undefined ? null : Number(value)),
}

const MS_PER_DAY = 86_400_000
/** the epoch millisecond after which toISOString writes six-digit years (+010000-01-01) */
const YEAR_10000 = 253_402_300_800_000
const twoDigits = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'))
const threeDigits = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'))
/** `YYYY-MM-DDT` by day since the epoch: the days a server shows are few (bounded: cleared when full) */
const dayPrefixes = new Map<number, string>()

/**
 * `new Date(ms).toISOString()` for epoch milliseconds (SQLite's dates): the day's part looked up,
 * the time's from two tables. toISOString made a Date and cost ~0.3 µs, five times per project of a
 * page; other values (negative, fractional, past year 9999) go through it.
 */
export function isoOfEpochMs(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= YEAR_10000) return new Date(ms).toISOString()
  const day = Math.floor(ms / MS_PER_DAY)
  let prefix = dayPrefixes.get(day)
  if (prefix === undefined) {
    if (dayPrefixes.size >= 4096) dayPrefixes.clear()
    dayPrefixes.set(day, (prefix = new Date(day * MS_PER_DAY).toISOString().slice(0, 11)))
  }
  const inDay = ms - day * MS_PER_DAY
  const seconds = Math.floor(inDay / 1000)
  return `${prefix}${twoDigits[Math.floor(seconds / 3600)]}:${twoDigits[Math.floor(seconds / 60) % 60]}:${twoDigits[seconds % 60]}.${threeDigits[inDay % 1000]}Z`
}

/** a number as JSON.stringify writes it (NaN and the infinities as null) */
const jsonNumber = (n: number): string => (Number.isFinite(n) ? String(n) : 'null')

/**
 * The JSON text of what `column` reads, for pages written as text without their objects (GET /projects):
 * `columnJson.date(v)` is `JSON.stringify(iso(column.date(v)))`, and so on. Text columns go through
 * `JSON.stringify`; a JSON column's text is sent as stored (every writer stores JSON.stringify's
 * text, which JSON.parse and JSON.stringify give back unchanged), a parsed one (PostgreSQL) stringified.
 */
export const columnJson = {
  text: (value: unknown): string => (value === null || value === undefined ? 'null' : JSON.stringify(value)),
  json: (value: unknown, fallback: string): string => (value === null || value === undefined ? fallback : typeof value === 'string' ? value : JSON.stringify(value)),
  date(value: unknown): string {
    // epoch milliseconds (SQLite's usual) without the Date column.date makes
    if (typeof value === 'number') return `"${isoOfEpochMs(value)}"`
    const date = column.date(value)
    return date === null ? 'null' : `"${date.toISOString()}"`
  },
  bool: (value: unknown): string => (column.bool(value) ? 'true' : 'false'),
  int: (value: unknown): string => jsonNumber(Number(value)),
  intOrNull: (value: unknown): string => (value === null || value === undefined ? 'null' : jsonNumber(Number(value))),
}

/** `50%_off\` → `50\%\_off\\`: literal text inside a LIKE pattern written with `escape '\'` */
export const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)

/**
 * A case-insensitive "contains" test that means the same on both databases (PostgreSQL's LIKE is
 * case-sensitive; SQLite's has no escape character unless told): `[sql, bindings]` for `whereRaw`.
 */
export const containsIgnoringCase = (sqlColumn: string, text: string): [string, string[]] => [`lower(${sqlColumn}) like ? escape '\\'`, [`%${escapeLike(text.toLowerCase())}%`]]

type Row = Record<string, any>

/** a statement compiled once, run with its parameters; rows as the driver gives them (read them with `column`) */
export interface PreparedRead<R = Row> {
  (params: readonly unknown[]): Promise<R[]>
  /**
   * The rows at once while SQLite's connection is free, else (PostgreSQL, or SQLite's connection
   * held by a transaction) their promise. A GET handler that reads through `now` and continues with
   * `andThen` answers without a promise when nothing had to wait: the request path then stays
   * synchronous (core/http/README.md), which with MikroORM's AsyncLocalStorage active saves an
   * async hook per promise and Koa's asynchronous respond (route sweep: `/status/:id`, `/session`).
   */
  now(params: readonly unknown[]): R[] | Promise<R[]>
}

/** a value, or the promise of it when it had to wait (`PreparedRead.now`) */
export type MaybePromise<T> = T | Promise<T>

/** `fn` of the value: at once when it is there, after it when it is a Promise (a Promise: other thenables, a knex builder, are values here) */
export function andThen<T, U>(value: MaybePromise<T>, fn: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return value instanceof Promise ? value.then(fn) : fn(value)
}

/** `fn` for each item in turn, waiting only after a call that returned a promise (decorators of a view) */
export function eachInTurn<T>(items: readonly T[], fn: (item: T, index: number) => MaybePromise<unknown>): MaybePromise<void> {
  const from = (i: number): MaybePromise<void> => {
    for (; i < items.length; i++) {
      const waiting = fn(items[i], i)
      if (waiting instanceof Promise) return waiting.then(() => from(i + 1))
    }
  }
  return from(0)
}

const sqliteStatements = new WeakMap<object, Map<string, any>>()
/** the key of a SQLite statement prepared to give arrays (better-sqlite3's raw mode is a property of the statement) */
const ARRAYS_KEY = '\u0000arrays '
const pgNames = new Map<string, string>()

/** SQLite takes neither booleans nor Dates as parameters (knex converts them the same way) */
const sqliteValue = (v: unknown) => (v === true ? 1 : v === false ? 0 : v instanceof Date ? v.valueOf() : v)

/**
 * A read statement prepared once per connection, for the hot GET paths (PERFORMANCE.md): building
 * a query with knex or the ORM and having better-sqlite3 prepare it again costs more per request
 * than running it. `sql` uses `?` placeholders and must read only (it runs on a connection of the
 * ORM's pool, taken and given back around the call, so it never sees another request's open
 * transaction). SQLite: the better-sqlite3 statement is cached per connection; PostgreSQL: a named
 * prepared statement, which pg parses once per connection.
 *
 * `{ arrays: true }` gives each row as an array of its columns in the statement's order: the drivers
 * make no object per row (better-sqlite3 sets its values one property at a time, which cost more than
 * reading them: a page of 100 projects of 25 columns, ~640 against ~340 µs).
 */
export function preparedRead<R = Row>(knex: { client: any }, sql: string, options: { arrays?: boolean } = {}): PreparedRead<R> {
  const client = knex.client
  const arrays = options.arrays === true
  if (client.driverName === 'pg') {
    let n = 0
    const text = sql.replace(/\?/g, () => `$${++n}`)
    let name = pgNames.get(text)
    if (!name) pgNames.set(text, (name = `mamkit_read_${pgNames.size + 1}`))
    const read = async (params: readonly unknown[]) => {
      const conn = await client.acquireConnection()
      try {
        return (await conn.query({ name, text, values: params, ...(arrays && { rowMode: 'array' }) })).rows
      } finally {
        await client.releaseConnection(conn)
      }
    }
    return Object.assign(read, { now: read })
  }
  const run = (conn: any, params: readonly unknown[]) => {
    let statements = sqliteStatements.get(conn)
    if (!statements) sqliteStatements.set(conn, (statements = new Map()))
    const key = arrays ? ARRAYS_KEY + sql : sql
    let statement = statements.get(key)
    if (!statement) statements.set(key, (statement = arrays ? conn.prepare(sql).raw(true) : conn.prepare(sql)))
    return statement.all(params.map(sqliteValue))
  }
  const waiting = async (params: readonly unknown[]) => {
    const conn = await client.acquireConnection()
    try {
      return run(conn, params)
    } finally {
      await client.releaseConnection(conn)
    }
  }
  const now = (params: readonly unknown[]): R[] | Promise<R[]> => {
    const idle = idleSqliteConnection(client)
    return idle ? run(idle, params) : waiting(params)
  }
  return Object.assign(async (params: readonly unknown[]) => now(params), { now })
}

/**
 * SQLite's connection when nobody holds it (no transaction open on it, nobody waiting for it): a
 * statement run synchronously on it cannot interleave with anyone's, so it is used without the
 * pool's acquire and release (a timer and half a dozen promises each: more than a small read costs).
 * Otherwise undefined, and the caller waits for it through the pool as any query does.
 */
function idleSqliteConnection(client: any): object | undefined {
  const pool = client.pool
  if (!pool || pool.numUsed() !== 0 || pool.numPendingAcquires() !== 0 || pool.numPendingCreates() !== 0) return undefined
  return pool.free[0]?.resource
}

/** the most values one `preparedReadIn` statement binds: longer lists run as several */
const IN_LIST_MAX = 512

/**
 * `preparedRead` for `… in (<list>)` over a list of values whose length varies per call (a page's
 * project ids: the bulk decorators of project JSON). Building such a query with knex on every call
 * cost more than running it (route sweep, `GET /projects`); one prepared text per list length
 * would grow without bound. So the list is padded to the next power of two by repeating its last
 * value (a repeated value in `in (…)` matches nothing twice): at most ten statements, each
 * prepared once per connection. `sql` gets the placeholders (`?, ?, ?`) and must read only.
 */
export function preparedReadIn<R = Row>(knex: { client: any }, sql: (placeholders: string) => string): PreparedRead<R> {
  const bySize = new Map<number, PreparedRead<R>>()
  const statement = (size: number) => {
    let read = bySize.get(size)
    if (!read) bySize.set(size, (read = preparedRead<R>(knex, sql(Array(size).fill('?').join(', ')))))
    return read
  }
  const chunk = (values: readonly unknown[]) => {
    let size = 1
    while (size < values.length) size *= 2
    const padded = values.length === size ? values : [...values, ...Array(size - values.length).fill(values[values.length - 1])]
    return statement(size).now(padded)
  }
  const long = async (values: readonly unknown[]) => {
    const rows: R[] = []
    for (let i = 0; i < values.length; i += IN_LIST_MAX) rows.push(...(await chunk(values.slice(i, i + IN_LIST_MAX))))
    return rows
  }
  // as PreparedRead.now: one statement's rows at once while SQLite's connection is free
  const now = (values: readonly unknown[]): MaybePromise<R[]> => (!values.length ? [] : values.length <= IN_LIST_MAX ? chunk(values) : long(values))
  return Object.assign(async (values: readonly unknown[]) => now(values), { now })
}

/** page sizes written into prepared SQL as numbers (clients' usual `per_page`); others are bound */
const LITERAL_LIMITS = new Set([1, 10, 20, 25, 50, 100, 200, 250, 500])

/**
 * `limit N` for a prepared page statement: `[sql, bindings]`. SQLite (3.46 on) compiles a statement
 * again every time a LIMIT parameter is bound (its planner reads the value), so the usual page sizes
 * are written into the text (one prepared statement each) and only unusual ones are bound: the
 * statements prepared per connection stay few whatever `per_page` clients send.
 */
export function limitSql(n: number): [string, number[]] {
  return LITERAL_LIMITS.has(n) ? [`limit ${n}`, []] : ['limit ?', [n]]
}

/**
 * The number of all matches of an OFFSET-paged list: a page that is not full ends the list, so its
 * offset plus its rows is the count, without the `count(*)` (`count`) that would read every match's
 * index entry again. Only a full page, or one past the end, needs the query.
 */
export function pageTotal(offset: number, perPage: number, found: number, count: () => MaybePromise<number>): MaybePromise<number> {
  if (found < perPage && (found > 0 || offset === 0)) return offset + found
  return count()
}
