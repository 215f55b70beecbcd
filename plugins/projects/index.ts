import { asFunction, asValue } from 'awilix'
import { definePlugin } from '../../core/plugin/contract.js'
import type { EntityManager } from '../../core/db/orm.js'
import { mountAccessRightRoutes } from '../identity/access-rights.js'
import { ProjectSchema, Project } from './entities.js'
import { Role } from '../../core/auth/entities.js'
import { migrations } from './migrations.js'
import { ProjectService, PROJECT } from './service.js'
import { ProjectGuards } from './guards.js'
import { registerProjectRoutes } from './routes.js'
import { registerTreeRoutes } from './tree-routes.js'
import { defineProjectJobs } from './jobs.js'
import { registerProjectReport } from './report.js'

export { Project } from './entities.js'
export { ProjectService, PROJECT } from './service.js'
export { ProjectGuards, type ProjectGuard } from './guards.js'
export { ProjectViews, type ProjectDecorator, type ProjectJson } from './views.js'

const exists = async (em: EntityManager, id: number) => (await em.count(Project, { id, deleted: false })) > 0

/** Projects on storage (§4.20): created from templates, folders, libraries, freeze, quotas, trash. */
export const projectsPlugin = definePlugin({
  name: 'projects',
  title: 'Projects',
  version: '1.0.0',
  description: 'Projects on named storages: templates applied, folders, libraries, freeze, quotas and trash',
  dependsOn: ['identity', 'templates'],
  entities: [ProjectSchema],
  migrations,
  capabilities: { 'projects.create': 'Create projects' },
  register(api) {
    api.provide('projects', asFunction((c: any) => new ProjectService(c.storages, c.templates, c.accessRights, c.teams, c.knex)).singleton())
    api.provide('projectGuards', asValue(new ProjectGuards()))
    registerProjectRoutes(api)
    registerTreeRoutes(api)
    registerProjectReport(api)
    defineProjectJobs(api.jobs)
    mountAccessRightRoutes(api, { ...PROJECT, exists })
  },
  async start({ resolve }) {
    // standard users create projects unless an administrator takes the capability away
    const em = resolve<EntityManager>('em')
    const role = await em.findOne(Role, { name: 'User', builtin: true })
    if (role && !('projects.create' in role.roleMatrix)) {
      role.roleMatrix = { ...role.roleMatrix, 'projects.create': true }
      await em.flush()
    }
  },
})
