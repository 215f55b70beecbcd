/**
 * Route sweep: every parameter-free or id-parameter GET route of the route table, loaded on seeded
 * data as an administrator and as a user with rights on a tenth of the projects, on SQLite and
 * PostgreSQL, beside a raw endpoint (better-sqlite3 / pg, in the same server process) that runs the
 * same essential query and serialises the same JSON. New routes join the sweep by themselves.
 *
 *   npx tsc -p . && node dist/bench/routes.js                 # quick: 100 projects, 10,000 assets, 1 s per route
 *   node dist/bench/routes.js --full                           # the issue's data: 1,000 projects, 100,000 assets
 *   node dist/bench/routes.js --assets 1000000 --big 500000    # listing at a million assets
 *
 * | option | default | |
 * |---|---|---|
 * | `--projects N` | 100 (`--full`: 1,000) | projects from a 50-folder template |
 * | `--assets N` | 10,000 (`--full`: 100,000) | assets with metadata and proxies recorded |
 * | `--big N` | a tenth of `--assets` | assets of the listing project (#1), in 50 folders |
 * | `--duration S` / `--warmup S` | 1 / 0.5 | measured seconds and warm-up per route and principal |
 * | `--connections N` | 20 | autocannon connections |
 * | `--db sqlite,postgresql` | both (PostgreSQL when MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL is set) | |
 * | `--as admin,user` | both | |
 * | `--only a,b` | all | routes whose label contains a or b (`=GET /assets/:id`: exactly that one) |
 * | `--no-writes` | | skip the write requests at the end |
 * | `--no-raw` | | skip the raw endpoints (profiles of mamkit alone) |
 * | `--profile DIR` | | `--cpu-prof` of the servers into DIR |
 * | `--json FILE` | | every row as JSON |
 * | `--keep DIR` | | seed into DIR/<db> once and keep it (PostgreSQL: its database too); later runs with the same DIR reuse the seed (a million assets take minutes to write) |
 *
 * CPU per request is the server process's `process.cpuUsage()` over the measured seconds divided by
 * the requests answered: on a shared machine the steadier figure. "vs raw" is the raw endpoint's
 * CPU per request divided by the route's (1.00× = as cheap as the hand-written query).
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { isDeepStrictEqual, parseArgs } from 'node:util'
import autocannon, { type Result } from 'autocannon'
import pg from 'pg'
import { seed, type Seeded } from './seed.js'
import { scratchDatabase } from '../core/testing/index.js'
import { REPORT_COLUMNS } from '../plugins/projects/report.js'

const HERE = fileURLToPath(import.meta.url)
const API = '/api/v1'

interface ServerSpec {
  dialect: 'sqlite' | 'postgresql'
  dataDir: string
  databaseUrl?: string
}

// ---------------------------------------------------------------------------------------------
// the server process: mamkit under /api/v1, the raw endpoints under /raw/api/v1
// ---------------------------------------------------------------------------------------------

type Row = Record<string, any>
interface RawDb {
  all(sql: string, params: unknown[]): Promise<Row[]>
  close(): Promise<void>
}

async function rawDb(spec: ServerSpec): Promise<RawDb> {
  if (spec.dialect === 'sqlite') {
    // better-sqlite3 ships no types: the two calls used here are typed by hand
    const { default: Database } = (await import('better-sqlite3' as string)) as { default: new (file: string, options: object) => any }
    const { sqliteFile } = await import('../core/db/orm.js')
    const db = new Database(sqliteFile(spec.dataDir, spec.databaseUrl), { readonly: true })
    db.pragma('busy_timeout = 15000')
    const statements = new Map<string, any>()
    return {
      all(sql, params) {
        let st = statements.get(sql)
        if (!st) statements.set(sql, (st = db.prepare(sql)))
        return Promise.resolve(st.all(...params))
      },
      close: async () => db.close(),
    }
  }
  const pool = new pg.Pool({ connectionString: spec.databaseUrl, max: 10 })
  const converted = new Map<string, string>()
  return {
    async all(sql, params) {
      let text = converted.get(sql)
      if (!text) {
        let n = 0
        converted.set(sql, (text = sql.replace(/\?/g, () => `$${++n}`)))
      }
      return (await pool.query(text, params)).rows
    },
    close: () => pool.end(),
  }
}

/** the raw endpoints: route pattern → handler answering the same JSON as mamkit's route */
async function rawRoutes(db: RawDb, storageRoot: string, templatesRoot: string) {
  const { column, pageTotal } = await import('../core/db/rows.js')
  const { ASSET_COLUMNS, assetJsonOfRow, serializeAsset, viewOfRow } = await import('../plugins/assets/asset-json.js')
  const { serializeJob } = await import('../core/system/status-routes.js')
  const { normalise } = await import('../core/jobs/queue.js')
  const iso = (v: unknown) => column.date(v)?.toISOString() ?? null
  const READABLE = `exists (select 1 from access_rights ar join team_memberships tm on tm.team_id = ar.team_id where tm.user_id = ? and ar.object_type = 'project' and ar.object_id = p.id)`
  const READABLE_IDS = `p.id in (select ar.object_id from access_rights ar join team_memberships tm on tm.team_id = ar.team_id where tm.user_id = ? and ar.object_type = 'project' and ar.read = true)`
  const PROJECT_COLUMNS = 'p.id, p.uuid, p.name, p.alternative_name, p.description, p.storage, p.folder, p.template_id, p.is_library_project, p.encoding_priority, p.custom_metadata, p.quota, p.size, p.size_calculated_at, p.parent_id, p.frozen_by_id, p.frozen_at, p.created_by_id, p.created_by_edit, p.last_opened_by_id, p.last_opened_by_edit, p.last_used_at, p.deleted, p.created_at, p.updated_at'
  type Holders = Map<number, { mounted?: number; locked?: number; archive?: Row }>
  const projectJson = (p: Row, admin: boolean, holders: Holders) => {
    const archive = holders.get(Number(p.id))?.archive
    return {
      id: Number(p.id),
      uuid: p.uuid,
      name: p.name,
      alternative_name: p.alternative_name,
      description: p.description,
      storage: p.storage,
      folder: p.folder,
      path: admin ? path.join(storageRoot, p.folder) : p.folder,
      template_id: column.intOrNull(p.template_id),
      is_library_project: column.bool(p.is_library_project),
      encoding_priority: Number(p.encoding_priority),
      custom_metadata: column.json(p.custom_metadata, {}),
      quota: column.intOrNull(p.quota),
      size: Number(p.size),
      size_calculated_at: iso(p.size_calculated_at),
      parent_id: column.intOrNull(p.parent_id),
      frozen: p.frozen_at !== null,
      frozen_by_id: column.intOrNull(p.frozen_by_id),
      frozen_at: iso(p.frozen_at),
      mounted_by: holders.get(Number(p.id))?.mounted ?? null,
      locked_by: holders.get(Number(p.id))?.locked ?? null,
      archive_strategy_id: column.intOrNull(archive?.archive_strategy_id),
      archive_strategy_state: archive?.state ?? null,
      created_by: column.intOrNull(p.created_by_id),
      created_by_edit: p.created_by_edit,
      last_opened_by: column.intOrNull(p.last_opened_by_id),
      last_opened_by_edit: p.last_opened_by_edit,
      last_used_at: iso(p.last_used_at),
      deleted: column.bool(p.deleted),
      created_at: iso(p.created_at),
      updated_at: iso(p.updated_at),
      // the strategies plugin's field (its project decorator)
      archived: archive ? archive.state === 'archived' || Number(archive.bytes_released) > 0 : false,
    }
  }
  /** what the edits and strategies plugins add to a project: who holds it, where its archive is */
  const holdersOf = async (ids: number[]) => {
    const holders: Holders = new Map()
    if (!ids.length) return holders
    const list = ids.map(() => '?').join(',')
    const rows = await db.all(`select project_id, mounted_by_id, opened_by_id from edit_sessions where project_id in (${list}) and state <> 'releasing' order by id`, ids)
    for (const r of rows) {
      const h = holders.get(Number(r.project_id)) ?? {}
      if (r.mounted_by_id !== null) h.mounted ??= Number(r.mounted_by_id)
      if (r.opened_by_id !== null) h.locked ??= Number(r.opened_by_id)
      holders.set(Number(r.project_id), h)
    }
    for (const r of await db.all(`select project_id, archive_strategy_id, state, bytes_released from archive_states where project_id in (${list})`, ids)) {
      const h = holders.get(Number(r.project_id)) ?? {}
      h.archive = r
      holders.set(Number(r.project_id), h)
    }
    return holders
  }
  type Who = { id: number; admin: boolean }
  type Handler = (params: string[], query: URLSearchParams, who: Who, headers: Record<string, string>) => Promise<unknown>
  const notFound = () => {
    throw Object.assign(new Error('not found'), { status: 404 })
  }
  const routes: Record<string, Handler> = {
    '/session/user_id': async (_p, _q, who) => ({ hash: { user_id: who.id } }),
    '/session': async (_p, _q, who) => {
      const [u] = await db.all('select u.id, u.username, u.firstname, u.lastname, u.email, u.role_id, r.name as role, u.created_at, u.updated_at from users u join roles r on r.id = u.role_id where u.id = ?', [who.id])
      const teams = await db.all('select t.id, t.name, t.owner_id from team_memberships m join teams t on t.id = m.team_id where m.user_id = ? order by t.name', [who.id])
      const own = teams.find((t) => Number(t.owner_id) === who.id)
      return {
        user: {
          id: Number(u.id),
          username: u.username,
          firstname: u.firstname,
          lastname: u.lastname,
          email: u.email,
          role_id: Number(u.role_id),
          role: u.role,
          created_at: iso(u.created_at),
          updated_at: iso(u.updated_at),
          own_team_id: own ? Number(own.id) : null,
          teams: teams.map((t) => ({ id: Number(t.id), name: t.name })),
        },
      }
    },
    '/templates': async (_p, _q, who) => {
      const rows = await db.all('select id, name, template_type, position, substitution_patterns, folder, created_at, updated_at from templates order by position, id', [])
      return {
        templates: rows.map((r) => ({
          id: Number(r.id),
          name: r.name,
          template_type: r.template_type,
          position: Number(r.position),
          substitution_patterns: column.json<any[]>(r.substitution_patterns, []).map(({ token, pattern }) => ({ token, pattern })),
          directory: who.admin ? path.join(templatesRoot, r.folder) : r.folder,
          created_at: iso(r.created_at),
          updated_at: iso(r.updated_at),
        })),
      }
    },
    '/projects': async (_p, q, who, headers) => {
      const perPage = Number(q.get('per_page') ?? 100)
      const page = Number(q.get('page') ?? 1)
      const where = who.admin ? 'p.deleted = false' : `p.deleted = false and ${READABLE_IDS}`
      const args = who.admin ? [] : [who.id]
      const rows = await db.all(`select ${PROJECT_COLUMNS} from projects p where ${where} order by p.name, p.id limit ? offset ?`, [...args, perPage, (page - 1) * perPage])
      // as mamkit (pageTotal): a page that is not full tells the count
      const total = await pageTotal((page - 1) * perPage, perPage, rows.length, async () => Number((await db.all(`select count(*) as total from projects p where ${where}`, args))[0].total))
      headers['X-Total-Count'] = String(total)
      const holders = await holdersOf(rows.map((r) => Number(r.id)))
      return { projects: rows.map((r) => projectJson(r, who.admin, holders)) }
    },
    '/projects/:id': async ([id], _q, who) => {
      const rows = await db.all(`select ${PROJECT_COLUMNS} from projects p where p.id = ? and p.deleted = false${who.admin ? '' : ` and ${READABLE}`}`, who.admin ? [Number(id)] : [Number(id), who.id])
      if (!rows.length) notFound()
      return { project: projectJson(rows[0], who.admin, await holdersOf([Number(id)])) }
    },
    '/projects/:id/assets': async ([id], q, who, headers) => {
      const projectId = Number(id)
      const [project] = await db.all(`select p.id, p.name from projects p where p.id = ? and p.deleted = false${who.admin ? '' : ` and ${READABLE}`}`, who.admin ? [projectId] : [projectId, who.id])
      if (!project) notFound()
      const folder = q.get('folder') ?? ''
      const recursive = q.get('recursive') === 'true'
      let where = 'project_id = ?'
      const args: unknown[] = [projectId]
      if (!recursive) {
        where += ' and folder = ?'
        args.push(folder)
      } else if (folder) {
        where += ' and (folder = ? or substr(folder, 1, ?) = ?)'
        args.push(folder, [...folder].length + 1, `${folder}/`)
      }
      const after = q.get('after')
      let page = `select ${ASSET_COLUMNS.join(', ')} from assets where ${where}`
      const pageArgs = [...args]
      if (after) {
        const i = after.lastIndexOf('/')
        page += ' and (folder, name) > (?, ?)'
        pageArgs.push(i < 0 ? '' : after.slice(0, i), after.slice(i + 1))
      }
      page += ' order by folder, name limit 100'
      const found = await db.all(page, pageArgs)
      // as mamkit: a keyset page is not counted, a first page that is not full tells its count
      const count = async () => Number((await db.all(`select count(*) as total from assets where ${where}`, args))[0].total)
      if (!after) headers['X-Total-Count'] = String(await pageTotal(0, 100, found.length, count))
      const owner = { id: Number(project.id), name: project.name }
      // the same one-step serialiser as the route: what is compared is the request path, not two serialisers
      return { assets: found.map((r) => assetJsonOfRow(r, owner)) }
    },
    '/assets/:id': async ([id], _q, who) => {
      const rows = await db.all(
        `select ${ASSET_COLUMNS.map((c) => `a.${c}`).join(', ')}, p.id as p_id, p.name as p_name from assets a join projects p on p.id = a.project_id where a.id = ? and p.deleted = false${who.admin ? '' : ` and ${READABLE}`}`,
        who.admin ? [Number(id)] : [Number(id), who.id],
      )
      if (!rows.length) notFound()
      return { asset: serializeAsset(viewOfRow(rows[0], { id: Number(rows[0].p_id), name: rows[0].p_name })) }
    },
    '/status/:id': async ([id], _q, who) => {
      const rows = await db.all(`select * from jobs where id = ?${who.admin ? '' : ' and user_id = ?'}`, who.admin ? [Number(id)] : [Number(id), who.id])
      if (!rows.length) notFound()
      return { job: serializeJob(normalise(rows[0])) }
    },
    '/roles': async () => {
      const rows = await db.all('select r.id, r.name, r.role_matrix, r.builtin, r.created_at, r.updated_at, (select count(*) from users u where u.role_id = r.id) as users_count from roles r order by r.id', [])
      return {
        array: rows.map((r) => {
          const matrix = column.json<Record<string, boolean>>(r.role_matrix, {})
          return { id: Number(r.id), name: r.name, role_matrix: matrix, builtin: column.bool(r.builtin), administrative: matrix.admin === true, users_count: Number(r.users_count), created_at: iso(r.created_at), updated_at: iso(r.updated_at) }
        }),
      }
    },
    '/teams/:id/access_rights': async ([id], _q, who) => {
      const teamId = Number(id)
      const [team] = await db.all('select t.id, (select count(*) from team_memberships m where m.team_id = t.id and m.user_id = ?) as member from teams t where t.id = ?', [who.id, teamId])
      if (!team) notFound()
      if (!Number(team.member) && !who.admin) throw Object.assign(new Error('forbidden'), { status: 403 })
      const rows = await db.all('select id, team_id, object_type, object_id, read, write, created_at, updated_at from access_rights where team_id = ? order by object_type, object_id', [teamId])
      return {
        access_rights: rows.map((r) => ({ id: Number(r.id), team_id: Number(r.team_id), object_type: r.object_type, object_id: Number(r.object_id), read: column.bool(r.read), write: column.bool(r.write), created_at: iso(r.created_at), updated_at: iso(r.updated_at) })),
      }
    },
    '/users/:user_id/settings': async ([id], _q, who) => {
      const userId = Number(id)
      if (userId !== who.id && !who.admin) throw Object.assign(new Error('forbidden'), { status: 403 })
      const [row] = await db.all('select u.id, s.settings, s.background_file from users u left join user_settings s on s.user_id = u.id where u.id = ?', [userId])
      if (!row) notFound()
      return { settings: { user_id: userId, ...column.json<Record<string, unknown>>(row.settings, {}), background_url: row.background_file ? `/api/v1/users/${userId}/background` : null } }
    },
    '/projects_report': async (_p, _q, who) => {
      // the same sheet from one query of all readable projects (the route pages by 1,000 in keyset order)
      const rows = await db.all(
        `select p.id, p.name, p.alternative_name, p.storage, p.folder, p.is_library_project, p.frozen_at, p.size, p.quota, p.encoding_priority, p.created_at, p.updated_at, t.name as template, cu.username as created_by, fu.username as frozen_by
         from projects p left join templates t on t.id = p.template_id left join users cu on cu.id = p.created_by_id left join users fu on fu.id = p.frozen_by_id
         where p.deleted = false${who.admin ? '' : ` and ${READABLE_IDS}`} order by p.name, p.id`,
        who.admin ? [] : [who.id],
      )
      const { default: Excel } = await import('exceljs')
      const { PassThrough } = await import('node:stream')
      const out = new PassThrough()
      const chunks: Buffer[] = []
      out.on('data', (c: Buffer) => chunks.push(c))
      const ended = new Promise((resolve, reject) => out.on('end', resolve).on('error', reject))
      const workbook = new Excel.stream.xlsx.WorkbookWriter({ stream: out, useStyles: true, useSharedStrings: false })
      const sheet = workbook.addWorksheet('Projects', { views: [{ state: 'frozen', ySplit: 1 }] })
      sheet.columns = REPORT_COLUMNS
      sheet.getRow(1).font = { bold: true }
      sheet.getRow(1).commit()
      const num = (v: unknown) => (v === null || v === undefined ? null : Number(v))
      const date = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string | number))
      for (const r of rows) {
        sheet
          .addRow({
            id: Number(r.id), name: r.name, alternative_name: r.alternative_name, storage: r.storage, path: who.admin ? path.join(storageRoot, r.folder) : r.folder, template: r.template,
            library: column.bool(r.is_library_project), frozen: r.frozen_at !== null, frozen_by: r.frozen_by, size: num(r.size), quota: num(r.quota), encoding_priority: Number(r.encoding_priority),
            created_by: r.created_by, created_at: date(r.created_at), updated_at: date(r.updated_at),
          })
          .commit()
      }
      sheet.autoFilter = { from: { row: 1, column: 1 }, to: { row: 1, column: REPORT_COLUMNS.length } }
      sheet.commit()
      await workbook.commit()
      await ended
      return new RawBody(Buffer.concat(chunks), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet')
    },
    '/asset_status/:id': async ([id], _q, who) => {
      const rows = await db.all(`select * from jobs where id = ? and kind = 'asset'${who.admin ? '' : ' and user_id = ?'}`, who.admin ? [Number(id)] : [Number(id), who.id])
      if (!rows.length) notFound()
      return { job: serializeJob(normalise(rows[0])) }
    },
  }
  const compiled = Object.entries(routes).map(([pattern, handler]) => ({
    pattern,
    regex: new RegExp(`^${pattern.replace(/:[a-z_]+/g, '([^/]+)')}$`),
    handler,
  }))
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url!, 'http://x')
    const pathname = url.pathname.slice(`/raw${API}`.length)
    const who = { id: Number(req.headers['x-bench-user']), admin: req.headers['x-bench-admin'] === '1' }
    for (const { regex, handler } of compiled) {
      const m = regex.exec(pathname)
      if (!m) continue
      const headers: Record<string, string> = {}
      handler(m.slice(1), url.searchParams, who, headers).then(
        (value) => {
          if (value instanceof RawBody) {
            res.writeHead(200, { ...headers, 'content-type': value.type, 'content-length': value.body.length })
            return res.end(value.body)
          }
          const body = JSON.stringify(value)
          res.writeHead(200, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
          res.end(body)
        },
        (err) => res.writeHead(err.status ?? 500).end(String(err.stack ?? err)),
      )
      return
    }
    res.writeHead(404).end('no raw endpoint')
  }
}

