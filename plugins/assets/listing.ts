import path from 'node:path'
import { andThen, limitSql, pageTotal, preparedRead, type Database, type Knex, type MaybePromise, type PreparedRead } from '../../core/index.js'
import { ASSET_COLUMNS, assetJsonOfRow, assetJsonSql } from './asset-json.js'
import { folderOf } from './files.js'

/** what `GET /projects/:id/assets` filters and pages by (validated and cleaned by the route) */
export interface AssetPageQuery {
  projectId: number
  /** '' for the project's top folder */
  folder: string
  recursive: boolean
  type?: string
  online?: boolean
  perPage: number
  /** keyset paging: the rows after this relative path (cleaned); else `page` (1-based) by OFFSET */
  after?: string
  page?: number
  /** count every match (`X-Total-Count`); the route asks for it on OFFSET pages and, with `total=true`, on keyset pages */
  count: boolean
}

/** a page as the route answers it: the JSON body, its number of assets, its last one's path, the count of all matches when asked */
export interface AssetPage {
  total?: number
  found: number
  lastPath?: string
  body: string
}

/**
 * One page of a project's assets and, when asked, the count of all that match, as plain rows from
 * prepared statements: the route sweep (bench/routes.ts) showed knex's query building and SQLite's
 * preparing again on every request costing several times the queries themselves. Each shape of the
 * query (folder or recursive, filters, keyset or OFFSET) is its own SQL text, prepared once per
 * connection (`preparedRead`); there are 2 × 2 × 2 × 2 of them at most.
 */
export class AssetListing {
  private readonly statements = new Map<string, PreparedRead>()

  private readonly knex: Knex
  private readonly pg: boolean

  constructor(db: Pick<Database, 'knex' | 'dialect'>) {
    this.knex = db.knex
    this.pg = db.dialect === 'postgresql'
  }

  /**
   * The page as the route's JSON body (`{"assets":[…]}`), the number of its assets, the path of its
   * last one and, when asked, the count of all matches. PostgreSQL writes each asset's JSON itself
   * (`assetJsonSql`): the Node process joins 100 strings instead of parsing 2,300 values and
   * stringifying 100 objects; a page with a row it cannot spell exactly is read again as plain rows.
   * SQLite: plain rows and `assetJsonOfRow`.
   */
  page(q: AssetPageQuery, owner: { id: number; name: string }): MaybePromise<AssetPage> {
    let where = 'project_id = ?int'
    const args: unknown[] = [q.projectId]
    if (!q.recursive) {
      where += ' and folder = ?text'
      args.push(q.folder)
    } else if (q.folder) {
      // the folder itself and everything below it; substr counts characters on both databases
      where += ' and (folder = ?text or substr(folder, 1, ?int) = ?text)'
      args.push(q.folder, [...q.folder].length + 1, `${q.folder}/`)
    }
    if (q.type !== undefined) {
      where += ' and type = ?text'
      args.push(q.type)
    }
    if (q.online !== undefined) {
      where += ' and online = ?bool'
      args.push(q.online)
    }
    // (folder, name) is unique in a project (it is the path) and walks the index: no tie-breaker needed
    // (an `id` after it made PostgreSQL sort every row before a deep OFFSET)
    // the page's statement after its `from assets`: the plain rows' and the JSON's
    let page = ` where ${where}`
    const pageArgs = [...args]
    const count = () => andThen(this.statement(`count ${where}`, () => plain(`select count(*) as total from assets where ${where}`)).now(args), ([r]) => Number(r.total))
    const [literalLimit, limitArgs] = limitSql(q.perPage)
    const limit = literalLimit.replace('?', '?bigint')
    let offset = 0
    if (q.after !== undefined) {
      // keyset paging seeks in the (project, folder, name) index: page 500 costs what page 1 does, unlike OFFSET
      page += ` and (folder, name) > (?text, ?text) order by folder, name ${limit}`
      pageArgs.push(folderOf(q.after), path.posix.basename(q.after), ...limitArgs)
    } else {
      offset = ((q.page ?? 1) - 1) * q.perPage
      page += ` order by folder, name ${limit} offset ?bigint`
      pageArgs.push(...limitArgs, offset)
    }
    // a keyset page is counted only when asked (total=true); an OFFSET page that is not full tells its count (pageTotal)
    const total = (found: number) => (!q.count ? undefined : q.after !== undefined ? count() : pageTotal(offset, q.perPage, found, count))
    if (this.pg) return this.pgPage(page, pageArgs, owner, q.count && (q.after !== undefined || offset === 0) ? { where, args } : undefined, total)
    // SQLite: synchronous while its connection is free (PreparedRead.now): the route answers without a promise
    return andThen(this.rowPage(page, pageArgs, owner), (answer) => andThen(total(answer.found), (n) => ({ ...answer, total: n })))
  }

