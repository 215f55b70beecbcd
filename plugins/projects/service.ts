import { randomUUID } from 'node:crypto'
import { safeName, iso, MamError, conflict, notFound, User, isUniqueViolation, moveExclusive, type Outbox, type EntityManager, type Knex, type MamContext, type StorageRegistry, type StorageJournal, type Principal, column, andThen, eachInTurn, limitSql, pageTotal, preparedRead, containsIgnoringCase, type MaybePromise, type PreparedRead, makeDirs } from '../../core/index.js'
import { projectCreated } from './events.js'
import { realpath, rename, stat } from 'node:fs/promises'
import path from 'node:path'
import { Team, type AccessRightService, type ProtectedType, type Right, type TeamService } from '../identity/index.js'
import { TEMPLATE_TYPES, Template, type TemplateService } from '../templates/index.js'
import { Project } from './entities.js'
import { copyTemplateTree } from './template-copy.js'
import { treeSize } from './folders.js'
import { CREATE_KIND, type CreateIntent } from './creation.js'
import { ProjectViews, type ProjectJson } from './views.js'
import { PROJECT_JSON_KEYS, pgPageColumns, projectJsonWriters, projectPageJson, type ProjectColumn, type ProjectJsonOwn } from './project-json.js'
import { ProjectCreateHooks } from './create-hooks.js'
import { SpaceLimits } from './space-limits.js'

/** projects as objects teams get rights on */
export const PROJECT = { type: 'project', label: 'project', table: 'projects', live: { deleted: false } } as const satisfies ProtectedType
export const TRASH_DIR = '.mamkit-trash'

/** What a project's JSON is made of: an entity, or a row read without the ORM (GET paths). */
export type ProjectView = Pick<
  Project,
  | 'id' | 'uuid' | 'name' | 'alternativeName' | 'description' | 'storage' | 'folder' | 'templateId' | 'isLibraryProject' | 'encodingPriority' | 'customMetadata'
  | 'quota' | 'size' | 'sizeCalculatedAt' | 'frozenAt' | 'createdByEdit' | 'lastOpenedByEdit' | 'lastUsedAt' | 'deleted' | 'createdAt' | 'updatedAt'
> & { parent: { id: number } | null; frozenBy: { id: number } | null; createdBy: { id: number } | null; lastOpenedBy: { id: number } | null }

/** the columns `projectViewOfRow` reads, for a `projects p` query */
export const PROJECT_COLUMNS: readonly string[] = [
  'p.id', 'p.uuid', 'p.name', 'p.alternative_name', 'p.description', 'p.storage', 'p.folder', 'p.template_id', 'p.is_library_project', 'p.encoding_priority', 'p.custom_metadata',
  'p.quota', 'p.size', 'p.size_calculated_at', 'p.parent_id', 'p.frozen_by_id', 'p.frozen_at', 'p.created_by_id', 'p.created_by_edit', 'p.last_opened_by_id', 'p.last_opened_by_edit',
  'p.last_used_at', 'p.deleted', 'p.created_at', 'p.updated_at',
]

/** PROJECT_COLUMNS without their table's alias: the names rows have, the order of rows read as arrays */
const COLUMN_NAMES = PROJECT_COLUMNS.map((c) => c.slice('p.'.length) as ProjectColumn)

const ref = (id: unknown) => (id === null || id === undefined ? null : { id: Number(id) })

/** a row of PROJECT_COLUMNS as the fields of a project, without entity hydration */
export function projectViewOfRow(r: Record<string, any>): ProjectView {
  return {
    id: Number(r.id),
    uuid: r.uuid,
    name: r.name,
    alternativeName: r.alternative_name,
    description: r.description,
    storage: r.storage,
    folder: r.folder,
    templateId: column.intOrNull(r.template_id),
    isLibraryProject: column.bool(r.is_library_project),
    encodingPriority: Number(r.encoding_priority),
    customMetadata: column.json(r.custom_metadata, {}),
    quota: column.intOrNull(r.quota),
    size: Number(r.size),
    sizeCalculatedAt: column.date(r.size_calculated_at),
    parent: ref(r.parent_id),
    frozenBy: ref(r.frozen_by_id),
    frozenAt: column.date(r.frozen_at),
    createdBy: ref(r.created_by_id),
    createdByEdit: r.created_by_edit,
    lastOpenedBy: ref(r.last_opened_by_id),
    lastOpenedByEdit: r.last_opened_by_edit,
    lastUsedAt: column.date(r.last_used_at),
    deleted: column.bool(r.deleted),
    createdAt: column.date(r.created_at)!,
    updatedAt: column.date(r.updated_at)!,
  }
}

