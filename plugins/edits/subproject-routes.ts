import path from 'node:path'
import { IdParams, conflict, invalidParam, type RegisterApi, type RouteOptions, type MamContext } from '../../core/index.js'
import { Project } from '../projects/index.js'
import { EditSession } from './entities.js'
import { SubprojectInput } from './schemas.js'
import { LIVE, accepted, assertNoOtherEdit, editOf, hold, projectsOf, releasable, release } from './sessions.js'
import { linkSpotFree } from './workspace.js'

const options = (summary: string): RouteOptions<typeof IdParams, typeof SubprojectInput, 'authenticated'> => ({ access: 'authenticated', params: IdParams, input: SubprojectInput, summary })
/** parent chains are short; the bound only stops a corrupt chain from looping */
const MAX_DEPTH = 1000

/** the `subproject_id` project, writable, and not the parent itself */
async function subprojectOf(ctx: MamContext, parent: Project): Promise<Project> {
  if (ctx.input.subproject_id === parent.id) throw invalidParam('subproject_id', 'is the project itself')
  return projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.input.subproject_id)
}

function assertChild(parent: Project, sub: Project) {
  if (sub.parent?.id !== parent.id) throw invalidParam('subproject_id', `is not a subproject of project ${parent.id}; add it with addsubproject first`)
}

/** §4.20 addsubproject, removesubproject (Project.parent) and mountsubproject, umountsubproject (a link in the parent's tree). */
export function registerSubprojectRoutes({ routes }: RegisterApi) {
  const show = async (ctx: MamContext, p: Project) => ({ project: await projectsOf(ctx).one(ctx, p) })

  routes.put('/projects/:id/addsubproject', options('make another project a subproject of this one'), async (ctx) => {
    const parent = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const sub = await subprojectOf(ctx, parent)
    if (sub.parent && sub.parent.id !== parent.id) throw conflict(`Project "${sub.name}" is a subproject of project ${sub.parent.id} already; remove it there first`)
    let ancestor = parent.parent?.id
    for (let depth = 0; ancestor !== undefined && depth < MAX_DEPTH; depth++) {
      if (ancestor === sub.id) throw invalidParam('subproject_id', `contains project ${parent.id} already: that would make a cycle`)
      ancestor = (await ctx.em.findOne(Project, ancestor))?.parent?.id
    }
    sub.parent = parent
    await ctx.em.flush()
    return show(ctx, sub)
  })

  routes.delete('/projects/:id/removesubproject', options('detach a subproject from this project'), async (ctx) => {
    const parent = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const sub = await subprojectOf(ctx, parent)
    assertChild(parent, sub)
    const mounted = await ctx.em.find(EditSession, { project: sub, parent }, { populate: ['edit'] })
    if (mounted.length) throw conflict(`Project "${sub.name}" is mounted inside "${parent.name}" on edit ${[...new Set(mounted.map((m) => m.edit.name))].join(', ')}; unmount it first`)
    sub.parent = null
    await ctx.em.flush()
    return show(ctx, sub)
  })

  routes.put('/projects/:id/mountsubproject', options("expose a subproject inside its parent's mount on an edit (job)"), async (ctx) => {
    const parent = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const sub = await subprojectOf(ctx, parent)
    assertChild(parent, sub)
    const edit = await editOf(ctx)
    if (!(await ctx.em.count(EditSession, { edit, project: parent, kind: 'mount', ...LIVE }))) throw conflict(`Mount project "${parent.name}" on edit ${edit.name} first`)
    await assertNoOtherEdit(ctx, sub, edit, false)
    if (!(await linkSpotFree(path.join(projectsOf(ctx).pathOf(parent), sub.folder))))
      throw conflict(`"${sub.folder}" exists in project "${parent.name}" and is not a mount; rename it first`)
    const row = await hold(ctx, edit, sub, { kind: 'subproject', parent })
    return accepted(ctx, [row.link], parent, edit)
  })

  routes.delete('/projects/:id/umountsubproject', options("take a subproject out of its parent's mount on an edit (job)"), async (ctx) => {
    const parent = await releasable(ctx, ctx.params.id)
    if (ctx.input.subproject_id === parent.id) throw invalidParam('subproject_id', 'is the project itself')
    const { project: sub } = await projectsOf(ctx).readable(ctx.em, ctx.requireUser(), ctx.input.subproject_id)
    const edit = await editOf(ctx)
    const row = await ctx.em.findOne(EditSession, { edit, project: sub, kind: 'subproject', parent, ...LIVE })
    if (!row) throw conflict(`Project "${sub.name}" is not mounted inside "${parent.name}" on edit ${edit.name}`)
    return accepted(ctx, await release(ctx, [row]), parent, edit)
  })
}