export const RAW_PATTERNS = ['/session/user_id', '/session', '/templates', '/projects', '/projects/:id', '/projects/:id/assets', '/assets/:id', '/status/:id', '/asset_status/:id', '/roles', '/teams/:id/access_rights', '/users/:user_id/settings', '/projects_report']

/** a raw endpoint's answer that is not JSON (the .xlsx report) */
class RawBody {
  constructor(
    readonly body: Buffer,
    readonly type: string,
  ) {}
}

/** an answer as comparable data: JSON parsed, an .xlsx as its first sheet's cell values */
async function comparable(body: Buffer, contentType: string | null): Promise<unknown> {
  if (!contentType?.includes('spreadsheetml')) return JSON.parse(body.toString('utf8'))
  const { default: Excel } = await import('exceljs')
  const workbook = new Excel.Workbook()
  await workbook.xlsx.load(body as any)
  const rows: unknown[] = []
  workbook.worksheets[0].eachRow((row) => rows.push(row.values))
  return rows
}

async function childMain(spec: ServerSpec) {
  const { createMamServer } = await import('../host/index.js')
  const mam = createMamServer({ config: { dataDir: spec.dataDir, databaseUrl: spec.databaseUrl, logLevel: 'silent' }, runJobs: false })
  const runtime = await mam.start()
  const db = await rawDb(spec)
  const raw = await rawRoutes(db, runtime.container.resolve<any>('storages').get('default').root, path.join(spec.dataDir, 'templates'))
  const server = http.createServer((req, res) => (req.url!.startsWith('/raw/') ? raw(req, res) : mam.handler(req, res)))
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const routes = runtime.loaded.routes.map((r) => ({ method: r.method, path: r.path, plugin: r.plugin, access: r.access }))
  process.send!({ port: (server.address() as AddressInfo).port, routes, memory: process.memoryUsage() })
  process.on('message', (m) => {
    if (m === 'cpu') {
      const { user, system } = process.cpuUsage()
      process.send!({ cpu: user + system, memory: process.memoryUsage() })
    }
  })
  const stop = () => {
    server.closeAllConnections()
    server.close(() => void Promise.all([mam.close(), db.close()]).finally(() => setTimeout(() => process.exit(0), 100)))
  }
  process.once('SIGTERM', stop)
  process.once('disconnect', stop)
}

