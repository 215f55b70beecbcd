import path from 'node:path'
import { MikroORM, type EntitySchema, type Options } from '@mikro-orm/core'
import { BetterSqliteDriver } from '@mikro-orm/better-sqlite'
import { PostgreSqlDriver } from '@mikro-orm/postgresql'
import type { EntityManager as SqlEntityManager } from '@mikro-orm/knex'
import type { Knex } from '@mikro-orm/knex'

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

export async function openDatabase(options: {
  dataDir: string
  databaseUrl?: string
  entities: EntitySchema<any, any>[]
  debug?: boolean
}): Promise<Database> {
  const dialect = dialectOf(options.databaseUrl)
  const common: Options = {
    entities: options.entities,
    discovery: { warnWhenNoEntities: false, disableDynamicFileAccess: true },
    forceUtcTimezone: true,
    allowGlobalContext: false,
    debug: options.debug ?? false,
    // ids are integers everywhere (wire.md); bigint columns would come back as strings
    ignoreUndefinedInQuery: true,
  }
  const orm =
    dialect === 'sqlite'
      ? await MikroORM.init({
          ...common,
          driver: BetterSqliteDriver,
          dbName: sqliteFile(options.dataDir, options.databaseUrl),
          // one connection: SQLite serialises writers anyway, and pragmas stay put
          pool: {
            min: 1,
            max: 1,
            idleTimeoutMillis: 2 ** 31 - 1,
            afterCreate(conn: any, done: (err: Error | null, conn: unknown) => void) {
              // WAL lets a CLI command or a second server read and write beside a running one
              conn.pragma('journal_mode = WAL')
              conn.pragma('busy_timeout = 15000')
              conn.pragma('synchronous = NORMAL')
              conn.pragma('foreign_keys = ON')
              done(null, conn)
            },
          } as any,
        })
      : await MikroORM.init({
          ...common,
          driver: PostgreSqlDriver,
          clientUrl: options.databaseUrl,
          pool: { min: 0, max: 10 },
        })
  const knex = (orm.em as unknown as SqlEntityManager).getKnex()
  return { orm, dialect, knex, close: () => orm.close(true) }
}
