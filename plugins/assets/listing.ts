import path from 'node:path'
import { limitSql, pageTotal, preparedRead, type Knex, type PreparedRead } from '../../core/index.js'
import { ASSET_COLUMNS } from './asset-json.js'
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

/**
 * One page of a project's assets and, when asked, the count of all that match, as plain rows from
 * prepared statements: the route sweep (bench/routes.ts) showed knex's query building and SQLite's
 * preparing again on every request costing several times the queries themselves. Each shape of the
 * query (folder or recursive, filters, keyset or OFFSET) is its own SQL text, prepared once per
 * connection (`preparedRead`); there are 2 × 2 × 2 × 2 of them at most.
 */
export class AssetListing {
  private readonly statements = new Map<string, PreparedRead>()

  constructor(private readonly knex: Knex) {}

  async page(q: AssetPageQuery): Promise<{ total?: number; rows: Record<string, any>[] }> {
    let where = 'project_id = ?'
    const args: unknown[] = [q.projectId]
    if (!q.recursive) {
      where += ' and folder = ?'
      args.push(q.folder)
    } else if (q.folder) {
      // the folder itself and everything below it; substr counts characters on both databases
      where += ' and (folder = ? or substr(folder, 1, ?) = ?)'
      args.push(q.folder, [...q.folder].length + 1, `${q.folder}/`)
    }
    if (q.type !== undefined) {
      where += ' and type = ?'
      args.push(q.type)
    }
    if (q.online !== undefined) {
      where += ' and online = ?'
      args.push(q.online)
    }
    // (folder, name) is unique in a project (it is the path) and walks the index: no tie-breaker needed
    // (an `id` after it made PostgreSQL sort every row before a deep OFFSET)
    let page = `select ${ASSET_COLUMNS.join(', ')} from assets where ${where}`
    const pageArgs = [...args]
    const count = async () => Number((await this.read(`select count(*) as total from assets where ${where}`)(args))[0].total)
    const [limit, limitArgs] = limitSql(q.perPage)
    if (q.after !== undefined) {
      // keyset paging seeks in the (project, folder, name) index: page 500 costs what page 1 does, unlike OFFSET
      page += ` and (folder, name) > (?, ?) order by folder, name ${limit}`
      pageArgs.push(folderOf(q.after), path.posix.basename(q.after), ...limitArgs)
      const [rows, total] = await Promise.all([this.read(page)(pageArgs), q.count ? count() : undefined])
      return { total, rows }
    }
    const offset = ((q.page ?? 1) - 1) * q.perPage
    page += ` order by folder, name ${limit} offset ?`
    pageArgs.push(...limitArgs, offset)
    const rows = await this.read(page)(pageArgs)
    return { total: q.count ? await pageTotal(offset, q.perPage, rows.length, count) : undefined, rows }
  }

  private read(sql: string): PreparedRead {
    let read = this.statements.get(sql)
    if (!read) this.statements.set(sql, (read = preparedRead(this.knex, sql)))
    return read
  }
}

const listings = new WeakMap<object, AssetListing>()

/** the listing of this database (its prepared statements live as long as its knex) */
export function assetListing(knex: Knex): AssetListing {
  let listing = listings.get(knex)
  if (!listing) listings.set(knex, (listing = new AssetListing(knex)))
  return listing
}