/**
 * `… where <READABLE_BY_USER>` with the user's id as its parameter: the principal has a right on the
 * project `p` through one of their teams (the same test as `AccessRightService.rightOf` ≠ 'none'),
 * checked in the query that reads the row instead of in a second one.
 */
export const READABLE_BY_USER = `exists (select 1 from access_rights ar join team_memberships tm on tm.team_id = ar.team_id where tm.user_id = ? and ar.object_type = '${PROJECT.type}' and ar.object_id = p.id and (ar.read = true or ar.write = true))`

/**
 * The user's (the parameter's) right on project `p` as a number, for `select … (RIGHT_LEVEL) as right_level`:
 * 2 write, 1 read, 0 or null none; the same as `AccessRightService.rightOf` in the query that reads the row.
 */
const RIGHT_LEVEL = `select max(case when ar.write = true then 2 when ar.read = true then 1 else 0 end) from access_rights ar join team_memberships tm on tm.team_id = ar.team_id where tm.user_id = ? and ar.object_type = '${PROJECT.type}' and ar.object_id = p.id`

/**
 * `p.id in (<READABLE_IDS>)` with the user's id as its parameter: the projects the user may list, the
 * same set as `AccessRightService.readableIds` (a read right through one of their teams).
 */
const READABLE_IDS = `select ar.object_id from access_rights ar join team_memberships tm on tm.team_id = ar.team_id where tm.user_id = ? and ar.object_type = '${PROJECT.type}' and ar.read = true`

/** what `GET /projects` filters and pages by */
export interface ProjectListQuery {
  /** a part of the name, in any case */
  name?: string
  library?: boolean
  online?: boolean
  frozen?: boolean
  storage?: string
  page: number
  perPage: number
}

export interface NewProject {
  name: string
  templateId?: number
  templateName?: string
  storage?: string
  customMetadata?: Record<string, unknown>
  isLibraryProject?: boolean
  description?: string | null
  alternativeName?: string | null
  /**
   * What create hooks' `prepare` computed for their `created` step, keyed by the hook's plugin. It
   * is kept (as JSON) with the creation's journal entry, so a repair after a crash can run `created`.
   */
  prepared?: Record<string, unknown>
}

const exists = (p: string) => stat(p).then(() => true, () => false)
const nameTaken = (name: string, storage: string) => conflict(`A project named "${name}" exists on storage "${storage}"`, { errors: [{ param: 'name', message: 'is taken on this storage' }] })
const folderTaken = (folder: string, storage: string) =>
  conflict(`The folder "${folder}" exists already on storage "${storage}"`, { errors: [{ param: 'name', message: 'names a folder that exists on the storage' }] })

/**
 * Projects on storage: the database row and the folder tree kept in step. Every write goes through
 * `writable`, which enforces access rights, freeze (423) and the deleted state. Resolved as `projects`.
 */
export class ProjectService {
  /** decorators other plugins add to the project JSON */
  readonly views = new ProjectViews()
  private showStatements?: { admin: PreparedRead; user: PreparedRead }
  private summaryStatements?: { admin: PreparedRead; user: PreparedRead }
  /** `listPage`'s statements by SQL text: one per shape of the filters (a few dozen at most) */
  private readonly listStatements = new Map<string, PreparedRead>()
  /** `path.join(root, sep)` by storage root, for `pagePathOf` */
  private readonly rootPrefixes = new Map<string, string>()
  private ownJsonWriters?: { admin: ReadonlyArray<(r: readonly unknown[]) => string>; user: ReadonlyArray<(r: readonly unknown[]) => string> }
  /** checks and rows other plugins add to project creation */
  readonly createHooks = new ProjectCreateHooks()
  /** limits beyond quotas on what projects may store (the license's storage limit) */
  readonly spaceLimits = new SpaceLimits()

  constructor(
    private readonly storages: StorageRegistry,
    private readonly templates: TemplateService,
    private readonly accessRights: AccessRightService,
    private readonly teams: TeamService,
    private readonly knex: Knex,
    private readonly journal: StorageJournal,
    private readonly outbox?: Outbox,
    /** PostgreSQL: pages are read with `pgPageColumns` */
    private readonly pg = false,
  ) {}

