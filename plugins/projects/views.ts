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
 * Fields a plugin adds to project JSON as values rather than by changing the JSON objects: what a
 * `ProjectDecorator` does when it only sets keys, said so that a page of projects can be written as
 * JSON text without making its objects (GET /projects: the objects and their stringifying were
 * half of the page's time). `read` answers, for a page's ids, each project's values of `keys` in
 * their order; keys the projects plugin has (`mounted_by`) keep their place, new ones follow its own
 * in the order plugins added them, as when a decorator sets them.
 */
export interface ProjectFields {
  readonly keys: readonly string[]
  read(ids: number[]): MaybePromise<(id: number) => readonly unknown[]>
}

type Added = { decorate: ProjectDecorator; fields?: ProjectFields }

/** how a page's JSON text is laid out: each key in its place, from the projects plugin or the fields of plugin `from` */
export interface ProjectJsonLayout {
  /** `"key":` of each key in its JSON order */
  readonly keys: readonly string[]
  /** per key: -1 for the projects plugin's own value, else the index of the fields (in `fields`) and of the value in their row */
  readonly sources: ReadonlyArray<readonly [number, number]>
  readonly fields: readonly ProjectFields[]
}

/**
 * The project JSON of wire.md is assembled from several plugins, as users' is (`core/auth/user-views.ts`):
 * the projects plugin gives the row's fields, the edits plugin fills `mounted_by` and `locked_by`
 * (projects must not import edits). Reached as `projects.views`; plugins add decorators at start.
 */
export class ProjectViews {
  private readonly added: Added[] = []
  private layouts = new WeakMap<readonly string[], ProjectJsonLayout | null>()

  add(decorator: ProjectDecorator): void {
    this.added.push({ decorate: decorator })
    this.layouts = new WeakMap()
  }

  /** fields that are values (`ProjectFields`): applied as a decorator to JSON objects, or written into a page's text */
  addFields(fields: ProjectFields): void {
    const decorate: ProjectDecorator = (_em, projects, json) =>
      andThen(fields.read(projects.map((p) => p.id)), (valuesOf) =>
        projects.forEach((p, i) => {
          const values = valuesOf(p.id)
          fields.keys.forEach((key, k) => (json[i][key] = values[k]))
        }),
      )
    this.added.push({ decorate, fields })
    this.layouts = new WeakMap()
  }

  /** the JSON decorated; a promise only when a decorator had to wait */
  decorate(em: () => EntityManager, projects: ReadonlyArray<Pick<Project, 'id'>>, json: ProjectJson[]): MaybePromise<ProjectJson[]> {
    if (!projects.length) return json
    return andThen(eachInTurn(this.added, ({ decorate }) => decorate(em, projects, json)), () => json)
  }

  /**
   * Where each key of a project's JSON comes from when the projects plugin's keys are `own` (in
   * their order) and every decorator gives fields (`addFields`); null when one changes JSON objects
   * (a partner's `add`): such pages are made as objects. A key set twice holds the last value, in the
   * place of its first, as with objects.
   */
  layout(own: readonly string[]): ProjectJsonLayout | null {
    let layout = this.layouts.get(own)
    if (layout === undefined) this.layouts.set(own, (layout = this.layoutOf(own)))
    return layout
  }

  private layoutOf(own: readonly string[]): ProjectJsonLayout | null {
    if (this.added.some((a) => !a.fields)) return null
    const fields = this.added.map((a) => a.fields!)
    const order = [...own]
    const source = new Map<string, readonly [number, number]>(own.map((key) => [key, [-1, -1]]))
    fields.forEach((f, i) =>
      f.keys.forEach((key, k) => {
        if (!source.has(key)) order.push(key)
        source.set(key, [i, k])
      }),
    )
    return { keys: order.map((key) => `${JSON.stringify(key)}:`), sources: order.map((key) => source.get(key)!), fields }
  }
}