// ---------------------------------------------------------------------------------------------
// the run (parent process)
// ---------------------------------------------------------------------------------------------

interface RouteInfo {
  method: string
  path: string
  plugin: string
  access: string
}
interface Server {
  child: ChildProcess
  port: number
  routes: RouteInfo[]
  memory: NodeJS.MemoryUsage
}

function startServer(spec: ServerSpec, profileDir?: string): Promise<Server> {
  const execArgv = ['--enable-source-maps']
  if (profileDir) execArgv.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=routes-${spec.dialect}.cpuprofile`)
  const child = fork(HERE, ['--serve', JSON.stringify(spec)], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    child.once('message', (m: any) => resolve({ child, port: m.port, routes: m.routes, memory: m.memory }))
    child.once('exit', (code) => reject(new Error(`${spec.dialect}: server exited (${code}) before listening`)))
  })
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

function usageOf(child: ChildProcess): Promise<{ cpu: number; memory: NodeJS.MemoryUsage }> {
  return new Promise((resolve) => {
    const onMessage = (m: any) => {
      if (typeof m?.cpu !== 'number') return
      child.off('message', onMessage)
      resolve(m)
    }
    child.on('message', onMessage)
    child.send('cpu')
  })
}


/** the route's path with ids from the seed; undefined when a parameter is not an id the seed has */
function concrete(pattern: string, s: Seeded): string | undefined {
  const ids = s.ids
  const byPrefix: Array<[RegExp, string, number | string]> = [
    [/^\/projects\/:id/, ':id', ids.project],
    [/^\/assets\/:(asset_)?id/, ':id', ids.asset],
    [/^\/assets\/:asset_id/, ':asset_id', ids.asset],
    [/^\/assets\/annotations_to_pdf\/:id/, ':id', ids.asset],
    [/^\/templates\/:id/, ':id', ids.template],
    [/^\/teams\/:id/, ':id', ids.team],
    [/^\/users\/:id/, ':id', s.userId],
    [/^\/users\/:user_id/, ':user_id', s.userId],
    [/^\/roles\/:id/, ':id', ids.role],
    [/^\/(status|asset_status)\/:id/, ':id', ids.job],
    [/^\/status_flags\/:id/, ':id', ids.statusFlag],
    [/^\/edits\/:id/, ':id', ids.edit],
    [/^\/features\/:id/, ':id', 'assets'],
  ]
  let out = pattern
  for (const [re, param, value] of byPrefix) if (re.test(out)) out = out.replace(param, String(value))
  if (out.includes(':')) {
    // other ids: the first of their kind (answers 404 when the seed made none: reported, not loaded)
    out = out.replace(/:(id|[a-z_]+_id)\b/g, '1')
    if (out.includes(':')) return undefined
  }
  return out
}

interface Case {
  label: string
  pattern: string
  url: string
  raw?: string
  method?: string
  body?: () => string | Buffer
  contentType?: string
  write?: boolean
}

interface RowOut {
  db: string
  as: string
  label: string
  status: number | string
  rps?: number
  p50?: number
  p99?: number
  cpu?: number
  rawCpu?: number
  rawRps?: number
  ratio?: number
  same?: boolean | string
  load: number
}

const fmt = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? '–' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }))

/**
 * Waits until the server is idle: autocannon stops sending when its time is up, but a slow route
 * (100 ms a request, 20 in flight) leaves seconds of answered-to-nobody work that would otherwise
 * be counted against the next route. Idle: under 10 % of a core over 250 ms (at most 60 s).
 */
async function settle(server: Server) {
  for (let i = 0; i < 240; i++) {
    const a = await usageOf(server.child)
    await new Promise((resolve) => setTimeout(resolve, 250))
    const b = await usageOf(server.child)
    if (b.cpu - a.cpu < 25_000) return
  }
}

async function load(server: Server, url: string, headers: Record<string, string>, options: { connections: number; duration: number; warmup: number }, c?: Case) {
  await settle(server)
  const opts: any = { url: `http://127.0.0.1:${server.port}${url}`, headers, connections: options.connections }
  if (c?.method) {
    opts.method = c.method
    opts.requests = [
      {
        method: c.method,
        headers: { ...headers, ...(c.contentType ? { 'content-type': c.contentType } : {}) },
        setupRequest: (req: any) => ({ ...req, body: c.body?.() }),
      },
    ]
  }
  if (options.warmup > 0) await autocannon({ ...opts, duration: options.warmup })
  await settle(server)
  const before = await usageOf(server.child)
  const result: Result = await autocannon({ ...opts, duration: options.duration })
  const after = await usageOf(server.child)
  const ok = result.requests.total - result.non2xx - result.errors
  return { result, cpu: (after.cpu - before.cpu) / Math.max(1, result.requests.total), ok }
}