  pathOf(p: Pick<Project, 'storage' | 'folder'>): string {
    return path.join(this.storages.get(p.storage).root, p.folder)
  }

  /**
   * `pathOf` for pages of projects: a folder that is one plain name (a project's, `safeName`) follows
   * its storage's root as path.join writes that with a separator, without path.join's normalising
   * of the whole path once per project; any other folder goes through path.join
   */
  private pagePathOf(storage: string, folder: string): string {
    const root = this.storages.get(storage).root
    if (!folder || folder === '.' || folder === '..' || folder.includes('/') || folder.includes(path.sep)) return path.join(root, folder)
    let prefix = this.rootPrefixes.get(root)
    if (prefix === undefined) this.rootPrefixes.set(root, (prefix = path.join(root, path.sep)))
    return prefix + folder
  }

  /**
   * The project's folder as its row names it now, resolved: for work inside the project's journal
   * scope, where a rename that ran while the request waited has moved the folder its entity names.
   */
  async currentRoot(projectId: number): Promise<string> {
    const row = await this.knex('projects').where({ id: projectId, deleted: false }).first('storage', 'folder')
    if (!row) throw notFound('project', projectId)
    return realpath(this.pathOf(row as Project))
  }

  /** a project the principal can read (404 otherwise, also for deleted ones) */
  async readable(em: EntityManager, principal: Principal, id: number): Promise<{ project: Project; right: Right }> {
    const [project, right] = await Promise.all([
      em.findOne(Project, { id, deleted: false }, { populate: ['frozenBy', 'createdBy', 'lastOpenedBy'], strategy: 'joined' }),
      this.accessRights.rightOf(principal, PROJECT.type, id),
    ])
    if (!project || right === 'none') throw notFound('project', id)
    return { project, right }
  }

  /**
   * The same check as `readable`, answering the project's id and name from one plain row: for hot
   * read paths (asset listings) that need no entity (an entity load with its users costs ~3 ms).
   */
  readableSummary(principal: Principal, id: number): MaybePromise<{ id: number; name: string; right: Right }> {
    // one prepared statement: the row and the principal's right in the same query (as rightOf: write beats read)
    this.summaryStatements ??= {
      admin: preparedRead(this.knex, 'select p.id, p.name from projects p where p.id = ? and p.deleted = false'),
      user: preparedRead(this.knex, `select p.id, p.name, (${RIGHT_LEVEL}) as right_level from projects p where p.id = ? and p.deleted = false`),
    }
    // without a promise while SQLite's connection is free (PreparedRead.now): GET /projects/:id/assets is polled
    if (principal.isAdmin)
      return andThen(this.summaryStatements.admin.now([id]), ([row]) => {
        if (!row) throw notFound('project', id)
        return { id: Number(row.id), name: row.name as string, right: 'admin' as const }
      })
    return andThen(this.summaryStatements.user.now([principal.userId, id]), ([row]) => {
      const level = row ? Number(row.right_level ?? 0) : 0
      if (level === 0) throw notFound('project', id)
      return { id: Number(row.id), name: row.name as string, right: level === 2 ? ('write' as const) : ('read' as const) }
    })
  }

