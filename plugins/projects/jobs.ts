import { rm } from 'node:fs/promises'
import path from 'node:path'
import { coreServices, type JobRegistrar } from '../../core/index.js'
import { identityServices } from '../identity/index.js'
import { Project } from './entities.js'
import { PROJECT, TRASH_DIR } from './service.js'
import { projectServices } from './refs.js'
import { treeSize } from './folders.js'

export function defineProjectJobs(jobs: JobRegistrar) {
  jobs.define<{ projectId: number }>('projects.calculate-size', {
    kind: 'project',
    concurrency: 2,
    async handler(ctx) {
      const project = await ctx.em.findOne(Project, { id: ctx.payload.projectId, deleted: false })
      if (!project) return { skipped: 'project deleted' }
      const projects = ctx.resolve(projectServices.service)
      project.size = await treeSize(projects.pathOf(project))
      project.sizeCalculatedAt = new Date()
      await ctx.em.flush()
      await projects.refreshTeamSpace(project.id)
      return { size: project.size }
    },
  })

  // idempotent: a rerun after a crash finds fewer rows and folders, never more work than left
  jobs.define('projects.purge-trash', {
    kind: 'generic',
    concurrency: 1,
    async handler(ctx) {
      const storages = ctx.resolve(coreServices.storages)
      const rights = ctx.resolve(identityServices.accessRights)
      const deleted = await ctx.em.find(Project, { deleted: true }, { limit: 10_000 })
      let purged = 0
      for (const project of deleted) {
        if (ctx.signal.aborted) break
        if (project.folder.startsWith(`${TRASH_DIR}/`)) await rm(path.join(storages.get(project.storage).root, project.folder), { recursive: true, force: true })
        await rights.forget(ctx.em, PROJECT.type, project.id)
        await ctx.em.remove(project).flush()
        ctx.progress(++purged / deleted.length)
      }
      return { purged }
    },
  })
}
