import { cp, rename, rm, stat } from 'node:fs/promises'
import path from 'node:path'
import { andThen, column, iso, conflict, makeDirs, notFound, preparedRead, safeName, type EntityManager, type Knex, type MaybePromise, type PreparedRead, type Principal } from '../../core/index.js'
import { Template } from './entities.js'
import { NAME_MAX_LENGTH } from './schemas.js'
import type { SubstitutionPattern } from './substitution.js'

export interface TemplateChanges {
  name?: string
  templateType?: string
  position?: number
  substitutionPatterns?: SubstitutionPattern[]
}

/** what the template JSON is made of: an entity, or a plain row read by `listSerialized` */
type TemplateFields = Pick<Template, 'id' | 'name' | 'templateType' | 'position' | 'substitutionPatterns' | 'folder' | 'createdAt' | 'updatedAt'>
const LIST_COLUMNS = ['id', 'name', 'template_type', 'position', 'substitution_patterns', 'folder', 'created_at', 'updated_at']

/** a row of LIST_COLUMNS as the fields `json` reads */
const fieldsOf = (r: Record<string, any>): TemplateFields => ({
  id: column.int(r.id),
  name: r.name,
  templateType: r.template_type,
  position: column.int(r.position),
  substitutionPatterns: column.json<SubstitutionPattern[]>(r.substitution_patterns, []),
  folder: r.folder,
  createdAt: column.date(r.created_at)!,
  updatedAt: column.date(r.updated_at)!,
})

const exists = (p: string) => stat(p).then(() => true, () => false)

/** "X copy", "X copy 2" …, shortened so that the copy of a long name still fits `name` (PostgreSQL refuses longer ones) */
const copyName = (name: string, n: number) => {
  const suffix = n === 1 ? ' copy' : ` copy ${n}`
  return [...name].slice(0, NAME_MAX_LENGTH - suffix.length).join('') + suffix
}

/**
 * Templates and their folder trees. A template owns `<templates root>/<folder>`, named after the
 * template: created with it, copied by duplicate, moved on rename, removed on delete. Resolved by
 * other plugins as `templates` (projects copy the tree and apply the patterns).
 */
export class TemplateService {
  constructor(readonly root: string) {}
  private listStatement?: PreparedRead
  private oneStatement?: PreparedRead

  directoryOf(t: Template): string {
    return path.join(this.root, t.folder)
  }

  /** the folder as `viewer` may see it: absolute for administrators (SECURITY.md), else its name below the templates folder */
  private directoryFor(folder: string, viewer: Principal | undefined): string {
    return viewer?.isAdmin ? path.join(this.root, folder) : folder
  }

  /** the JSON of a template; the one shape behind `serialize` (entities) and `listSerialized` (plain rows) */
  private json(t: TemplateFields, viewer: Principal | undefined) {
    return {
      id: t.id,
      name: t.name,
      template_type: t.templateType,
      position: t.position,
      substitution_patterns: t.substitutionPatterns.map(({ token, pattern }) => ({ token, pattern })),
      directory: this.directoryFor(t.folder, viewer),
      created_at: iso(t.createdAt),
      updated_at: iso(t.updatedAt),
    }
  }

  serialize(t: Template, viewer: Principal | undefined) {
    return this.json(t, viewer)
  }

  list(em: EntityManager): Promise<Template[]> {
    return em.find(Template, {}, { orderBy: { position: 'asc', id: 'asc' } })
  }

  /**
   * `list`, serialised, from plain rows: GET /templates is read far more often than templates change,
   * and building MikroORM entities (identity map, snapshots) cost several times the query.
   */
  listSerialized(knex: Knex, viewer: Principal | undefined): MaybePromise<Array<ReturnType<TemplateService['serialize']>>> {
    // prepared once: building the query with knex cost more than running it (bench/routes.ts);
    // without a promise while SQLite's connection is free (PreparedRead.now)
    this.listStatement ??= preparedRead(knex, `select ${LIST_COLUMNS.join(', ')} from templates order by position, id`)
    return andThen(this.listStatement.now([]), (rows) => rows.map((r) => this.json(fieldsOf(r), viewer)))
  }

  /** `get`, serialised, from a plain row (GET /templates/:id): as `listSerialized`, without entities */
  getSerialized(knex: Knex, id: number, viewer: Principal | undefined): MaybePromise<ReturnType<TemplateService['serialize']>> {
    this.oneStatement ??= preparedRead(knex, `select ${LIST_COLUMNS.join(', ')} from templates where id = ?`)
    return andThen(this.oneStatement.now([id]), ([row]) => {
      if (!row) throw notFound('template', id)
      return this.json(fieldsOf(row), viewer)
    })
  }

