import { randomUUID } from 'node:crypto'
import { mkdir, realpath, stat } from 'node:fs/promises'
import path from 'node:path'
import type { EntityManager, Knex } from '../../core/db/orm.js'
import type { MamContext } from '../../core/http/context.js'
import type { StorageRegistry } from '../../core/storage/storages.js'
import { safeName } from '../../core/storage/paths.js'
import { iso } from '../../core/db/entity.js'
import { MamError, conflict, notFound } from '../../core/errors.js'
import { User } from '../../core/auth/entities.js'
import type { AccessRightService, ProtectedType, Right } from '../identity/access-rights.js'
import type { TeamService } from '../identity/teams-service.js'
import type { TemplateService } from '../templates/service.js'
import { TEMPLATE_TYPES } from '../templates/types.js'
import { Team } from '../identity/entities.js'
import { Template } from '../templates/entities.js'
import { Project } from './entities.js'
import { copyTemplateTree } from './template-copy.js'
import { treeSize } from './folders.js'
import { CREATE_KIND, type CreateIntent } from './creation.js'
import { isUniqueViolation } from '../../core/db/unique.js'
import { moveExclusive } from '../../core/storage/exclusive.js'
import type { StorageJournal } from '../../core/storage/journal.js'
import { ProjectViews, type ProjectJson } from './views.js'
import type { Principal } from '../../core/auth/principal.js'

/** projects as objects teams get rights on */
export const PROJECT = { type: 'project', label: 'project', table: 'projects', live: { deleted: false } } as const satisfies ProtectedType
export const TRASH_DIR = '.mamkit-trash'

export interface NewProject {
  name: string
  templateId?: number
  templateName?: string
  storage?: string
  customMetadata?: Record<string, unknown>
  isLibraryProject?: boolean
  description?: string | null
  alternativeName?: string | null
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

  constructor(
    private readonly storages: StorageRegistry,
    private readonly templates: TemplateService,
    private readonly accessRights: AccessRightService,
    private readonly teams: TeamService,
    private readonly knex: Knex,
    private readonly journal: StorageJournal,
  ) {}

  pathOf(p: Project): string {
    return path.join(this.storages.get(p.storage).root, p.folder)
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
  async readableSummary(principal: Principal, id: number): Promise<{ id: number; name: string; right: Right }> {
    const [row, right] = await Promise.all([this.knex('projects').where({ id, deleted: false }).first('id', 'name'), this.accessRights.rightOf(principal, PROJECT.type, id)])
    if (!row || right === 'none') throw notFound('project', id)
    return { id: Number(row.id), name: row.name, right }
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
    const { name, storage, folder, template } = await this.check(em, input)
    const user = await em.findOneOrFail(User, ctx.user!.userId)
    // the creator's own team gets write on the new project, so its quota bounds what the template adds
    const own = await this.teams.ensureOwnTeam(em, user)
    if (template && own.quota !== null) {
      const needed = await treeSize(this.templates.directoryOf(template))
      if (own.spaceUsed + needed > own.quota)
        throw new MamError('insufficient_storage', `Team "${own.name}" would exceed its quota of ${own.quota} bytes (${own.spaceUsed} used)`, { team_id: own.id, quota: own.quota, space_used: own.spaceUsed })
    }
    const root = this.storages.get(storage).root
    const intent: CreateIntent = { storage, folder, staging: path.join(TRASH_DIR, `creating-${randomUUID()}`), uuid: randomUUID() }
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
      await mkdir(staging, { recursive: true })
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
      await this.journal.end(this.knex, entry)
      return project
    })
    await this.refreshTeamSpace(project.id)
    return project
  }

  /** teams with write access whose quota `extra` more bytes would exceed, and the project's own quota */
  async assertSpace(em: EntityManager, project: Project, extra: number): Promise<void> {
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
  render(ctx: MamContext, projects: Project[]): Promise<ProjectJson[]> {
    return this.views.decorate(ctx.em, projects, projects.map((p) => this.serialize(p, ctx.user)))
  }

  async one(ctx: MamContext, project: Project): Promise<ProjectJson> {
    return (await this.render(ctx, [project]))[0]
  }

  /**
   * The project's own fields. Absolute server paths are for administrators (SECURITY.md): others get
   * `path` as the folder inside the storage, beside `storage`. `mounted_by` and `locked_by` are
   * null here; the edits plugin fills them (`render`).
   */
  serialize(p: Project, viewer: Principal | undefined) {
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
    }
  }
}