  /**
   * PostgreSQL: a first page or a keyset page asked to count counts in the same statement (one
   * round trip, `counted`); a later OFFSET page counts only when it is full (pageTotal), as before
   */
  private async pgPage(tail: string, args: unknown[], owner: { id: number; name: string }, counted: { where: string; args: unknown[] } | undefined, total: (found: number) => MaybePromise<number> | undefined): Promise<AssetPage> {
    const answer = await this.jsonPage(tail, args, owner, counted)
    return answer.total !== undefined ? answer : { ...answer, total: await total(answer.found) }
  }

  private rowPage(tail: string, args: unknown[], owner: { id: number; name: string }): MaybePromise<AssetPage> {
    const rows = this.statement(`rows ${tail}`, () => plain(`select ${ASSET_COLUMNS.join(', ')} from assets${tail}`)).now(args)
    return andThen(rows, (rows) => ({ found: rows.length, lastPath: rows.length ? (rows[rows.length - 1].path as string) : undefined, body: JSON.stringify({ assets: rows.map((r) => assetJsonOfRow(r, owner)) }) }))
  }

  /**
   * PostgreSQL: each asset's JSON text from the database (`assetJsonSql`), in the page's order, and
   * with `counted` the count of all matches as a column of every row (an InitPlan: counted once;
   * an empty page tells none, nor does a page read again as plain rows)
   */
  private async jsonPage(tail: string, args: unknown[], owner: { id: number; name: string }, counted?: { where: string; args: unknown[] }): Promise<AssetPage> {
    const read = this.statement(`json ${tail} count ${counted?.where ?? ''}`, () => {
      const { json, ok, from } = assetJsonSql('a', '?::text')
      const total = counted ? `, (select count(*) from assets where ${hidden(counted.where)}) as total` : ''
      // A keyset page joins the lateral item beside `assets`: the join keeps the index's order and the
      // LIMIT stops it after the page. Rows an OFFSET skips would be written too (a deep page: thousands),
      // so that page is read first and its rows written and put in order (a sort of the page's rows)
      const select = `select ${json} as j, a.path, ${ok} as ok${total}`
      return tail.includes(' offset ')
        ? `${select} from (select ${ASSET_COLUMNS.join(', ')} from assets${hidden(tail)}) a ${from} order by a.folder, a.name`
        : `${select} from assets a ${from}${hidden(tail)}`
    })
    const rows = await read(counted ? [owner.name, ...counted.args, ...args] : [owner.name, ...args])
    let body = '{"assets":['
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]
      if (r.ok !== true || typeof r.j !== 'string') return this.rowPage(tail, args, owner)
      body += i ? `,${r.j}` : r.j
    }
    return { total: counted && rows.length ? Number(rows[0].total) : undefined, found: rows.length, lastPath: rows.length ? (rows[rows.length - 1].path as string) : undefined, body: `${body}]}` }
  }

  /**
   * the prepared statement of a page's shape (`key`: its kind and typed tail; the values are bound),
   * its text built once: a listing has a handful of shapes, and building the text (the JSON
   * expression is ~3 KB) cost more per request than the lookup
   */
  private statement(key: string, text: () => string): PreparedRead {
    let read = this.statements.get(key)
    if (!read) this.statements.set(key, (read = preparedRead(this.knex, text())))
    return read
  }
}

/** the statements above mark each parameter with its type (`?int`): a plain `?` */
const plain = (sql: string) => sql.replace(/\?(int|bigint|text|bool)\b/g, '?')
/**
 * each parameter as an InitPlan (`(select ?::int)`): the planner sees no value, so its custom plans
 * cost what the generic plan costs and PostgreSQL keeps the generic one. Otherwise a statement whose
 * custom plan was cheaper (an empty folder: 1 row estimated, the generic plan 100) was planned again
 * on every run, and planning the page's JSON expression took ~0.4 ms, more than running it
 */
const hidden = (sql: string) => sql.replace(/\?(int|bigint|text|bool)\b/g, '(select ?::$1)')

const listings = new WeakMap<object, AssetListing>()

/** the listing of this database (its prepared statements live as long as its knex) */
export function assetListing(db: Pick<Database, 'knex' | 'dialect'>): AssetListing {
  let listing = listings.get(db.knex)
  if (!listing) listings.set(db.knex, (listing = new AssetListing(db)))
  return listing
}