  /**
   * A page of the live projects the principal can read, ordered by name, and the count of all that
   * match: `GET /projects` and `/projects/search`. Prepared statements per shape of the filters
   * (the access filter in the same query): knex's query building cost more than the queries. The
   * count is only queried when the page does not tell it (`pageTotal`). Rows are arrays of
   * PROJECT_COLUMNS (`preparedRead`'s `arrays`); without a promise while SQLite's connection is free.
   */
  listPage(principal: Principal, q: ProjectListQuery): MaybePromise<{ total: number; rows: unknown[][] }> {
    let where = 'p.deleted = false'
    const args: unknown[] = []
    if (q.name) {
      // any case, and % _ \ literal (containsIgnoringCase): the same on SQLite and PostgreSQL
      const [sql, bindings] = containsIgnoringCase('p.name', q.name)
      where += ` and ${sql}`
      args.push(...bindings)
    }
    if (q.library !== undefined) {
      where += ' and p.is_library_project = ?'
      args.push(q.library)
    }
    // online: not a library (and not archived, which no project is until the strategies plugin arrives)
    if (q.online !== undefined) {
      where += ' and p.is_library_project = ?'
      args.push(!q.online)
    }
    if (q.frozen !== undefined) where += q.frozen ? ' and p.frozen_at is not null' : ' and p.frozen_at is null'
    if (q.storage) {
      where += ' and p.storage = ?'
      args.push(q.storage)
    }
    if (!principal.isAdmin) {
      where += ` and p.id in (${READABLE_IDS})`
      args.push(principal.userId)
    }
    const offset = (q.page - 1) * q.perPage
    const [limit, limitArgs] = limitSql(q.perPage)
    const pageArgs = [...args, ...limitArgs, offset]
    const tail = `from projects p where ${where} order by p.name, p.id ${limit} offset ?`
    const plain = () => this.listStatement(`select ${PROJECT_COLUMNS.join(', ')} ${tail}`, true).now(pageArgs)
    // PostgreSQL: dates as numbers, JSON as text, unless a row has a date the driver reads otherwise (pgPageColumns)
    const page = !this.pg ? plain() : andThen(this.listStatement(`select ${pgPageColumns(PROJECT_COLUMNS)} ${tail}`, true).now(pageArgs), (rows) => (rows.every((r) => (r as unknown[])[PROJECT_COLUMNS.length] === true) ? rows : plain()))
    const count = () => andThen(this.listStatement(`select count(*) as total from projects p where ${where}`).now(args), ([r]) => Number((r as { total: unknown }).total))
    return andThen(page, (rows) => andThen(pageTotal(offset, q.perPage, rows.length, count), (total) => ({ total, rows: rows as unknown[][] })))
  }

  private listStatement(sql: string, arrays = false): PreparedRead {
    let read = this.listStatements.get(sql)
    if (!read) this.listStatements.set(sql, (read = preparedRead(this.knex, sql, { arrays })))
    return read
  }

  /**
   * `listPage` as the JSON text of `{ projects: render(…) }`: written from the rows without making
   * their objects when every decorator gives fields (`ProjectViews.layout`), else rendered and
   * stringified. Without a promise while nothing waits.
   */
  listPageJson(ctx: MamContext, principal: Principal, q: ProjectListQuery): MaybePromise<{ total: number; body: string }> {
    return andThen(this.listPage(principal, q), ({ total, rows }) => andThen(this.pageJson(ctx, rows), (body) => ({ total, body })))
  }

  private pageJson(ctx: MamContext, rows: unknown[][]): MaybePromise<string> {
    const layout = this.views.layout(PROJECT_JSON_KEYS)
    if (!layout) return andThen(this.render(ctx, rows.map((r) => projectViewOfRow(Object.fromEntries(COLUMN_NAMES.map((name, i) => [name, r[i]]))))), (projects) => JSON.stringify({ projects }))
    const own = this.ownJson(ctx.user?.isAdmin === true)
    const ids = rows.map((r) => Number(r[0]))
    const valuesOf: Array<(id: number) => readonly unknown[]> = []
    const read = rows.length ? eachInTurn(layout.fields, (fields, i) => andThen(fields.read(ids), (lookup) => void (valuesOf[i] = lookup))) : undefined
    return andThen(read, () => projectPageJson(rows, ids, layout, own, valuesOf))
  }

  /** the JSON text of each of PROJECT_JSON_KEYS from a row of PROJECT_COLUMNS, as an administrator (absolute `path`) or another user sees it */
  private ownJson(admin: boolean): ReadonlyArray<(r: readonly unknown[]) => string> {
    const writers = (admin: boolean) => {
      const byKey = projectJsonWriters(COLUMN_NAMES, (storage, folder) => (admin ? this.pagePathOf(storage as string, folder as string) : (folder as string)))
      return PROJECT_JSON_KEYS.map((key) => byKey[key])
    }
    this.ownJsonWriters ??= { admin: writers(true), user: writers(false) }
    return admin ? this.ownJsonWriters.admin : this.ownJsonWriters.user
  }

  /**
   * The project as `GET /projects/:id` shows it, from one prepared statement that checks the
   * principal's right in the same query: no entity, no second query (404 as `readable`).
   */
  readableView(principal: Principal, id: number): MaybePromise<ProjectView> {
    const base = `select ${PROJECT_COLUMNS.join(', ')} from projects p where p.id = ? and p.deleted = false`
    this.showStatements ??= { admin: preparedRead(this.knex, base), user: preparedRead(this.knex, `${base} and ${READABLE_BY_USER}`) }
    const rows = principal.isAdmin ? this.showStatements.admin.now([id]) : this.showStatements.user.now([id, principal.userId])
    return andThen(rows, ([row]) => {
      if (!row) throw notFound('project', id)
      return projectViewOfRow(row)
    })
  }

