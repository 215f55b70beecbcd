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

/** `50%_off\` → `50\%\_off\\`: literal text inside a LIKE pattern written with `escape '\'` */
export const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)

/**
 * A case-insensitive "contains" test that means the same on both databases (PostgreSQL's LIKE is
 * case-sensitive; SQLite's has no escape character unless told): `[sql, bindings]` for `whereRaw`.
 */
export const containsIgnoringCase = (sqlColumn: string, text: string): [string, string[]] => [`lower(${sqlColumn}) like ? escape '\\'`, [`%${escapeLike(text.toLowerCase())}%`]]