/** the first difference of two JSON values, as a path */
function firstDifference(a: any, b: any, at = ''): string | undefined {
  if (isDeepStrictEqual(a, b)) return undefined
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], `${at}.${k}`)
      if (d) return d
    }
  }
  return `${at || '.'}: ${JSON.stringify(a)?.slice(0, 60)} vs ${JSON.stringify(b)?.slice(0, 60)}`
}

function cases(routes: RouteInfo[], s: Seeded, only: string[] | undefined): Case[] {
  const out: Case[] = []
  for (const r of routes) {
    if (r.method !== 'GET') continue
    const url = concrete(r.path, s)
    if (url === undefined) continue
    const raw = RAW_PATTERNS.includes(r.path) ? `/raw${API}${url}` : undefined
    out.push({ label: `GET ${r.path}`, pattern: r.path, url: `${API}${url}`, raw })
  }
  // the listing as clients page it: a folder, the whole project, a deep page by keyset
  const p = s.ids.project
  const listing = (label: string, query: string) => ({ label, pattern: '/projects/:id/assets', url: `${API}/projects/${p}/assets?${query}`, raw: `/raw${API}/projects/${p}/assets?${query}` })
  out.push(listing('  … folder page (?folder=Folder 07)', 'folder=Folder%2007'))
  out.push(listing('  … whole project (?recursive=true)', 'recursive=true'))
  out.push(listing('  … keyset deep page (&after=)', `recursive=true&after=${encodeURIComponent(s.ids.deepAfter)}`))
  return only ? out.filter((c) => only.some((o) => matches(c.label, o))) : out
}