  /** a project the principal may change: write right (403 with read only), not frozen (423) */
  async writable(em: EntityManager, principal: Principal, id: number): Promise<Project> {
    const { project, right } = await this.readable(em, principal, id)
    if (right === 'read') throw new MamError('forbidden', 'You may read this project but not change it')
    this.assertNotFrozen(project)
    return project
  }

  assertNotFrozen(project: Project) {
    if (project.frozenAt)
      throw new MamError('locked', `Project "${project.name}" is frozen by ${project.frozenBy?.username ?? 'a deleted user'} since ${iso(project.frozenAt)}; reads keep working`, {
        frozen_by: project.frozenBy ? { id: project.frozenBy.id, username: project.frozenBy.username } : null,
        frozen_at: iso(project.frozenAt),
      })
  }

  /** everything `create` checks, without side effects (POST /projects/validate) */
  async check(em: EntityManager, input: NewProject) {
    const errors: Array<{ param: string; message: string }> = []
    const name = input.name?.normalize('NFC').trim()
    if (!name) errors.push({ param: 'name', message: 'is required' })
    const storage = input.storage ?? 'default'
    let root: string | undefined
    try {
      root = this.storages.get(storage).root
    } catch (err) {
      errors.push({ param: 'storage', message: (err as MamError).extra.errors?.[0]?.message ?? 'is unknown' })
    }
    let template: Template | null = null
    if (input.templateId !== undefined || input.templateName !== undefined) {
      template = input.templateId !== undefined ? await em.findOne(Template, input.templateId) : await this.templates.findByName(em, input.templateName!)
      if (!template) errors.push({ param: input.templateId !== undefined ? 'template_id' : 'templatename', message: 'is not a known template' })
    }
    if (errors.length) throw new MamError('invalid_parameters', errors.map((e) => `${e.param} ${e.message}`).join('; '), { errors })
    const folder = safeName(name!)
    if (await em.count(Project, { storage, folder })) throw nameTaken(name!, storage)
    if (await exists(path.join(root!, folder))) throw folderTaken(folder, storage)
    return { name: name!, storage, folder, template }
  }

