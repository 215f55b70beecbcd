import { definePlugin, aliasOf, coreServices, conflict } from '../../core/index.js'
import { EditsSettings, mountRootOf } from './workspace.js'
import { editServices } from './refs.js'
import { projectServices } from '../projects/index.js'
import { EditSchema, EditSession, EditSessionSchema } from './entities.js'
import { migrations } from './migrations.js'
import { EditService } from './service.js'
import { registerEditRoutes } from './edit-routes.js'
import { registerSessionRoutes } from './session-routes.js'
import { registerSubprojectRoutes } from './subproject-routes.js'
import { defineEditJobs } from './jobs.js'
import { projectHolders } from './project-holders.js'

export { Edit, EditSession } from './entities.js'
export { EditService } from './service.js'
export { editServices } from './refs.js'
export { mountRootOf, type EditsSettings } from './workspace.js'

/**
 * Edit workstations and projects on them (§4.12, §4.20 open/close/mount/subprojects): registered
 * edits with a sealed SMB password, per-edit workspaces of symlinks below the setting `mountRoot`
 * (`plugins.edits.mountRoot`, default `<dataDir>/mounts`), exclusive opening for write, and subprojects.
 */
export const editsPlugin = definePlugin({
  name: 'edits',
  title: 'Edit workstations',
  version: '1.0.0',
  description: 'Edit workstations: SMB credentials, mounting and opening projects, subprojects',
  dependsOn: ['projects'],
  entities: [EditSchema, EditSessionSchema],
  migrations,
  settings: EditsSettings,
  register(api) {
    api.provide(editServices.service, (r) => new EditService(r(coreServices.config), () => mountRootOf(api.settings(), api.config)))
    api.provide('edits', aliasOf(editServices.service)) // legacy string key
    registerEditRoutes(api)
    registerSessionRoutes(api)
    registerSubprojectRoutes(api)
    defineEditJobs(api.jobs)
  },
  start({ resolve }) {
    // mounted_by and locked_by of the project JSON come from the edit sessions
    resolve(projectServices.service).views.addFields(projectHolders(resolve(coreServices.knex)))
    // a rename or delete would pull the tree from under the links (and the links out of a parent's tree)
    resolve(projectServices.guards).add(async (em, project, action) => {
      const rows = await em.find(EditSession, { $or: [{ project: project.id }, { parent: project.id }] }, { populate: ['edit'] })
      if (rows.length === 0) return
      const edits = [...new Set(rows.map((r) => r.edit.name))]
      throw conflict(`Project "${project.name}" is mounted on edit ${edits.join(', ')}; unmount or force-close it before you ${action} it`, { edits })
    })
  },
})
