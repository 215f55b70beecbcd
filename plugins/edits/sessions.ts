import path from 'node:path'
import { UniqueConstraintViolationException } from '@mikro-orm/core'
import { acceptedJob, coreServices, iso, conflict, forbidden, User, type MamContext, type Principal } from '../../core/index.js'
import { projectServices, type Project } from '../projects/index.js'
import { EditSession, type Edit, type SessionKind } from './entities.js'
import { editServices } from './refs.js'
import { editFolder } from './workspace.js'

/** the context of a route someone must be signed in for (every route of this plugin) */
export type SignedIn = MamContext<any, any, Principal>

/**
 * Open and mount state as rows (what is wanted) plus one job that makes the file system follow
 * (jobs.ts). Requests only change rows, so conflicts are decided in the database at once.
 */
export const WORKSPACE_JOB = 'edits.workspace'
export const LIVE = { state: { $ne: 'releasing' } } as const

export const projectsOf = (ctx: MamContext) => ctx.resolve(projectServices.service)
const me = (ctx: SignedIn) => ctx.em.getReference(User, ctx.user.userId)

export function editOf(ctx: MamContext): Promise<Edit>
export function editOf(ctx: MamContext, optional: true): Promise<Edit | null>
export function editOf(ctx: MamContext, optional = false) {
  return ctx.resolve(editServices.service).fromRequest(ctx, optional)
}

/** releasing someone's hold needs the write right, but works on frozen projects: nobody stays locked in */
export async function releasable(ctx: MamContext, id: number): Promise<Project> {
  const { project, right } = await projectsOf(ctx).readable(ctx.em, ctx.requireUser(), id)
  if (right === 'read') throw forbidden('You may read this project but not close or unmount it')
  return project
}

export const mountLink = (ctx: MamContext, edit: Edit, project: Project) => path.join(editFolder(ctx.resolve(editServices.service).mountRoot(), edit.name), project.folder)

/**
 * 409 when another edit holds the project: opened for write there (`forWrite` false: mounting), or
 * exposed there at all (`forWrite` true: opening for write excludes every other edit).
 */
export async function assertNoOtherEdit(ctx: MamContext, project: Project, edit: Edit, forWrite: boolean): Promise<void> {
  const where: Record<string, unknown> = { project, edit: { $ne: edit.id }, ...LIVE }
  if (!forWrite) where.openedAt = { $ne: null }
  const others = await ctx.em.find(EditSession, where, { populate: ['edit'] })
  if (others.length === 0) return
  const names = [...new Set(others.map((o) => o.edit.name))]
  const how = others.some((o) => o.openedAt) ? 'open for write' : 'mounted'
  throw conflict(`Project "${project.name}" is ${how} on edit ${names.join(', ')}; close it there or force-close it first`, { edits: names })
}

/** records that `project` is (or stays) exposed on `edit`; revives a row that is being released */
export async function hold(ctx: SignedIn, edit: Edit, project: Project, options: { kind: SessionKind; parent?: Project; open?: boolean }): Promise<EditSession> {
  const em = ctx.em
  const link = options.parent ? path.join(projectsOf(ctx).pathOf(options.parent), project.folder) : mountLink(ctx, edit, project)
  const now = new Date()
  let row = await em.findOne(EditSession, { edit, project, kind: options.kind })
  if (!row) row = em.create(EditSession, { edit, project, kind: options.kind, link, state: 'pending', mountedBy: me(ctx), mountedAt: now })
  else if (row.state === 'releasing') Object.assign(row, { mountedBy: me(ctx), mountedAt: now })
  Object.assign(row, { link, parent: options.parent ?? null, state: 'pending', error: null })
  if (options.open) Object.assign(row, { openedBy: me(ctx), openedAt: now })
  try {
    await em.flush()
  } catch (err) {
    // two requests raced past the checks; the partial unique index let one of them win
    if (err instanceof UniqueConstraintViolationException) throw conflict(`Project "${project.name}" was just taken by another request; try again`)
    throw err
  }
  return row
}

/** marks rows for release and returns the links the job must remove (unless another row still needs them) */
export async function release(ctx: MamContext, rows: EditSession[]): Promise<string[]> {
  for (const row of rows) Object.assign(row, { state: 'releasing', openedAt: null, openedBy: null, error: null })
  await ctx.em.flush()
  return [...new Set(rows.map((r) => r.link))]
}

/** the subproject links an edit has inside these projects' trees: they go when the parent goes */
export async function submountsIn(ctx: MamContext, edit: Edit, parents: Project[]): Promise<EditSession[]> {
  if (parents.length === 0) return []
  return ctx.em.find(EditSession, { edit, kind: 'subproject', parent: { $in: parents.map((p) => p.id) }, ...LIVE })
}

/** enqueues the job that brings `links` in line with the rows: 202 {job} */
export async function accepted(ctx: SignedIn, links: string[], project: Project | null, edit: Edit | null) {
  return acceptedJob(ctx, await ctx.resolve(coreServices.jobs).enqueue(WORKSPACE_JOB, { links }, { userId: ctx.user.userId, projectId: project?.id ?? null, editId: edit?.id ?? null }))
}

/**
 * A project as the edit sees it: the project's fields plus where and how it is exposed. `mount_path`
 * is the link's absolute path for administrators, for others its path inside the edit's share
 * (`Feature`, a subproject `Feature/Teaser`): absolute server paths are for administrators (SECURITY.md).
 * Needs `project` and `parent` populated.
 */
export function sessionView(ctx: MamContext, row: EditSession) {
  return {
    ...projectsOf(ctx).serialize(row.project, ctx.user),
    mount_kind: row.kind,
    mount_path: ctx.user?.isAdmin ? row.link : row.parent ? `${row.parent.folder}/${row.project.folder}` : row.project.folder,
    mount_state: row.state,
    mount_error: row.error,
    mounted_in: row.parent?.id ?? null,
    mounted_by: row.mountedBy?.id ?? null,
    mounted_at: iso(row.mountedAt),
    locked_by: row.openedBy?.id ?? null,
    opened_at: iso(row.openedAt),
  }
}
