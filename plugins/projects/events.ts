import { Type } from 'typebox'
import { defineEvent } from '../../core/index.js'

export const projectCreated = defineEvent('project.created', {
  plugin: 'projects',
  subject: 'project',
  description: 'a project was created',
  payload: Type.Object({ project_id: Type.Integer(), name: Type.String(), storage: Type.String(), created_by_id: Type.Integer(), team_id: Type.Integer() }),
  audience: (p) => ({ teams: [p.team_id], admins: true }),
})

export const projectEvents = [projectCreated]
