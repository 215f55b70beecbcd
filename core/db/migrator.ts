import type { Knex } from '@mikro-orm/knex'
import type { Database, Dialect } from './orm.js'

/**
 * A schema change owned by one plugin. Written with the knex schema builder so one migration
 * serves SQLite and PostgreSQL; `dialect` is there for the rare statement that differs.
 * Migrations never change once released: add a new one instead.
 */
export interface Migration {
  name: string
  up(knex: Knex, dialect: Dialect): Promise<void>
}

export const MIGRATIONS_TABLE = 'mamkit_migrations'
const TABLE = MIGRATIONS_TABLE
// arbitrary constant: every mamkit process migrating the same PostgreSQL database takes this lock
const PG_LOCK_ID = 7_005_001

export interface PluginMigrations {
  plugin: string
  migrations: Migration[]
}

/** Runs what is pending, plugin by plugin in dependency order. Returns the names applied. */
export async function migrate(db: Database, plugins: PluginMigrations[]): Promise<string[]> {
  const { knex, dialect } = db
  if (!(await knex.schema.hasTable(TABLE))) {
    await knex.schema
      .createTable(TABLE, (t) => {
        t.string('plugin', 100).notNullable()
        t.string('name', 200).notNullable()
        t.timestamp('applied_at', { useTz: true }).notNullable()
        t.primary(['plugin', 'name'])
      })
      .catch(async (err) => {
        // created meanwhile by another process
        if (!(await knex.schema.hasTable(TABLE))) throw err
      })
  }
  const applied: string[] = []
  const run = async (conn: Knex) => {
    const done = new Set(
      (await conn(TABLE).select('plugin', 'name')).map((r: { plugin: string; name: string }) => `${r.plugin}/${r.name}`),
    )
    for (const { plugin, migrations } of plugins) {
      for (const m of migrations) {
        const id = `${plugin}/${m.name}`
        if (done.has(id)) continue
        try {
          await conn.transaction(async (trx) => {
            await m.up(trx, dialect)
            await trx(TABLE).insert({ plugin, name: m.name, applied_at: new Date() })
          })
        } catch (err) {
          const again = await conn(TABLE).where({ plugin, name: m.name }).first()
          if (again) continue // applied by a concurrent process (SQLite has no advisory locks)
          throw new Error(`migration ${id} failed: ${(err as Error).message}`, { cause: err })
        }
        applied.push(id)
      }
    }
  }
  if (dialect === 'postgresql') {
    // a session-level advisory lock needs one connection for lock, work and unlock
    const conn = await (knex.client as any).acquireConnection()
    try {
      await conn.query('select pg_advisory_lock($1)', [PG_LOCK_ID])
      await run(knex)
    } finally {
      await conn.query('select pg_advisory_unlock($1)', [PG_LOCK_ID]).catch(() => {})
      await (knex.client as any).releaseConnection(conn)
    }
  } else {
    await run(knex)
  }
  return applied
}

/** Columns every table has; keeps migrations short and consistent. */
export function timestamps(t: Knex.CreateTableBuilder): void {
  t.timestamp('created_at', { useTz: true }).notNullable()
  t.timestamp('updated_at', { useTz: true }).notNullable()
}