/** `--only` items match a part of the label, or (with a leading `=`) the whole of it */
const matches = (label: string, o: string) => (o.startsWith('=') ? label === o.slice(1) : label.includes(o))

let uploadCounter = 0
function writeCases(s: Seeded, only: string[] | undefined): Array<Case & { who: 'admin' | 'user' }> {
  const boundary = 'benchboundary'
  const file = Buffer.alloc(1024, 7)
  const multipart = () =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="path"\r\n\r\nFolder 01\r\n--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="upload-${process.pid}-${uploadCounter++}.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`),
      file,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ])
  let n = 0
  const out: Array<Case & { who: 'admin' | 'user' }> = [
    { who: 'admin', write: true, label: 'POST /projects (from the 50-folder template)', pattern: '/projects', url: `${API}/projects`, method: 'POST', contentType: 'application/json', body: () => JSON.stringify({ name: `Written ${process.pid}-${n++}`, template_id: s.ids.template }) },
    { who: 'user', write: true, label: 'POST /projects/:id/inject_uploads (1 KiB)', pattern: '/projects/:id/inject_uploads', url: `${API}/projects/${s.ids.userProject}/inject_uploads`, method: 'POST', contentType: `multipart/form-data; boundary=${boundary}`, body: multipart },
    { who: 'user', write: true, label: 'PUT /projects/:id/status_flags/:flag (toggle)', pattern: '/projects/:id/status_flags/:status_flag_id', url: `${API}/projects/${s.ids.userProject}/status_flags/${s.ids.statusFlag}`, method: 'PUT', contentType: 'application/json', body: () => '{}' },
    { who: 'admin', write: true, label: 'PUT /projects/:id/teams (a right on, off)', pattern: '/projects/:id/teams', url: `${API}/projects/${s.ids.userProject + 1}/teams`, method: 'PUT', contentType: 'application/json', body: () => JSON.stringify({ team_id: s.ids.team, read: true, write: n++ % 2 === 0 }) },
  ]
  return only ? out.filter((c) => only.some((o) => matches(c.label, o))) : out
}