  async get(em: EntityManager, id: number): Promise<Template> {
    const t = await em.findOne(Template, id)
    if (!t) throw notFound('template', id)
    return t
  }

  async findByName(em: EntityManager, name: string): Promise<Template | null> {
    return em.findOne(Template, { name })
  }

  async create(em: EntityManager, input: Required<Pick<TemplateChanges, 'name' | 'templateType'>> & TemplateChanges): Promise<Template> {
    await this.assertNameFree(em, input.name)
    const folder = await this.freeFolder(em, input.name)
    const [last] = await em.find(Template, {}, { orderBy: { position: 'desc' }, limit: 1 })
    const t = em.create(Template, {
      name: input.name,
      templateType: input.templateType,
      position: input.position ?? (last ? last.position + 1 : 0),
      substitutionPatterns: input.substitutionPatterns ?? [],
      folder,
    })
    await makeDirs(this.directoryOf(t))
    await this.flushOrUndo(em, () => rm(this.directoryOf(t), { recursive: true, force: true }))
    return t
  }

  async duplicate(em: EntityManager, id: number): Promise<Template> {
    const source = await this.get(em, id)
    let name = copyName(source.name, 1)
    for (let n = 2; (await em.count(Template, { name })) > 0; n++) name = copyName(source.name, n)
    const copy = em.create(Template, {
      name,
      templateType: source.templateType,
      position: source.position + 1,
      substitutionPatterns: source.substitutionPatterns.map((p) => ({ ...p })),
      folder: await this.freeFolder(em, name),
    })
    const from = this.directoryOf(source)
    const to = this.directoryOf(copy)
    if (await exists(from)) await cp(from, to, { recursive: true, errorOnExist: true, force: false, verbatimSymlinks: true })
    else await makeDirs(to)
    await this.flushOrUndo(em, () => rm(to, { recursive: true, force: true }))
    return copy
  }

  async update(em: EntityManager, id: number, changes: TemplateChanges): Promise<Template> {
    const t = await this.get(em, id)
    const oldDir = this.directoryOf(t)
    let moved = false
    if (changes.name !== undefined && changes.name !== t.name) {
      await this.assertNameFree(em, changes.name, t.id)
      t.name = changes.name
      const folder = safeName(changes.name) === t.folder ? t.folder : await this.freeFolder(em, changes.name, t.id)
      if (folder !== t.folder) {
        t.folder = folder
        if (await exists(oldDir)) {
          await rename(oldDir, this.directoryOf(t))
          moved = true
        } else await makeDirs(this.directoryOf(t))
      }
    }
    if (changes.templateType !== undefined) t.templateType = changes.templateType
    if (changes.position !== undefined) t.position = changes.position
    if (changes.substitutionPatterns !== undefined) t.substitutionPatterns = changes.substitutionPatterns
    await this.flushOrUndo(em, async () => {
      if (moved) await rename(this.directoryOf(t), oldDir)
    })
    return t
  }

  async remove(em: EntityManager, id: number, ignoreMissingDirectory: boolean): Promise<Template> {
    const t = await this.get(em, id)
    const dir = this.directoryOf(t)
    if (!(await exists(dir)) && !ignoreMissingDirectory)
      throw conflict(`The folder of template "${t.name}" is missing (${t.folder} in the templates folder); pass ignore_missing_directory=true to delete the template anyway`, {
        errors: [{ param: 'ignore_missing_directory', message: 'must be true to delete a template whose folder is missing' }],
      })
    await em.remove(t).flush()
    await rm(dir, { recursive: true, force: true })
    return t
  }

  private async assertNameFree(em: EntityManager, name: string, exceptId?: number) {
    const other = await em.findOne(Template, { name })
    if (other && other.id !== exceptId) throw conflict(`A template named "${name}" exists already`, { errors: [{ param: 'template[name]', message: 'is taken' }] })
  }

  /** a folder name for `name` that no other template uses and that is free on disk */
  private async freeFolder(em: EntityManager, name: string, exceptId?: number): Promise<string> {
    const base = safeName(name)
    for (let n = 1; ; n++) {
      const folder = n === 1 ? base : `${base} (${n})`
      const owner = await em.findOne(Template, { folder })
      if (owner && owner.id !== exceptId) continue
      if (!owner && (await exists(path.join(this.root, folder)))) continue
      return folder
    }
  }

  /** writes the unit of work; if that fails, undoes the file system change that preceded it */
  private async flushOrUndo(em: EntityManager, undo: () => Promise<unknown>) {
    try {
      await em.flush()
    } catch (err) {
      await undo().catch(() => {})
      if ((err as { name?: string }).name === 'UniqueConstraintViolationException') throw conflict('A template with that name exists already')
      throw err
    }
  }
}
