import type { ProjectDecorator } from '../projects/index.js'
import { andThen, preparedReadIn, type Knex } from '../../core/index.js'

const HOLDERS = `select project_id, mounted_by_id, opened_by_id from edit_sessions where project_id in`

/**
 * Fills `mounted_by` (who mounted the project on an edit first, among its live mounts) and
 * `locked_by` (who opened it for write, which keeps other edits out) of project JSON from the
 * edit sessions: one prepared query for a whole page of projects or a single one (GET /projects/:id,
 * `preparedReadIn`; without a promise while SQLite's connection is free). Both are user ids, null
 * when nobody holds it.
 */
export function projectHolders(knex: Knex): ProjectDecorator {
  const read = preparedReadIn(knex, (list) => `${HOLDERS} (${list}) and state <> 'releasing' order by id`)
  return (_em, projects, json) =>
    andThen(read.now(projects.map((p) => p.id)), (rows) => {
      const holders = new Map<number, { mounted?: number; locked?: number }>()
      for (const r of rows) {
        const h = holders.get(Number(r.project_id)) ?? {}
        if (r.mounted_by_id !== null) h.mounted ??= Number(r.mounted_by_id)
        if (r.opened_by_id !== null) h.locked ??= Number(r.opened_by_id)
        holders.set(Number(r.project_id), h)
      }
      projects.forEach((p, i) => {
        json[i].mounted_by = holders.get(p.id)?.mounted ?? null
        json[i].locked_by = holders.get(p.id)?.locked ?? null
      })
    })
}
