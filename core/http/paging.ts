import { Type } from 'typebox'
import type { Knex } from '../db/orm.js'
import { invalidParam } from '../errors.js'
import type { MamContext } from './context.js'

/**
 * Paging parameters every list takes: `page` and `per_page` (OFFSET paging, as clients know it)
 * and `after`, the `X-Next-After` value of the previous page (keyset paging: page 500 costs what
 * page 1 does). Spread into a route's input schema.
 */
export const PageInput = {
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
  after: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
}

export interface PageQuery {
  page?: number
  per_page?: number
  after?: string
}

/** how a row's place in the order becomes an `after` cursor and back */
export interface CursorCodec<Row> {
  encode(row: Row): string
  /** the values of the order columns, or undefined when the cursor is malformed */
  decode(cursor: string): unknown[] | undefined
}

/** the default cursor: the order columns' values as base64url JSON (opaque to clients) */
export const jsonCursor = <Row extends Record<string, unknown>>(columns: string[]): CursorCodec<Row> => ({
  encode: (row) => Buffer.from(JSON.stringify(columns.map((c) => row[c] ?? null))).toString('base64url'),
  decode(cursor) {
    try {
      const values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
      return Array.isArray(values) && values.length === columns.length ? values : undefined
    } catch {
      return undefined
    }
  },
})

/**
 * A cursor of two integers (a sort key and the row id) for lists paged by hand, such as markers
 * by in frame and sentences by start time: base64url JSON, and a malformed one decodes to undefined.
 */
export const integerPairCursor = {
  encode: (key: number, id: number) => Buffer.from(JSON.stringify([key, id])).toString('base64url'),
  decode(text: string): [number, number] | undefined {
    try {
      const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
      return Array.isArray(v) && v.length === 2 && v.every((n) => Number.isInteger(n)) ? (v as [number, number]) : undefined
    } catch {
      return undefined
    }
  },
}

export interface PaginateOptions<Row> {
  /** a total order: the last column must make rows unique (`['name', 'id']`) */
  orderBy: string[]
  /** every column in the same direction (newest first: `desc`); default `asc` */
  direction?: 'asc' | 'desc'
  /** column names as selected, when they differ from the ORDER BY expressions (`p.name` → `name`) */
  rowKeys?: string[]
  cursor?: CursorCodec<Row>
  defaultPerPage?: number
  /** count every match for `X-Total-Count` (one more query; leave off for huge tables) */
  total?: boolean
}

/**
 * One page of `query` in a stable order, with `X-Total-Count` (when asked) and `X-Next-After` when a
 * further page may exist. `page` and `after` exclude each other (422).
 */
export async function paginate<Row extends Record<string, unknown>>(
  ctx: MamContext,
  query: Knex.QueryBuilder,
  input: PageQuery,
  options: PaginateOptions<Row>,
): Promise<Row[]> {
  const perPage = input.per_page ?? options.defaultPerPage ?? 100
  const keys = options.rowKeys ?? options.orderBy.map((c) => c.slice(c.lastIndexOf('.') + 1))
  const cursor = options.cursor ?? jsonCursor<Row>(keys)
  if (input.after !== undefined && input.page !== undefined) throw invalidParam('page', 'cannot be combined with after')
  const total = options.total ? query.clone().clearSelect().clearOrder().count({ total: '*' }) : undefined
  const order = options.direction ?? 'asc'
  const page = query.clone().orderBy(options.orderBy.map((column) => ({ column, order }))).limit(perPage)
  if (input.after !== undefined) {
    const values = cursor.decode(input.after)
    if (!values) throw invalidParam('after', 'is not a cursor this list gave out (X-Next-After)')
    page.whereRaw(`(${options.orderBy.map(() => '??').join(', ')}) ${order === 'asc' ? '>' : '<'} (${values.map(() => '?').join(', ')})`, [...options.orderBy, ...(values as any[])])
  } else page.offset(((input.page ?? 1) - 1) * perPage)
  const [rows, counted] = await Promise.all([page as Promise<Row[]>, total])
  if (counted) ctx.set('X-Total-Count', String(Number((counted as Array<{ total: unknown }>)[0]?.total ?? 0)))
  if (rows.length === perPage) ctx.set('X-Next-After', cursor.encode(rows[rows.length - 1]))
  return rows
}
