import { Type } from 'typebox'
import { defineEvent } from '../events.js'
import type { JobRow } from '../jobs/types.js'

const JobPayload = Type.Object({
  job_id: Type.Integer(),
  type: Type.String(),
  state: Type.String(),
  error: Type.Union([Type.String(), Type.Null()]),
  user_id: Type.Union([Type.Integer(), Type.Null()]),
  project_id: Type.Union([Type.Integer(), Type.Null()]),
  asset_id: Type.Union([Type.Integer(), Type.Null()]),
})

/** A user's background job ended (jobs the system runs for itself, with no user, publish nothing). */
export const jobFinished = defineEvent('job.finished', {
  plugin: 'core',
  subject: 'job',
  description: 'a job a user started finished (an archive, a proxy, a copy …)',
  payload: JobPayload,
  audience: (p) => ({ users: [p.user_id] }),
})

export const jobFailed = defineEvent('job.failed', {
  plugin: 'core',
  subject: 'job',
  description: 'a job a user started failed after its last attempt',
  payload: JobPayload,
  audience: (p) => ({ users: [p.user_id] }),
})

export const coreEvents = [jobFinished, jobFailed]

export const jobEventPayload = (job: JobRow) => ({
  job_id: job.id,
  type: job.type,
  state: job.state,
  error: job.error ?? null,
  user_id: job.user_id === null ? null : Number(job.user_id),
  project_id: job.project_id === null ? null : Number(job.project_id),
  asset_id: job.asset_id === null ? null : Number(job.asset_id),
})
