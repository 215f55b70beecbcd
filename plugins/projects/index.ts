import { projectEvents } from './events.js'
import { definePlugin, aliasOf, coreServices, Role, StorageJournal } from '../../core/index.js'
import { identityServices } from '../identity/refs.js'
import { templateServices } from '../templates/refs.js'
import { projectServices } from './refs.js'
import { mountAccessRightRoutes } from '../identity/index.js'
import { ProjectSchema } from './entities.js'
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

export { Project } from './entities.js'
export { projectServices } from './refs.js'
export type { NewProject } from './service.js'
export { ProjectService, PROJECT, READABLE_BY_USER, PROJECT_COLUMNS, projectViewOfRow, type ProjectView } from './service.js'
export { ProjectGuards, type ProjectGuard, type GuardedAction } from './guards.js'
export { PathMoveHooks, type PathMove, type PathMoveHook } from './path-moves.js'
export { projectScope } from './moves.js'
export { ProjectViews, type ProjectDecorator, type ProjectFields, type ProjectJson } from './views.js'
export { ProjectCreateHooks, type ProjectCreateHook } from './create-hooks.js'
export { SpaceLimits, type SpaceLimit } from './space-limits.js'

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
    const { service, guards, pathMoveHooks, storageJournal, moves, relocation } = projectServices
    api.provide(service, (r) =>
      new ProjectService(r(coreServices.storages), r(templateServices.service), r(identityServices.accessRights), r(identityServices.teams), r(coreServices.knex), r(storageJournal), r(coreServices.outbox), r(coreServices.db).dialect === 'postgresql'),
    )
    api.provide(guards, () => new ProjectGuards())
    api.provide(pathMoveHooks, () => new PathMoveHooks())
    api.provide(storageJournal, (r) => new StorageJournal(r(coreServices.knex), r(coreServices.db).dialect, r(coreServices.config).jobs.leaseMs, r(coreServices.log)), {
      dispose: (journal) => journal.close(),
    })
    api.provide(moves, (r) => new ProjectMoves(r(coreServices.knex), r(storageJournal), r(pathMoveHooks), r(service)))
    api.provide(relocation, (r) => new ProjectRelocation(r(coreServices.knex), r(storageJournal), r(coreServices.storages)))
    // legacy string keys, until every plugin resolves by ref
    for (const [key, ref] of Object.entries({ projects: service, projectGuards: guards, pathMoveHooks, storageJournal, projectMoves: moves, projectRelocation: relocation })) api.provide(key, aliasOf(ref))
    registerProjectRoutes(api)
    registerTreeRoutes(api)
    registerProjectReport(api)
    defineProjectJobs(api.jobs)
    mountAccessRightRoutes(api, '/projects', PROJECT)
  },
  async start({ resolve, log }) {
    // standard users create projects unless an administrator takes the capability away
    const em = resolve(coreServices.em)
    const role = await em.findOne(Role, { name: 'User', builtin: true })
    if (role && !('projects.create' in role.roleMatrix)) {
      role.roleMatrix = { ...role.roleMatrix, 'projects.create': true }
      await em.flush()
    }
    resolve(projectServices.moves).defineRepair()
    resolve(projectServices.relocation).defineRepair()
    const journal = resolve(projectServices.storageJournal)
    const auth = resolve(coreServices.auth)
    journal.define(
      CREATE_KIND,
      repairCreation({
        knex: resolve(coreServices.knex),
        storages: resolve(coreServices.storages),
        journal,
        outbox: resolve(coreServices.outbox),
        hooks: resolve(projectServices.service).createHooks,
        em: () => resolve(coreServices.em).fork(),
        principalFor: (userId) => auth.principalFor(userId),
        log,
      }),
    )
  },
  async started({ resolve }) {
    // after every plugin's start, so the hooks of the plugins whose rows follow moves are in place
    const journal = resolve(projectServices.storageJournal)
    await journal.reconcile()
    journal.startSweeping()
  },
})
