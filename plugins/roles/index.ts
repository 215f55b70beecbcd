import { definePlugin } from '../../core/index.js'
import { registerRoleRoutes } from './routes.js'

/** Role endpoints (§4.2). The Role entity itself belongs to the core, which needs it to authorise. */
export const rolesPlugin = definePlugin({
  name: 'roles',
  title: 'Roles',
  version: '1.0.0',
  description: 'User roles and their capability matrix',
  register: registerRoleRoutes,
})
