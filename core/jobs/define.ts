import type { Static, TSchema } from 'typebox'

/**
 * A typed name for a job: `defineJob('projects.calculate-size', Type.Object({ projectId: IdParam }))`.
 * The plugin defines the handler with it (`api.jobs.define(calculateSize, { handler })`) and anyone
 * who may reach the plugin enqueues with it (`jobs.enqueue(calculateSize, { projectId })`): the
 * payload is typed at compile time and checked against the schema when it is enqueued.
 */
export interface JobType<P> {
  /** `<plugin>.<name>`, kebab-case: the type stored in the jobs table */
  readonly type: string
  /** the plugin the type belongs to (its first part) */
  readonly plugin: string
  readonly payload: TSchema
  /** never set: carries the payload's type */
  readonly __payload?: P
}

const JOB_TYPE = /^([a-z][a-z0-9-]*)\.([a-z][a-z0-9-]*)$/

export function defineJob<S extends TSchema>(type: string, payload: S): JobType<Static<S>> {
  const m = JOB_TYPE.exec(type)
  if (!m) throw new Error(`job type "${type}": types are <plugin>.<name> in kebab-case, e.g. "projects.calculate-size"`)
  return Object.freeze({ type, plugin: m[1], payload })
}

export const jobTypeName = (job: JobType<unknown> | string) => (typeof job === 'string' ? job : job.type)
