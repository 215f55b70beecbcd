/**
 * A unique index refused the row, from MikroORM or from a plain knex query on either database
 * (knex passes the driver's error through: SQLite says SQLITE_CONSTRAINT_UNIQUE, PostgreSQL 23505).
 */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { name?: string; code?: string; cause?: unknown } | null
  if (!e) return false
  if (e.name === 'UniqueConstraintViolationException' || e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e.code === '23505') return true
  return e.cause !== undefined && e.cause !== err && isUniqueViolation(e.cause)
}
