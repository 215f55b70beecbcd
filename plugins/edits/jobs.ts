import type { JobRegistrar } from '../../core/index.js'
import { projectServices } from '../projects/index.js'
import { editServices } from './refs.js'
import { EditSession } from './entities.js'
import { WORKSPACE_JOB } from './sessions.js'
import { LinkClash, ensureLink, removeLink } from './workspace.js'

export interface WorkspacePayload {
  /** symlink paths to bring in line with the rows that name them */
  links: string[]
}

/**
 * One job type for every mount change. It does not replay what the request asked for: each link
 * is made to match the rows as they are now (any live row: the link exists; none: it is gone), so
 * reruns, retries and jobs that overtake each other all end in the state the database describes.
 * One at a time per process keeps two jobs from working on the same link at once.
 */
export function defineEditJobs(jobs: JobRegistrar) {
  jobs.define<WorkspacePayload>(WORKSPACE_JOB, {
    kind: 'project',
    concurrency: 1,
    maxAttempts: 3,
    async handler(ctx) {
      const projects = ctx.resolve(projectServices.service)
      const mountRoot = ctx.resolve(editServices.service).mountRoot()
      const links = ctx.payload.links ?? []
      const result = { linked: 0, removed: 0, failed: [] as string[] }
      for (const [i, link] of links.entries()) {
        ctx.signal.throwIfAborted()
        const rows = await ctx.em.fork().find(EditSession, { link }, { populate: ['project'] })
        const live = rows.filter((r) => r.state !== 'releasing')
        const ids = rows.map((r) => r.id)
        if (live.length > 0) {
          try {
            await ensureLink(link, projects.pathOf(live[0].project))
          } catch (err) {
            const message = (err as Error).message
            await ctx.em.nativeUpdate(EditSession, { id: { $in: ids }, state: { $ne: 'releasing' } }, { state: 'failed', error: message })
            if (!(err instanceof LinkClash)) throw err // retried: the file system may recover
            result.failed.push(message)
            continue
          }
          // conditional: a request may have released the row meanwhile; its own job follows this one
          await ctx.em.nativeUpdate(EditSession, { id: { $in: ids }, state: { $ne: 'releasing' } }, { state: 'ready', error: null })
          result.linked++
        } else {
          await removeLink(link, mountRoot)
          // conditional: a row revived meanwhile stays; its job puts the link back
          await ctx.em.nativeDelete(EditSession, { id: { $in: ids }, state: 'releasing' })
          result.removed++
        }
        ctx.progress((i + 1) / links.length)
      }
      if (result.failed.length) throw Object.assign(new Error(result.failed.join('; ')), { permanent: true })
      return result
    },
  })
}
