import type { ProjectDecorator } from '../projects/index.js'

/**
 * Fills `mounted_by` (who mounted the project on an edit first, among its live mounts) and
 * `locked_by` (who opened it for write, which keeps other edits out) of project JSON from the
 * edit sessions: one query for a whole page of projects. Both are user ids, null when nobody holds it.
 */
export const projectHolders: ProjectDecorator = async (em, projects, json) => {
  const rows = await em
    .getKnex()('edit_sessions')
    .whereIn('project_id', projects.map((p) => p.id))
    .whereNot('state', 'releasing')
    .orderBy('id')
    .select('project_id', 'mounted_by_id', 'opened_by_id')
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
}
