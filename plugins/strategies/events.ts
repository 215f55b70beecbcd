import { Type } from 'typebox'
import { defineEvent } from '../../core/index.js'

const ArchivePayload = Type.Object({
  project_id: Type.Integer(),
  name: Type.String(),
  archive_strategy_id: Type.Integer(),
  archive_strategy_name: Type.String(),
  /** files moved to (archived) or back from (unarchived) the strategy's target */
  files: Type.Integer(),
  bytes: Type.Number(),
  requested_by_id: Type.Union([Type.Integer(), Type.Null()]),
})

/** an archive run released every original: the project's files live on the archive target now */
export const projectArchived = defineEvent('project.archived', {
  plugin: 'strategies',
  subject: 'project',
  description: "a project's originals were archived (copied, verified, released online)",
  payload: ArchivePayload,
  // the teams working on it, and the administrators, who answer for storage
  audience: () => ({ readers: true, admins: true }),
})

/** an unarchive run brought every released file back online, verified */
export const projectUnarchived = defineEvent('project.unarchived', {
  plugin: 'strategies',
  subject: 'project',
  description: "a project's archived originals were restored online",
  payload: ArchivePayload,
  audience: () => ({ readers: true, admins: true }),
})

export const strategyEvents = [projectArchived, projectUnarchived]
