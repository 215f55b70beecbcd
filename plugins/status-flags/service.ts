import { column, iso, conflict, notFound, preparedRead, type EntityManager, type Knex, type PreparedRead } from '../../core/index.js'
import { ProjectStatusFlag, StatusFlag } from './entities.js'

export interface FlagChanges {
  name?: string
  color?: string
  position?: number
}

/** a status_flags row as the fields `serialize` reads */
const flagOf = (r: Record<string, any>) => ({
  id: column.int(r.id),
  name: r.name as string,
  color: r.color as string,
  scopeProjectId: column.intOrNull(r.scope_project_id),
  position: column.int(r.position),
  createdAt: column.date(r.created_at)!,
  updatedAt: column.date(r.updated_at)!,
})

/**
 * Status flags and the flags set on projects. Resolved as `statusFlags`; the federation plugin calls
 * `create` with a `scopeProjectId` for the flags that come with a project transferred from a remote site.
 */
export class StatusFlagService {
  constructor(private readonly knex: Knex) {}

  /** unscoped flags, then the project's own, each with `set`: one statement (GET /projects/:id/status_flags, polled) */
  private flagsOfProject?: PreparedRead

  async viewsForProject(projectId: number) {
    this.flagsOfProject ??= preparedRead(
      this.knex,
      `select f.id, f.name, f.color, f.scope_project_id, f.position, f.created_at, f.updated_at, s.id as set_id
       from status_flags f left join project_status_flags s on s.status_flag_id = f.id and s.project_id = ?
       where f.scope_project_id is null or f.scope_project_id = ?
       order by case when f.scope_project_id is null then 0 else 1 end, f.position, f.id`,
    )
    return (await this.flagsOfProject([projectId, projectId])).map((r) => this.serialize(flagOf(r), r.set_id !== null && r.set_id !== undefined))
  }

  private unscopedFlags?: PreparedRead

  /** `list(em, null)`, serialised, from plain rows (GET /status_flags): no entities for a list clients poll */
  async unscopedViews() {
    this.unscopedFlags ??= preparedRead(this.knex, 'select id, name, color, scope_project_id, position, created_at, updated_at from status_flags where scope_project_id is null order by position, id')
    return (await this.unscopedFlags([])).map((r) => this.serialize(flagOf(r)))
  }

  /** unscoped flags (scope null) or the flags scoped to one project */
  list(em: EntityManager, scopeProjectId: number | null): Promise<StatusFlag[]> {
    return em.find(StatusFlag, { scopeProjectId }, { orderBy: { position: 'asc', id: 'asc' } })
  }

  async get(em: EntityManager, id: number): Promise<StatusFlag> {
    const flag = await em.findOne(StatusFlag, id)
    if (!flag) throw notFound('status flag', id)
    return flag
  }

  async create(em: EntityManager, input: Required<Pick<FlagChanges, 'name' | 'color'>> & FlagChanges & { scopeProjectId?: number | null }): Promise<StatusFlag> {
    const scopeProjectId = input.scopeProjectId ?? null
    await this.assertNameFree(em, input.name, scopeProjectId)
    const [last] = await em.find(StatusFlag, { scopeProjectId }, { orderBy: { position: 'desc' }, limit: 1 })
    const flag = em.create(StatusFlag, {
      name: input.name,
      color: input.color.toLowerCase(),
      scopeProjectId,
      position: input.position ?? (last ? last.position + 1 : 0),
    })
    await em.flush()
    return flag
  }

  async update(em: EntityManager, flag: StatusFlag, changes: FlagChanges): Promise<StatusFlag> {
    if (changes.name !== undefined && changes.name !== flag.name) {
      await this.assertNameFree(em, changes.name, flag.scopeProjectId)
      flag.name = changes.name
    }
    if (changes.color !== undefined) flag.color = changes.color.toLowerCase()
    if (changes.position !== undefined) flag.position = changes.position
    await em.flush()
    return flag
  }

  async remove(em: EntityManager, flag: StatusFlag): Promise<void> {
    await em.transactional(async (tx) => {
      await tx.nativeDelete(ProjectStatusFlag, { statusFlag: flag.id })
      await tx.nativeDelete(StatusFlag, { id: flag.id })
    })
    em.getUnitOfWork().unsetIdentity(flag)
  }

  /** a flag that the project can carry: unscoped or scoped to it (404 otherwise) */
  async availableFlag(em: EntityManager, projectId: number, flagId: number): Promise<StatusFlag> {
    const flag = await em.findOne(StatusFlag, flagId)
    if (!flag || (flag.scopeProjectId !== null && flag.scopeProjectId !== projectId)) throw notFound('status flag', flagId)
    return flag
  }

  /** sets or clears a flag on a project; `wanted` undefined toggles. Returns whether it is set afterwards. */
  async setOn(em: EntityManager, projectId: number, flag: StatusFlag, wanted: boolean | undefined, userId: number): Promise<boolean> {
    const existing = await em.findOne(ProjectStatusFlag, { projectId, statusFlag: flag.id })
    const set = wanted ?? !existing
    if (set && !existing) {
      em.create(ProjectStatusFlag, { projectId, statusFlag: flag, setById: userId })
      try {
        await em.flush()
      } catch (err) {
        // set meanwhile by a concurrent request: the outcome is the same
        if ((err as { name?: string }).name !== 'UniqueConstraintViolationException') throw err
        em.clear()
      }
    } else if (!set && existing) {
      await em.nativeDelete(ProjectStatusFlag, { id: existing.id })
    }
    return set
  }

  serialize(flag: Pick<StatusFlag, 'id' | 'name' | 'color' | 'scopeProjectId' | 'position' | 'createdAt' | 'updatedAt'>, set?: boolean) {
    return {
      id: flag.id,
      name: flag.name,
      color: flag.color,
      scope: flag.scopeProjectId,
      scoped: flag.scopeProjectId !== null,
      position: flag.position,
      ...(set === undefined ? {} : { set }),
      created_at: iso(flag.createdAt),
      updated_at: iso(flag.updatedAt),
    }
  }

  private async assertNameFree(em: EntityManager, name: string, scopeProjectId: number | null) {
    if (await em.count(StatusFlag, { name, scopeProjectId }))
      throw conflict(`A status flag named "${name}" exists already${scopeProjectId === null ? '' : ` for project ${scopeProjectId}`}`, { errors: [{ param: 'status_flag[name]', message: 'is taken' }] })
  }
}
