import { IdParams, coreServices, invalid, serializeJob, type RegisterApi, type MamContext, type ParamError, type JobState } from '../../core/index.js'
import { identityServices, type Right } from '../identity/index.js'
import { PROJECT } from '../projects/index.js'
import { Edit, EditSession } from './entities.js'
import { EditInput, EditListInput, EditRefInput } from './schemas.js'
import { editServices } from './refs.js'
import { LIVE, WORKSPACE_JOB, accepted, editOf, release, sessionView, submountsIn, type SignedIn } from './sessions.js'

/** jobs listed by /edit/status, newest first; the jobs table grows without bound */
const STATUS_JOBS = 50
const UNFINISHED: JobState[] = ['queued', 'running']

/** the edit's fields at the top level or under `edit`, and the name each was sent under */
function fieldsOf(input: Record<string, any>) {
  const nested = input.edit ?? {}
  const fields = { ...input, ...nested }
  const param = (key: string) => (key in nested ? `edit[${key}]` : key)
  return { fields, param }
}

/** §4.12: edit workstations (admins register them) and the state of the calling edit. */
export function registerEditRoutes({ routes }: RegisterApi) {
  const service = (ctx: MamContext) => ctx.resolve(editServices.service)

  routes.get('/edits', { access: 'authenticated', input: EditListInput, summary: 'list registered edits' }, async (ctx) => {
    const { page = 1, per_page = 100 } = ctx.input
    const [rows, total] = await ctx.em.findAndCount(Edit, {}, { orderBy: { name: 'asc' }, limit: per_page, offset: (page - 1) * per_page })
    ctx.set('X-Total-Count', String(total))
    return { edits: rows.map((e) => service(ctx).serialize(e)) }
  })

  routes.get('/edits/:id', { access: 'authenticated', params: IdParams, summary: 'show an edit' }, async (ctx) => ({
    edit: service(ctx).serialize(await service(ctx).byId(ctx.em, ctx.params.id)),
  }))

  routes.post('/edits', { access: 'admin', input: EditInput, summary: 'register an edit with its SMB password' }, async (ctx) => {
    const { fields } = fieldsOf(ctx.input)
    const errors: ParamError[] = []
    if (fields.name === undefined) errors.push({ param: 'edit[name]', message: 'is required' })
    if (fields.password === undefined) errors.push({ param: 'edit[password]', message: 'is required' })
    if (errors.length) throw invalid(errors)
    const edit = await service(ctx).create(ctx.em, { ...fields, comment: fields.comment || null })
    ctx.status = 201
    return { edit: service(ctx).serialize(edit) }
  })

  routes.put('/edits/:id', { access: 'admin', params: IdParams, input: EditInput, summary: 'change the comment of an edit (name and password cannot change)' }, async (ctx) => {
    const edit = await service(ctx).byId(ctx.em, ctx.params.id)
    const { fields, param } = fieldsOf(ctx.input)
    const errors: ParamError[] = []
    // the name is the workstation's folder and its X-APP-EDIT value; the password seals to it
    if (fields.name !== undefined && fields.name !== edit.name) errors.push({ param: param('name'), message: 'cannot be changed; register a new edit instead' })
    if (fields.password !== undefined) errors.push({ param: param('password'), message: 'cannot be changed; register a new edit instead' })
    if (errors.length) throw invalid(errors)
    if (fields.comment !== undefined) edit.comment = fields.comment || null
    await ctx.em.flush()
    return { edit: service(ctx).serialize(edit) }
  })

  routes.delete('/edits/:id', { access: 'admin', params: IdParams, summary: "delete an edit; its mounts are taken away (job)" }, async (ctx) => {
    const edit = await service(ctx).byId(ctx.em, ctx.params.id)
    const links = [...new Set((await ctx.em.find(EditSession, { edit })).map((r) => r.link))]
    const json = service(ctx).serialize(edit)
    await ctx.em.remove(edit).flush()
    // the rows went with the edit (cascade); with no row left for them, the job removes the links
    await ctx.resolve(coreServices.jobs).enqueue(WORKSPACE_JOB, { links }, { userId: ctx.user.userId, editId: json.id })
    return { edit: json }
  })

  routes.put('/edits/:id/unlock', { access: 'admin', params: IdParams, summary: "close every project of an edit, clear its mounts and cancel its unfinished jobs" }, async (ctx) => {
    const edit = await service(ctx).byId(ctx.em, ctx.params.id)
    const jobs = ctx.resolve(coreServices.jobs)
    const unfinished = await jobs.list({ edit_id: edit.id, state: UNFINISHED }, 10_000)
    for (const { id } of unfinished) await jobs.cancel(id)
    const links = await release(ctx, await ctx.em.find(EditSession, { edit, ...LIVE }))
    await jobs.enqueue(WORKSPACE_JOB, { links }, { userId: ctx.user.userId, editId: edit.id })
    return { edit: service(ctx).serialize(edit) }
  })

  routes.get('/edit/status', { access: 'authenticated', input: EditRefInput, summary: 'projects open and mounted on the calling edit (X-APP-EDIT), and its jobs' }, async (ctx) => {
    const edit = await editOf(ctx)
    const all = await ctx.em.find(EditSession, { edit, ...LIVE }, { populate: ['project', 'parent'], orderBy: { id: 'asc' } })
    const rows = await withRight(ctx, all, (right) => right !== 'none')
    const jobs = await ctx.resolve(coreServices.jobs).list({ edit_id: edit.id, user_id: ctx.user.isAdmin ? undefined : ctx.user.userId }, STATUS_JOBS)
    return {
      hash: {
        edit: service(ctx).serialize(edit),
        projects_open: rows.filter((r) => r.openedAt).map((r) => sessionView(ctx, r)),
        projects_mounted: rows.map((r) => sessionView(ctx, r)),
        jobs: jobs.map(serializeJob),
      },
    }
  })

  routes.put('/edit/clear', { access: 'authenticated', input: EditRefInput, summary: 'close and unmount everything of the calling edit that you may write (job)' }, async (ctx) => {
    const edit = await editOf(ctx)
    const all = await ctx.em.find(EditSession, { edit, ...LIVE }, { populate: ['project'] })
    const rows = await withRight(ctx, all, (right) => right === 'write')
    const parents = rows.filter((r) => r.kind === 'mount').map((r) => r.project)
    const subs = (await submountsIn(ctx, edit, parents)).filter((s) => !rows.includes(s))
    return accepted(ctx, await release(ctx, [...rows, ...subs]), null, edit)
  })
}

/** rows whose project gives the caller a right `ok` accepts; administrators see all (API1) */
async function withRight(ctx: SignedIn, rows: EditSession[], ok: (right: Right) => boolean) {
  if (ctx.user.isAdmin) return rows
  const rights = ctx.resolve(identityServices.accessRights)
  const out: EditSession[] = []
  for (const row of rows) if (ok(await rights.rightOf(ctx.user, PROJECT.type, row.project.id))) out.push(row)
  return out
}
