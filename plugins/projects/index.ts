import { asFunction, asValue } from 'awilix'
import { projectEvents } from './events.js'
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
import { PathMoveHooks } from './path-moves.js'
import { ProjectMoves } from './moves.js'
import { ProjectRelocation } from './relocation.js'
import { CREATE_KIND, repairCreation } from './creation.js'
import { StorageJournal } from '../../core/storage/journal.js'
import type { MamConfig } from '../../core/config.js'
import type { Database } from '../../core/db/orm.js'
import type { Logger } from 'pino'

export { Project } from './entities.js'
export { ProjectService, PROJECT } from './service.js'
export { ProjectGuards, type ProjectGuard } from './guards.js'
export { PathMoveHooks, type PathMove, type PathMoveHook } from './path-moves.js'
export { projectScope } from './moves.js'
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
  events: projectEvents,
  capabilities: { 'projects.create': 'Create projects' },
  register(api) {
    api.provide('projects', asFunction((c: any) => new ProjectService(c.storages, c.templates, c.accessRights, c.teams, c.knex, c.storageJournal, c.outbox)).singleton())
    api.provide('projectGuards', asValue(new ProjectGuards()))
    api.provide('pathMoveHooks', asValue(new PathMoveHooks()))
    // the journal of file operations that must end together with rows (moves here, uploads in assets)
    api.provide(
      'storageJournal',
      asFunction(({ db, config, log }: { db: Database; config: MamConfig; log: Logger }) => new StorageJournal(db.knex, db.dialect, config.jobs.leaseMs, log))
        .singleton()
        .disposer((journal) => journal.close()),
    )
    api.provide('projectMoves', asFunction((c: any) => new ProjectMoves(c.knex, c.storageJournal, c.pathMoveHooks, c.projects)).singleton())
    api.provide('projectRelocation', asFunction((c: any) => new ProjectRelocation(c.knex, c.storageJournal, c.storages)).singleton())
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
    resolve<ProjectMoves>('projectMoves').defineRepair()
    resolve<ProjectRelocation>('projectRelocation').defineRepair()
    const journal = resolve<StorageJournal>('storageJournal')
    journal.define(CREATE_KIND, repairCreation(resolve('knex'), resolve('storages'), journal))
  },
  async started({ resolve }) {
    // after every plugin's start, so the hooks of the plugins whose rows follow moves are in place
    const journal = resolve<StorageJournal>('storageJournal')
    await journal.reconcile()
    journal.startSweeping()
  },
})
