import { IdParams, NoInput, acceptedJob, conflict, coreServices, forbidden, invalidParam, notFound, iso, User, type RegisterApi, type MamContext } from '../../core/index.js'
import { TEMPLATE_TYPES, Template, templateServices } from '../templates/index.js'
import { Team } from '../identity/index.js'
import { copyTemplateTree } from './template-copy.js'
import { createFolder, planMoveContents, planRenameFolder, treeSize } from './folders.js'
import { projectScope } from './moves.js'
import { CreateFolderInput, MoveContentsInput, OptionalQuotaInput, ProjectTeamParams, QuotaInput, RenameFolderInput, TemplateRefInput } from './schemas.js'
import { projectServices } from './refs.js'
import { Project } from './entities.js'

/** §4.20: the project tree (addtemplate, folders), freeze, quotas and size. */
export function registerTreeRoutes({ routes }: RegisterApi) {
  const projects = (ctx: MamContext) => ctx.resolve(projectServices.service)
  const journal = (ctx: MamContext) => ctx.resolve(projectServices.storageJournal)
  const show = async (ctx: MamContext, p: Project) => ({ project: await projects(ctx).one(ctx, p) })
  /** a project the caller may write (403 with read only), frozen or not */
  const writer = async (ctx: MamContext, action: string) => {
    const { project, right } = await projects(ctx).readable(ctx.em, ctx.requireUser(), ctx.params.id)
    if (right === 'read') throw forbidden(`You may read this project but not ${action} it`)
    return project
  }
  /** the row as the conditional update left it */
  const reloaded = async (ctx: MamContext, p: Project) => (await ctx.em.fork().findOneOrFail(Project, p.id, { populate: ['frozenBy', 'createdBy', 'lastOpenedBy'] }))
  /** wrong state, not a write to a frozen project: 409, naming who froze it */
  const alreadyFrozen = (p: Project) =>
    conflict(`Project "${p.name}" is frozen already, by ${p.frozenBy?.username ?? 'a deleted user'} since ${iso(p.frozenAt)}`, {
      frozen_by: p.frozenBy ? { id: p.frozenBy.id, username: p.frozenBy.username } : null,
      frozen_at: iso(p.frozenAt),
    })

  routes.put('/projects/:id/addtemplate', { access: 'authenticated', params: IdParams, input: TemplateRefInput, summary: "merge another template's tree into a project without overwriting files" }, async (ctx) => {
    const s = projects(ctx)
    const project = await s.writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const { template_id, templatename } = ctx.input
    if (template_id === undefined && templatename === undefined) throw invalidParam('template_id', 'or templatename is required')
    const template = template_id !== undefined ? await ctx.em.findOne(Template, template_id) : await ctx.em.findOne(Template, { name: templatename })
    if (!template) throw invalidParam(template_id !== undefined ? 'template_id' : 'templatename', 'is not a known template')
    const user = await ctx.em.findOneOrFail(User, ctx.user.userId)
    const source = ctx.resolve(templateServices.service).directoryOf(template)
    // the template's size bounds what the merge adds (507 before anything is written)
    await s.assertSpace(ctx.em, project, await treeSize(source))
    // not beside a rename of the project or a move of its folders: the copy goes where the folder is now
    const added = await journal(ctx).hold(projectScope(project.id), {}, async () => copyTemplateTree(source, await s.currentRoot(project.id), {
      patterns: template.substitutionPatterns,
      context: { projectName: project.name, userName: user.username, date: new Date() },
      type: TEMPLATE_TYPES.find((t) => t.id === template.templateType) ?? TEMPLATE_TYPES[0],
      overwrite: false,
      param: template_id !== undefined ? 'template_id' : 'templatename',
    }).catch((err) => {
      if (err.code === 'ENOENT') throw notFound('folder of template', template.id)
      throw err
    }))
    // an increment, not the entity's total: uploads running beside it add to the same size
    await s.addSize(project, added)
    await s.refreshTeamSpace(project.id)
    return show(ctx, project)
  })

  routes.put('/projects/:id/create_folder', { access: 'authenticated', params: IdParams, input: CreateFolderInput, summary: 'create a folder in a project' }, async (ctx) => {
    const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    // not inside a folder that is being moved, nor while the project's folder is renamed
    await journal(ctx).hold(projectScope(project.id), {}, async () => createFolder(await projects(ctx).currentRoot(project.id), ctx.input.path))
    return show(ctx, project)
  })

  routes.put('/projects/:id/rename_folder', { access: 'authenticated', params: IdParams, input: RenameFolderInput, summary: 'rename a folder in a project' }, async (ctx) => {
    const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    await ctx.resolve(projectServices.moves).move(project, async (root) => [await planRenameFolder(root, ctx.input.path, ctx.input.name)])
    return show(ctx, project)
  })

  routes.put('/projects/:id/move_contents', { access: 'authenticated', params: IdParams, input: MoveContentsInput, summary: 'move files and folders into another folder' }, async (ctx) => {
    const project = await projects(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const sources = Array.isArray(ctx.input.source) ? ctx.input.source : [ctx.input.source]
    await ctx.resolve(projectServices.moves).move(project, (root) => planMoveContents(root, sources, ctx.input.destination))
    return show(ctx, project)
  })

  // freeze and unfreeze change the state only if it is still what was checked: of two racing calls one wins, the other is a 409
  routes.put('/projects/:id/freeze', { access: 'authenticated', params: IdParams, summary: 'freeze a project: every write is refused (423) until unfrozen' }, async (ctx) => {
    const project = await writer(ctx, 'freeze')
    const changed = await ctx.em.nativeUpdate(Project, { id: project.id, frozenAt: null }, { frozenAt: new Date(), frozenBy: ctx.user.userId })
    if (!changed) throw alreadyFrozen(await reloaded(ctx, project))
    return show(ctx, await reloaded(ctx, project))
  })

  routes.delete('/projects/:id/unfreeze', { access: 'authenticated', params: IdParams, summary: 'unfreeze a project (who froze it, or an administrator)' }, async (ctx) => {
    const { project, right } = await projects(ctx).readable(ctx.em, ctx.requireUser(), ctx.params.id)
    if (!project.frozenAt) throw conflict(`Project "${project.name}" is not frozen`)
    if (right !== 'admin' && project.frozenBy?.id !== ctx.user.userId) throw forbidden(`Only ${project.frozenBy?.username ?? 'an administrator'} or an administrator can unfreeze this project`)
    const changed = await ctx.em.nativeUpdate(Project, { id: project.id, frozenAt: { $ne: null }, frozenBy: project.frozenBy?.id ?? null }, { frozenAt: null, frozenBy: null })
    if (!changed) throw conflict(`Project "${project.name}" was unfrozen or frozen again meanwhile; look at it again`)
    return show(ctx, await reloaded(ctx, project))
  })

  routes.put('/projects/:id/quota', { access: 'admin', params: IdParams, input: QuotaInput, summary: "set a project's quota in bytes (null: none)" }, async (ctx) => {
    const { project } = await projects(ctx).readable(ctx.em, ctx.requireUser(), ctx.params.id)
    project.quota = ctx.input.quota
    await ctx.em.flush()
    return show(ctx, project)
  })

  const teamQuota = (reset: boolean) => async (ctx: MamContext) => {
    const { project } = await projects(ctx).readable(ctx.em, ctx.requireUser(), ctx.params.id)
    const team = await ctx.em.findOne(Team, ctx.params.team_id)
    if (!team) throw notFound('team', ctx.params.team_id)
    if (!reset && ctx.input.quota === undefined) throw invalidParam('quota', 'is required')
    team.quota = reset ? null : ctx.input.quota
    team.quotaMailSent = false
    await ctx.em.flush()
    return { project: await projects(ctx).one(ctx, project), team: { id: team.id, name: team.name, quota: team.quota, space_used: team.spaceUsed } }
  }
  routes.put('/projects/:id/quota_team/:team_id', { access: 'admin', params: ProjectTeamParams, input: OptionalQuotaInput, summary: "set the quota of a team that works on the project" }, teamQuota(false))
  routes.delete('/projects/:id/quota_team/:team_id', { access: 'admin', params: ProjectTeamParams, summary: "remove a team's quota" }, teamQuota(true))

  // writes the project's size and its teams' space_used, so it needs write; a frozen project may be measured (its tree does not change)
  routes.put('/projects/:id/calculate_size', { access: 'authenticated', params: IdParams, input: NoInput, summary: 'measure the project tree (job; needs write access)' }, async (ctx) => {
    const project = await writer(ctx, 'measure')
    return acceptedJob(ctx, await ctx.resolve(coreServices.jobs).enqueue('projects.calculate-size', { projectId: project.id }, { userId: ctx.user.userId, projectId: project.id }))
  })
}