  async create(ctx: MamContext, input: NewProject): Promise<Project> {
    const em = ctx.em
    const principal = ctx.requireUser()
    await this.createHooks.prepare(em, principal, input)
    const { name, storage, folder, template } = await this.check(em, input)
    const user = await em.findOneOrFail(User, principal.userId)
    // the creator's own team gets write on the new project, so its quota bounds what the template adds
    const own = await this.teams.ensureOwnTeam(em, user)
    if (template && own.quota !== null) {
      const needed = await treeSize(this.templates.directoryOf(template))
      if (own.spaceUsed + needed > own.quota)
        throw new MamError('insufficient_storage', `Team "${own.name}" would exceed its quota of ${own.quota} bytes (${own.spaceUsed} used)`, { team_id: own.id, quota: own.quota, space_used: own.spaceUsed })
    }
    const root = this.storages.get(storage).root
    const intent: CreateIntent = { storage, folder, staging: path.join(TRASH_DIR, `creating-${randomUUID()}`), uuid: randomUUID(), createdBy: principal.userId, input }
    const staging = path.join(root, intent.staging)
    const project = await this.journal.run(CREATE_KIND, intent, {}, async (entry) => {
      let size = 0
      if (template) {
        const type = TEMPLATE_TYPES.find((t) => t.id === template.templateType) ?? TEMPLATE_TYPES[0]
        const source = this.templates.directoryOf(template)
        if (await exists(source))
          size = await copyTemplateTree(source, staging, {
            patterns: template.substitutionPatterns,
            context: { projectName: name, userName: user.username, date: new Date() },
            type,
            overwrite: true,
          })
      }
      await makeDirs(staging)
      const project = em.create(Project, {
        uuid: intent.uuid,
        name,
        storage,
        folder,
        templateId: template?.id ?? null,
        customMetadata: input.customMetadata ?? {},
        isLibraryProject: input.isLibraryProject ?? false,
        description: input.description ?? null,
        alternativeName: input.alternativeName ?? null,
        createdBy: user,
        createdByEdit: ctx.app_client.edit ?? null,
        size,
        sizeCalculatedAt: new Date(),
        quota: null,
      })
      // the row reserves the name (unique storage + folder) before the folder appears: of two requests
      // for one name the loser stops here, and its repair removes only its own staging folder
      await em.flush().catch((err) => {
        throw isUniqueViolation(err) ? nameTaken(name, storage) : err
      })
      await this.accessRights.grant(em, PROJECT.type, project.id, own.id, { read: true, write: true })
      // the tree appears complete or not at all, and never over a folder someone made meanwhile
      await moveExclusive(staging, path.join(root, folder), true).catch((err) => {
        throw ['EEXIST', 'ENOTEMPTY'].includes(err.code) ? folderTaken(folder, storage) : err
      })
      // the creation commits with project.created (notifications, webhooks)
      let refusal: unknown
      await this.knex
        .transaction(async (trx) => {
          await this.createHooks.created(trx, project, principal, input).catch((err) => {
            if (err instanceof MamError && err.status < 500) refusal = err
            throw err
          })
          await this.journal.end(trx, entry)
          await this.outbox?.publish(trx, projectCreated, { project_id: project.id, name, storage, created_by_id: user.id, team_id: own.id }, { subjectId: project.id, actorId: user.id })
        })
        .catch(async (err) => {
          // a hook refused (a 4xx, not a fault): the client hears the refusal, so the project must not
          // stay. The tree goes back to its staging name, which makes this an unfinished creation the
          // journal's repair (journal.run, on this throw) undoes: the staging folder, the row and its rights.
          // After a fault the outcome is unknown, and the repair completes the placed creation instead.
          if (err === refusal) await rename(path.join(root, folder), staging).catch(() => {})
          throw err
        })
      return project
    })
    await this.refreshTeamSpace(project.id)
    return project
  }

  /** teams with write access whose quota `extra` more bytes would exceed, and the project's own quota */
  async assertSpace(em: EntityManager, project: Project, extra: number): Promise<void> {
    await this.spaceLimits.ahead(this.knex, extra)
    if (project.quota !== null && project.size + extra > project.quota)
      throw new MamError('insufficient_storage', `Project "${project.name}" would exceed its quota of ${project.quota} bytes (${project.size} used)`, { quota: project.quota, size: project.size })
    const teamIds = (await this.knex('access_rights').where({ object_type: PROJECT.type, object_id: project.id, write: true }).select('team_id')).map((r: any) => Number(r.team_id))
    if (teamIds.length === 0) return
    for (const team of await em.find(Team, { id: { $in: teamIds }, quota: { $ne: null } })) {
      if (team.spaceUsed + extra > team.quota!)
        throw new MamError('insufficient_storage', `Team "${team.name}" would exceed its quota of ${team.quota} bytes (${team.spaceUsed} used)`, { team_id: team.id, quota: team.quota, space_used: team.spaceUsed })
    }
  }

  /**
   * Adds `bytes` to the project's size inside the caller's transaction, refusing (507) what would take
   * the project or a team that can write it over its quota. `assertSpace` answers early from what was
   * read before; this is the check that holds when uploads run side by side: the conditional update
   * waits on the row another transaction is charging and re-evaluates against its new size.
   */
  async chargeSpace(trx: Knex, projectId: number, bytes: number): Promise<void> {
    const charged = await trx('projects')
      .where({ id: projectId })
      .andWhere((q) => q.whereNull('quota').orWhereRaw('size + ? <= quota', [bytes]))
      .update({ size: trx.raw('size + ?', [bytes]), updated_at: new Date() })
    if (!charged) {
      const row = await trx('projects').where({ id: projectId }).first('name', 'size', 'quota')
      throw new MamError('insufficient_storage', `Project "${row?.name}" would exceed its quota of ${row?.quota} bytes (${row?.size} used)`, { quota: Number(row?.quota), size: Number(row?.size) })
    }
    const over = await trx('teams as t')
      .join('access_rights as own', function () {
        this.on('own.team_id', '=', 't.id').andOnVal('own.object_type', '=', PROJECT.type).andOnVal('own.object_id', '=', projectId).andOnVal('own.write', '=', true)
      })
      .join('access_rights as ar', function () {
        this.on('ar.team_id', '=', 't.id').andOnVal('ar.object_type', '=', PROJECT.type).andOnVal('ar.write', '=', true)
      })
      .join('projects as p', function () {
        this.on('p.id', '=', 'ar.object_id').andOnVal('p.deleted', '=', false)
      })
      .whereNotNull('t.quota')
      .groupBy('t.id', 't.name', 't.quota')
      .havingRaw('sum(p.size) > t.quota')
      .first('t.id', 't.name', 't.quota', trx.raw('sum(p.size) as used'))
    if (over)
      throw new MamError('insufficient_storage', `Team "${over.name}" would exceed its quota of ${over.quota} bytes`, { team_id: Number(over.id), quota: Number(over.quota), space_used: Number(over.used) - bytes })
    await this.spaceLimits.charged(trx, bytes)
  }

