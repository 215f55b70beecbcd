import { IdParams, conflict, User, type RegisterApi, type RouteOptions } from '../../core/index.js'
import { EditSession } from './entities.js'
import { EditRefInput } from './schemas.js'
import { LIVE, accepted, assertNoOtherEdit, editOf, hold, projectsOf, releasable, release, submountsIn, type SignedIn } from './sessions.js'

const options = (summary: string): RouteOptions<typeof IdParams, typeof EditRefInput, 'authenticated'> => ({ access: 'authenticated', params: IdParams, input: EditRefInput, summary })

/**
 * §4.20 open, sync, close, forceclose, mount, umount, refreshmountedproject. Each changes the rows at
 * once (conflicts are 409 here) and answers 202 with the job that makes the file system follow.
 * Opening is mounting for write: it excludes other edits; closing and unmounting both take the mount away.
 */
export function registerSessionRoutes({ routes }: RegisterApi) {
  routes.put('/projects/:id/mount', options("expose a project on an edit's workspace (job)"), async (ctx) => {
    const project = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const edit = await editOf(ctx)
    await assertNoOtherEdit(ctx, project, edit, false)
    const row = await hold(ctx, edit, project, { kind: 'mount' })
    return accepted(ctx, [row.link], project, edit)
  })

  routes.put('/projects/:id/open', options('open a project for write on an edit: mounts it there and keeps other edits out (job)'), async (ctx) => {
    const project = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const edit = await editOf(ctx)
    await assertNoOtherEdit(ctx, project, edit, true)
    project.lastOpenedBy = ctx.em.getReference(User, ctx.user.userId)
    project.lastOpenedByEdit = edit.name
    project.lastUsedAt = new Date()
    const row = await hold(ctx, edit, project, { kind: 'mount', open: true })
    return accepted(ctx, [row.link], project, edit)
  })

  const takeAway = (mustBeOpen: boolean) => async (ctx: SignedIn) => {
    const project = await releasable(ctx, ctx.params.id)
    const edit = await editOf(ctx)
    const row = await ctx.em.findOne(EditSession, { edit, project, kind: 'mount', ...LIVE, ...(mustBeOpen ? { openedAt: { $ne: null } } : {}) })
    if (!row) throw conflict(`Project "${project.name}" is not ${mustBeOpen ? 'open' : 'mounted'} on edit ${edit.name}`)
    return accepted(ctx, await release(ctx, [row, ...(await submountsIn(ctx, edit, [project]))]), project, edit)
  }
  routes.delete('/projects/:id/close', options('close a project on an edit and take its mount away (job)'), takeAway(true))
  routes.delete('/projects/:id/umount', options("take a project off an edit's workspace, closing it there (job)"), takeAway(false))

  routes.delete('/projects/:id/forceclose', options('close and unmount a project on every edit (job); the edit, when named, is recorded on the job'), async (ctx) => {
    const project = await releasable(ctx, ctx.params.id)
    const edit = await editOf(ctx, true)
    const rows = await ctx.em.find(EditSession, { $or: [{ project }, { parent: project }], ...LIVE })
    return accepted(ctx, await release(ctx, rows), project, edit)
  })

  routes.put('/projects/:id/sync', options('save and reload: renews every mount of the project and of its subprojects (job)'), async (ctx) => {
    const project = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const edit = await editOf(ctx)
    if (!(await ctx.em.count(EditSession, { edit, project, kind: 'mount', openedAt: { $ne: null } }))) throw conflict(`Project "${project.name}" is not open on edit ${edit.name}`)
    const rows = await ctx.em.find(EditSession, { $or: [{ project }, { parent: project }], ...LIVE })
    for (const row of rows) Object.assign(row, { state: 'pending', error: null })
    project.lastUsedAt = new Date()
    await ctx.em.flush()
    return accepted(ctx, [...new Set(rows.map((r) => r.link))], project, edit)
  })

  routes.put('/projects/:id/refreshmountedproject', options("renew a project's mount on an edit and the subprojects mounted in it (job)"), async (ctx) => {
    const project = await projectsOf(ctx).writable(ctx.em, ctx.requireUser(), ctx.params.id)
    const edit = await editOf(ctx)
    const row = await ctx.em.findOne(EditSession, { edit, project, kind: 'mount', ...LIVE })
    if (!row) throw conflict(`Project "${project.name}" is not mounted on edit ${edit.name}`)
    const rows = [row, ...(await submountsIn(ctx, edit, [project]))]
    for (const r of rows) Object.assign(r, { state: 'pending', error: null })
    await ctx.em.flush()
    return accepted(ctx, rows.map((r) => r.link), project, edit)
  })
}
