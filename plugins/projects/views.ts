import { andThen, eachInTurn, type EntityManager, type MaybePromise } from '../../core/index.js'
import type { Project } from './entities.js'

/** a project's JSON: the projects plugin's fields plus what decorators add */
export type ProjectJson = Record<string, unknown>

/**
 * Adds fields to serialised projects in bulk: one query per decorator for a whole page, never one
 * per project. `em` forks the request's EntityManager when called: GET paths that read plain rows
 * never pay for a fork unless a decorator needs one. A decorator that had nothing to wait for may
 * return nothing instead of a promise (`PreparedRead.now`): GET /projects/:id then stays synchronous.
 */
export type ProjectDecorator = (em: () => EntityManager, projects: ReadonlyArray<Pick<Project, 'id'>>, json: ProjectJson[]) => MaybePromise<void>

/**
 * The project JSON of wire.md is assembled from several plugins, as users' is (`core/auth/user-views.ts`):
 * the projects plugin gives the row's fields, the edits plugin fills `mounted_by` and `locked_by`
 * (projects must not import edits). Reached as `projects.views`; plugins add decorators at start.
 */
export class ProjectViews {
  private readonly decorators: ProjectDecorator[] = []

  add(decorator: ProjectDecorator): void {
    this.decorators.push(decorator)
  }

  /** the JSON decorated; a promise only when a decorator had to wait */
  decorate(em: () => EntityManager, projects: ReadonlyArray<Pick<Project, 'id'>>, json: ProjectJson[]): MaybePromise<ProjectJson[]> {
    if (!projects.length) return json
    return andThen(eachInTurn(this.decorators, (decorate) => decorate(em, projects, json)), () => json)
  }
}
