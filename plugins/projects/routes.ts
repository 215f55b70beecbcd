import path from 'node:path'
import { IdParams, acceptedJob, andThen, coreServices, jsonText, invalidParam, notFound, safeName, type RegisterApi, type MamContext, type Principal } from '../../core/index.js'
import { identityServices } from '../identity/index.js'
import { Project } from './entities.js'
import { EncodingPriorityInput, ListInput, ProjectInput, RenameInput } from './schemas.js'
import { PROJECT, TRASH_DIR, type NewProject } from './service.js'
import { projectServices } from './refs.js'

/** `name` … at the top level or under `project[...]` */
const fieldsOf = (input: Record<string, any>) => ({ ...input, ...(input.project ?? {}) })

const newProject = (f: Record<string, any>): NewProject => ({
  name: f.name,
  templateId: f.template_id,
  templateName: f.templatename,
  storage: f.storage,
  customMetadata: f.custom_metadata,
  isLibraryProject: f.is_library_project,
  description: f.description,
  alternativeName: f.alternative_name,
})

/** §4.20: list, search, show, create, validate, update, delete, rename, libraries, trash. */
export function registerProjectRoutes({ routes }: RegisterApi) {
  const projects = (ctx: MamContext) => ctx.resolve(projectServices.service)
  const guards = (ctx: MamContext) => ctx.resolve(projectServices.guards)
  const relocation = (ctx: MamContext) => ctx.resolve(projectServices.relocation)

  // plain rows from prepared statements, the access filter in the same query: no entity hydration (PERFORMANCE.md)
  const list = (ctx: MamContext<any, any, Principal>) => {
    const { page = 1, per_page = 100, name, library, frozen, storage, archived, online } = ctx.input
    // archiving arrives with the strategies plugin; until then no project is archived
    if (archived === true) return { projects: [] }
    // the page's JSON written as text (listPageJson); synchronous while SQLite's connection is free
    return andThen(projects(ctx).listPageJson(ctx, ctx.user, { name, library, online, frozen, storage, page, perPage: per_page }), ({ total, body }) => {
      ctx.set('X-Total-Count', String(total))
      return jsonText(body)
    })
  }
  routes.get('/projects', { access: 'authenticated', input: ListInput, summary: 'list projects (filters: name, library, frozen, online, archived, storage; paginated)' }, list)
  routes.get('/projects/search', { access: 'authenticated', input: ListInput, summary: 'search projects by a substring of name' }, list)

  // synchronous while SQLite's connection is free and no decorator waits (PreparedRead.now)
  routes.get('/projects/:id', { access: 'authenticated', params: IdParams, summary: 'show a project' }, (ctx) =>
    andThen(
      andThen(projects(ctx).readableView(ctx.requireUser(), ctx.params.id), (view) => projects(ctx).one(ctx, view)),
      (project) => ({ project }),
    ),
  )

  routes.post('/projects', { access: 'projects.create', input: ProjectInput, summary: 'create a project from a template' }, async (ctx) => {
    const project = await projects(ctx).create(ctx, newProject(fieldsOf(ctx.input)))
    ctx.status = 201
    return { project: await projects(ctx).one(ctx, project) }
  })

  routes.post('/projects/validate', { access: 'projects.create', input: ProjectInput, summary: 'check project attributes without creating anything' }, async (ctx) => {
    const checked = await projects(ctx).check(ctx.em, newProject(fieldsOf(ctx.input)))
    return { hash: { valid: true, name: checked.name, storage: checked.storage, folder: checked.folder, template_id: checked.template?.id ?? null } }
  })

  routes.put('/projects/:id', { access: 'authenticated', params: IdParams, input: ProjectInput, summary: 'update a project' }, async (ctx) => {
    const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const f = fieldsOf(ctx.input)
    if (f.name !== undefined && f.name !== project.name) throw invalidParam('name', 'changes through PUT /projects/:id/rename, which moves the folder')
    for (const key of ['storage', 'template_id', 'templatename'] as const) if (f[key] !== undefined) throw invalidParam(key, 'cannot change after creation')
    if (f.description !== undefined) project.description = f.description
    if (f.alternative_name !== undefined) project.alternativeName = f.alternative_name
    if (f.custom_metadata !== undefined) project.customMetadata = { ...project.customMetadata, ...f.custom_metadata }
    if (f.is_library_project !== undefined) project.isLibraryProject = f.is_library_project
    if (f.encoding_priority !== undefined) project.encodingPriority = f.encoding_priority
    await ctx.em.flush()
    if (f.encoding_priority !== undefined) await ctx.resolve(coreServices.jobs).reprioritise([project.id], f.encoding_priority)
    return { project: await projects(ctx).one(ctx, project) }
  })

  routes.delete('/projects/:id', { access: 'authenticated', params: IdParams, summary: 'move a project into the trash' }, async (ctx) => {
    const s = projects(ctx)
    const project = await s.writable(ctx.em, ctx.requireUser(), ctx.params.id)
    await guards(ctx).check(ctx.em, project, 'delete')
    // a folder that vanished from storage does not block deletion
    await relocation(ctx).trash(project, path.posix.join(TRASH_DIR, project.uuid))
    await s.refreshTeamSpace(project.id)
    return { project: await s.one(ctx, project) }
  })

  routes.delete('/trash', { access: 'admin', summary: 'enqueue the purge of deleted projects' }, async (ctx) => {
    return acceptedJob(ctx, await ctx.resolve(coreServices.jobs).enqueue('projects.purge-trash', {}, { userId: ctx.user.userId }))
  })

  routes.put('/projects/:id/rename', { access: 'authenticated', params: IdParams, input: RenameInput, summary: 'rename a project and move its folder' }, async (ctx) => {
    const s = projects(ctx)
    const project = await s.writable(ctx.em, ctx.requireUser(), ctx.params.id)
    await guards(ctx).check(ctx.em, project, 'rename')
    const name = ctx.input.name.normalize('NFC').trim()
    const folder = safeName(name)
    if (folder !== project.folder) {
      const checked = await s.check(ctx.em, { name, storage: project.storage })
      await relocation(ctx).rename(project, checked.folder, name)
    } else {
      project.name = name
      await ctx.em.flush()
    }
    return { project: await s.one(ctx, project) }
  })

  routes.delete('/projects/:id/delete_description', { access: 'authenticated', params: IdParams, summary: "clear a project's description" }, async (ctx) => {
    const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    project.description = null
    await ctx.em.flush()
    return { project: await projects(ctx).one(ctx, project) }
  })

  routes.put('/projects/:id/flag_as_project', { access: 'authenticated', params: IdParams, summary: 'turn a library project back into an online project' }, async (ctx) => {
    const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    if (!project.isLibraryProject) throw invalidParam('id', 'is not a library project')
    project.isLibraryProject = false
    await ctx.em.flush()
    return { project: await projects(ctx).one(ctx, project) }
  })

  routes.post('/projects/encoding_priority', { access: 'authenticated', input: EncodingPriorityInput, summary: 'set encoding_priority for many projects or libraries' }, async (ctx) => {
    const ids: number[] = [...new Set<number>(ctx.input.project_ids)]
    const found = await ctx.em.find(Project, { id: { $in: ids }, deleted: false })
    const missing = ids.filter((id) => !found.some((p) => p.id === id))
    if (missing.length) throw notFound('project', missing.join(', '))
    for (const p of found) await projects(ctx).writable(ctx.em, ctx.requireUser(), p.id)
    for (const p of found) p.encodingPriority = ctx.input.encoding_priority
    await ctx.em.flush()
    // work already waiting follows the new priority, not only work queued from now on
    await ctx.resolve(coreServices.jobs).reprioritise(ids, ctx.input.encoding_priority)
    return { projects: await projects(ctx).render(ctx, found) }
  })

  routes.get('/total_project_size', { access: 'authenticated', summary: 'total size in bytes of all projects (those you can read)' }, async (ctx) => {
    const knex = ctx.resolve(coreServices.knex)
    let q = knex('projects').where({ deleted: false })
    if (!ctx.user.isAdmin) q = q.whereIn('id', ctx.resolve(identityServices.accessRights).readableIds(ctx.user, PROJECT.type))
    const [{ total, count }] = await q.sum({ total: 'size' }).count({ count: '*' })
    return { hash: { total_project_size: Number(total ?? 0), projects: Number(count) } }
  })
}

