import type { ProjectFields } from '../projects/index.js'
import { andThen, preparedReadIn, type Knex } from '../../core/index.js'

const HOLDERS = `select project_id, mounted_by_id, opened_by_id from edit_sessions where project_id in`
const NOBODY = [null, null] as const

/**
 * Fills `mounted_by` (who mounted the project on an edit first, among its live mounts) and
 * `locked_by` (who opened it for write, which keeps other edits out) of project JSON from the
 * edit sessions: one prepared query for a whole page of projects or a single one (GET /projects/:id,
 * `preparedReadIn`; without a promise while SQLite's connection is free). Both are user ids, null
 * when nobody holds it. Fields (values), so that GET /projects writes its page as text.
 */
export function projectHolders(knex: Knex): ProjectFields {
  const read = preparedReadIn(knex, (list) => `${HOLDERS} (${list}) and state <> 'releasing' order by id`)
  return {
    keys: ['mounted_by', 'locked_by'],
    read: (ids) =>
      andThen(read.now(ids), (rows) => {
        const holders = new Map<number, [mounted: number | null, locked: number | null]>()
        for (const r of rows) {
          const h = holders.get(Number(r.project_id)) ?? [null, null]
          if (r.mounted_by_id !== null) h[0] ??= Number(r.mounted_by_id)
          if (r.opened_by_id !== null) h[1] ??= Number(r.opened_by_id)
          holders.set(Number(r.project_id), h)
        }
        return (id: number) => holders.get(id) ?? NOBODY
      }),
  }
}