  /** adds `bytes` to the project's size in the database (an increment: concurrent writers add up) and reloads it into the entity */
  async addSize(project: Project, bytes: number): Promise<void> {
    await this.knex('projects').where({ id: project.id }).update({ size: this.knex.raw('size + ?', [bytes]), updated_at: new Date() })
    const row = await this.knex('projects').where({ id: project.id }).first('size')
    project.size = Number(row?.size ?? project.size + bytes)
  }

  /** re-adds every write team's space_used from the sizes of the projects it can write */
  async refreshTeamSpace(projectId: number): Promise<void> {
    const teamIds = (await this.knex('access_rights').where({ object_type: PROJECT.type, object_id: projectId, write: true }).select('team_id')).map((r: any) => Number(r.team_id))
    for (const teamId of teamIds) {
      const [{ total }] = await this.knex('projects as p')
        .join('access_rights as ar', function () {
          this.on('ar.object_id', '=', 'p.id').andOnVal('ar.object_type', '=', PROJECT.type)
        })
        .where({ 'ar.team_id': teamId, 'ar.write': true, 'p.deleted': false })
        .sum({ total: 'p.size' })
      await this.knex('teams').where({ id: teamId }).update({ space_used: Number(total ?? 0), updated_at: new Date() })
    }
  }

  /** the projects as `viewer` sees them, with the fields other plugins add (one query per decorator for the lot) */
  render(ctx: MamContext, projects: ProjectView[]): MaybePromise<ProjectJson[]> {
    return this.views.decorate(() => ctx.em, projects, projects.map((p) => this.serialize(p, ctx.user)))
  }

  one(ctx: MamContext, project: ProjectView): MaybePromise<ProjectJson> {
    return andThen(this.render(ctx, [project]), (json) => json[0])
  }

  /**
   * The project's own fields. Absolute server paths are for administrators (SECURITY.md): others get
   * `path` as the folder inside the storage, beside `storage`. `mounted_by` and `locked_by` are
   * null here; the edits plugin fills them (`render`). Its keys are PROJECT_JSON_KEYS, in their order
   * (`satisfies` checks the set when compiled, project-json.test.ts the order).
   */
  serialize(p: ProjectView, viewer: Principal | undefined) {
    return {
      id: p.id,
      uuid: p.uuid,
      name: p.name,
      alternative_name: p.alternativeName,
      description: p.description,
      storage: p.storage,
      folder: p.folder,
      path: viewer?.isAdmin ? this.pathOf(p) : p.folder,
      template_id: p.templateId,
      is_library_project: p.isLibraryProject,
      encoding_priority: p.encodingPriority,
      custom_metadata: p.customMetadata,
      quota: p.quota,
      size: p.size,
      size_calculated_at: iso(p.sizeCalculatedAt),
      parent_id: p.parent?.id ?? null,
      frozen: p.frozenAt !== null,
      frozen_by_id: p.frozenBy?.id ?? null,
      frozen_at: iso(p.frozenAt),
      mounted_by: null as number | null,
      locked_by: null as number | null,
      archive_strategy_id: null,
      archive_strategy_state: null,
      created_by: p.createdBy?.id ?? null,
      created_by_edit: p.createdByEdit,
      last_opened_by: p.lastOpenedBy?.id ?? null,
      last_opened_by_edit: p.lastOpenedByEdit,
      last_used_at: iso(p.lastUsedAt),
      deleted: p.deleted,
      created_at: iso(p.createdAt),
      updated_at: iso(p.updatedAt),
    } satisfies ProjectJsonOwn
  }
}
