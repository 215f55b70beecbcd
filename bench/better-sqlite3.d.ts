// better-sqlite3 ships no types; bench/jobs.ts (its ceiling loop) and test/e2e/job-crash.test.ts
// (a writer that holds the lock) open the SQLite file themselves: only what they call is typed
declare module 'better-sqlite3' {
  interface Statement {
    run(...params: unknown[]): { changes: number }
    all(...params: unknown[]): unknown[]
    get(...params: unknown[]): unknown
  }
  class Database {
    constructor(file: string)
    prepare(sql: string): Statement
    pragma(text: string): unknown
    exec(sql: string): this
    close(): void
  }
  export default Database
}