function printTable(rows: RowOut[]) {
  const head = ['db', 'as', 'route', 'status', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'raw µs/req', 'vs raw', 'JSON', 'load']
  const cells = rows.map((r) => [
    r.db,
    r.as,
    r.label,
    String(r.status),
    fmt(r.rps),
    fmt(r.p50, 1),
    fmt(r.p99, 1),
    fmt(r.cpu),
    fmt(r.rawCpu),
    r.ratio === undefined ? '–' : `${fmt(r.ratio, 2)}×`,
    r.same === undefined ? '' : r.same === true ? 'same' : 'DIFF',
    r.load.toFixed(1),
  ])
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c: string[]) => `| ${c.map((x, i) => (i <= 2 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join(' | ')} |`
  console.log(line(head))
  console.log(`|${widths.map((w, i) => (i <= 2 ? `${'-'.repeat(w + 2)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`)
  for (const c of cells) console.log(line(c))
}

async function main() {
  const { values } = parseArgs({
    options: {
      full: { type: 'boolean' },
      projects: { type: 'string' },
      assets: { type: 'string' },
      big: { type: 'string' },
      duration: { type: 'string', default: '1' },
      warmup: { type: 'string', default: '0.5' },
      connections: { type: 'string', default: '20' },
      db: { type: 'string' },
      as: { type: 'string', default: 'admin,user' },
      only: { type: 'string' },
      'no-writes': { type: 'boolean' },
      'no-raw': { type: 'boolean' },
      profile: { type: 'string' },
      json: { type: 'string' },
      keep: { type: 'string' },
    },
  })
  const projects = Number(values.projects ?? (values.full ? 1000 : 100))
  const assets = Number(values.assets ?? (values.full ? 100_000 : 10_000))
  const big = Number(values.big ?? Math.max(Math.floor(assets / 10), 100))
  const options = { duration: Number(values.duration), warmup: Number(values.warmup), connections: Number(values.connections) }
  const pgAdmin = process.env.MAMKIT_BENCH_DATABASE_URL || process.env.MAMKIT_TEST_DATABASE_URL || undefined
  const dbs = (values.db ?? (pgAdmin ? 'sqlite,postgresql' : 'sqlite')).split(',').filter(Boolean) as Array<'sqlite' | 'postgresql'>
  const principals = values.as!.split(',').filter(Boolean) as Array<'admin' | 'user'>
  const only = values.only?.split(',').filter(Boolean)
  const profileDir = values.profile ? path.resolve(values.profile) : undefined
  const cpus = os.cpus()
  console.log(`mamkit route sweep, ${new Date().toISOString()}`)
  console.log(`node ${process.version}, ${cpus.length} × ${cpus[0]?.model ?? 'cpu'}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
  console.log(`${projects} projects, ${assets} assets (${big} in the listing project), ${options.connections} connections, ${options.duration} s after ${options.warmup} s warm-up per route and principal`)

  const rows: RowOut[] = []
  const cleanup: Array<() => Promise<unknown>> = []
  try {
    for (const dialect of dbs) {
      const kept = values.keep ? path.resolve(values.keep, dialect) : undefined
      const keptFile = kept && path.join(kept, 'seeded.json')
      const reused = keptFile ? ((await readFile(keptFile, 'utf8').then(JSON.parse, () => undefined)) as (Seeded & { databaseUrl?: string }) | undefined) : undefined
      let dataDir: string
      if (kept) await mkdir((dataDir = kept), { recursive: true })
      else {
        dataDir = await mkdtemp(path.join(os.tmpdir(), 'mamkit-routes-'))
        cleanup.push(() => rm(dataDir, { recursive: true, force: true }))
      }
      let databaseUrl: string | undefined = reused?.databaseUrl
      if (dialect === 'postgresql' && !reused) {
        if (!pgAdmin) throw new Error('--db postgresql needs MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL')
        const scratch = await scratchDatabase('postgresql', pgAdmin)
        if (!kept) cleanup.push(scratch.drop)
        databaseUrl = scratch.databaseUrl
      }
      let seeded: Seeded
      if (reused) {
        seeded = reused
        console.log(`\n${dialect}: reusing the seed in ${dataDir}: ${Object.entries(seeded.counts).map(([k, v]) => `${k} ${v}`).join(', ')}`)
      } else {
        console.log(`\n${dialect}: seeding …`)
        seeded = await seed({ dataDir, databaseUrl, projects, assets, bigProject: big, users: 200, teams: 20, folders: 50, log: console.log })
        console.log(`  seeded in ${seeded.seconds.toFixed(1)} s: ${Object.entries(seeded.counts).map(([k, v]) => `${k} ${v}`).join(', ')}`)
        if (keptFile) await writeFile(keptFile, JSON.stringify({ ...seeded, databaseUrl }))
      }
      const server = await startServer({ dialect, dataDir, databaseUrl }, profileDir)
      const stop = () => stopChild(server.child)
      cleanup.push(stop)
      const mb = (n: number) => `${(n / 2 ** 20).toFixed(0)} MB`
      console.log(`  server after start: rss ${mb(server.memory.rss)}, heap used ${mb(server.memory.heapUsed)}`)
      // what the server burns with nothing to do (timers, pollers): part of every CPU figure below
      const idle0 = await usageOf(server.child)
      await new Promise((resolve) => setTimeout(resolve, 2000))
      const idle1 = await usageOf(server.child)
      console.log(`  server idle: ${fmt((idle1.cpu - idle0.cpu) / 2000)} µs CPU per ms`)
      const keys = { admin: seeded.adminKey, user: seeded.userKey }
      const ids = { admin: seeded.adminId, user: seeded.userId }
      for (const c of cases(server.routes, seeded, only)) {
        for (const who of principals) {
          const headers = { authorization: `Bearer ${keys[who]}` }
          const probe = await fetch(`http://127.0.0.1:${server.port}${c.url}`, { headers })
          const bytes = Buffer.from(await probe.arrayBuffer())
          const row: RowOut = { db: dialect, as: who, label: c.label, status: probe.status, load: os.loadavg()[0] }
          rows.push(row)
          if (probe.status !== 200) {
            console.log(`  ${c.label} as ${who}: ${probe.status}, not loaded`)
            continue
          }
          const m = await load(server, c.url, headers, options)
          Object.assign(row, { rps: m.result.requests.average, p50: m.result.latency.p50, p99: m.result.latency.p99, cpu: m.cpu })
          if (m.ok < m.result.requests.total) row.status = `200 (${m.result.requests.total - m.ok} failed)`
          if (c.raw && !values['no-raw']) {
            const rawHeaders = { 'x-bench-user': String(ids[who]), 'x-bench-admin': who === 'admin' ? '1' : '0' }
            const rawProbe = await fetch(`http://127.0.0.1:${server.port}${c.raw}`, { headers: rawHeaders })
            const rawBytes = Buffer.from(await rawProbe.arrayBuffer())
            if (rawProbe.status !== 200) row.same = `raw ${rawProbe.status}: ${rawBytes.toString('utf8').slice(0, 200)}`
            else {
              const [count, rawCount] = [probe.headers.get('x-total-count'), rawProbe.headers.get('x-total-count')]
              const diff =
                firstDifference(await comparable(bytes, probe.headers.get('content-type')), await comparable(rawBytes, rawProbe.headers.get('content-type'))) ??
                (count === rawCount ? undefined : `X-Total-Count: ${count} vs ${rawCount}`)
              row.same = diff === undefined ? true : diff
              const r = await load(server, c.raw, rawHeaders, options)
              Object.assign(row, { rawCpu: r.cpu, rawRps: r.result.requests.average, ratio: r.cpu / m.cpu })
            }
          }
          row.load = os.loadavg()[0]
          console.log(
            `  ${c.label} as ${who}: ${fmt(row.rps)} req/s, p99 ${fmt(row.p99, 1)} ms, ${fmt(row.cpu)} µs CPU/req` +
              (row.rawCpu !== undefined ? `, raw ${fmt(row.rawCpu)} µs (${fmt(row.ratio, 2)}×)` : '') +
              (typeof row.same === 'string' ? ` JSON differs: ${row.same}` : '') +
              ` (load ${row.load.toFixed(1)})`,
          )
        }
      }
      if (!values['no-writes']) {
        for (const c of writeCases(seeded, only)) {
          const headers = { authorization: `Bearer ${keys[c.who]}` }
          const m = await load(server, c.url, headers, { ...options, warmup: 0 }, c)
          const codes = Object.keys(m.result.statusCodeStats ?? {}).join('/')
          rows.push({ db: dialect, as: c.who, label: c.label, status: codes, rps: m.result.requests.average, p50: m.result.latency.p50, p99: m.result.latency.p99, cpu: m.cpu, load: os.loadavg()[0] })
          console.log(`  ${c.label} as ${c.who}: ${codes}, ${fmt(m.result.requests.average)} req/s, p99 ${fmt(m.result.latency.p99, 1)} ms, ${fmt(m.cpu)} µs CPU/req`)
        }
      }
      const end = await usageOf(server.child)
      console.log(`  server at the end: rss ${mb(end.memory.rss)}, heap used ${mb(end.memory.heapUsed)}`)
      await stop()
    }
    console.log('')
    printTable(rows)
    const worst = rows.filter((r) => r.ratio !== undefined).sort((a, b) => a.ratio! - b.ratio!)
    if (worst.length) console.log(`\nlowest ratio to raw: ${worst.slice(0, 3).map((r) => `${r.db} ${r.as} ${r.label.trim()} ${fmt(r.ratio, 2)}×`).join('; ')}`)
    const slow = rows.filter((r) => r.cpu !== undefined).sort((a, b) => b.cpu! - a.cpu!)
    console.log(`most CPU per request: ${slow.slice(0, 5).map((r) => `${r.db} ${r.as} ${r.label.trim()} ${fmt(r.cpu)} µs`).join('; ')}`)
    if (values.json) await writeFile(values.json, JSON.stringify(rows, null, 1))
  } finally {
    for (const fn of cleanup.reverse()) await fn().catch(() => {})
  }
}

const serveArg = process.argv.indexOf('--serve')
if (serveArg !== -1) {
  await childMain(JSON.parse(process.argv[serveArg + 1]) as ServerSpec)
} else {
  await main()
  // fetch's keep-alive pool and pg's scratch clients must not keep a finished run alive
  process.exit(0)
}
