import { columnJson } from '../../core/index.js'
import type { ProjectJsonLayout } from './views.js'

/**
 * The keys of a project's JSON, in their order: the one list of them. `ProjectService.serialize`
 * is checked against it when compiled (its object has each key and no other: `satisfies
 * ProjectJsonOwn`), as are the writers of `projectJsonWriters`; the order of serialize's keys,
 * which the type system does not see, by test/plugins/projects/project-json.test.ts.
 */
export const PROJECT_JSON_KEYS = [
  'id', 'uuid', 'name', 'alternative_name', 'description', 'storage', 'folder', 'path', 'template_id', 'is_library_project', 'encoding_priority', 'custom_metadata',
  'quota', 'size', 'size_calculated_at', 'parent_id', 'frozen', 'frozen_by_id', 'frozen_at', 'mounted_by', 'locked_by', 'archive_strategy_id', 'archive_strategy_state',
  'created_by', 'created_by_edit', 'last_opened_by', 'last_opened_by_edit', 'last_used_at', 'deleted', 'created_at', 'updated_at',
] as const

export type ProjectJsonKey = (typeof PROJECT_JSON_KEYS)[number]

/** an object with each key of PROJECT_JSON_KEYS and no other (checked on object literals) */
export type ProjectJsonOwn = Record<ProjectJsonKey, unknown>

/** the columns a page's rows are read with (arrays, in this order): `PROJECT_COLUMNS` */
type RowArray = readonly unknown[]
export type ProjectColumn =
  | 'id' | 'uuid' | 'name' | 'alternative_name' | 'description' | 'storage' | 'folder' | 'template_id' | 'is_library_project' | 'encoding_priority' | 'custom_metadata'
  | 'quota' | 'size' | 'size_calculated_at' | 'parent_id' | 'frozen_by_id' | 'frozen_at' | 'created_by_id' | 'created_by_edit' | 'last_opened_by_id' | 'last_opened_by_edit'
  | 'last_used_at' | 'deleted' | 'created_at' | 'updated_at'

/**
 * For each key of PROJECT_JSON_KEYS, the JSON text of its value from a row read as an array of
 * `columns`: what `JSON.stringify(serialize(projectViewOfRow(row), viewer))` writes for it, value by
 * value (test/plugins/projects/project-json.test.ts compares the two). `pathOf` is the `path` a
 * viewer sees (the folder, or its absolute path for administrators).
 */
export function projectJsonWriters(columns: readonly ProjectColumn[], pathOf: (storage: unknown, folder: unknown) => string): Record<ProjectJsonKey, (r: RowArray) => string> {
  const at = (name: ProjectColumn) => {
    const i = columns.indexOf(name)
    if (i === -1) throw new Error(`project JSON: no column ${name}`)
    return i
  }
  // a column's value written by one of columnJson's writers
  const writtenBy = (write: (value: unknown) => string) => (name: ProjectColumn) => ((i) => (r: RowArray) => write(r[i]))(at(name))
  const text = writtenBy(columnJson.text)
  const intOrNull = writtenBy(columnJson.intOrNull)
  const int = writtenBy(columnJson.int)
  const date = writtenBy(columnJson.date)
  const bool = writtenBy(columnJson.bool)
  const storage = at('storage')
  const folder = at('folder')
  const customMetadata = at('custom_metadata')
  const frozenAt = at('frozen_at')
  const nothing = () => 'null'
  return {
    id: int('id'),
    uuid: text('uuid'),
    name: text('name'),
    alternative_name: text('alternative_name'),
    description: text('description'),
    storage: text('storage'),
    folder: text('folder'),
    path: (r) => JSON.stringify(pathOf(r[storage], r[folder])),
    template_id: intOrNull('template_id'),
    is_library_project: bool('is_library_project'),
    encoding_priority: int('encoding_priority'),
    custom_metadata: (r) => columnJson.json(r[customMetadata], '{}'),
    quota: intOrNull('quota'),
    size: int('size'),
    size_calculated_at: date('size_calculated_at'),
    parent_id: intOrNull('parent_id'),
    frozen: (r) => (r[frozenAt] === null || r[frozenAt] === undefined ? 'false' : 'true'),
    frozen_by_id: intOrNull('frozen_by_id'),
    frozen_at: date('frozen_at'),
    // other plugins' fields (the edits plugin's, the strategies plugin's); their values when none is loaded
    mounted_by: nothing,
    locked_by: nothing,
    archive_strategy_id: nothing,
    archive_strategy_state: nothing,
    created_by: intOrNull('created_by_id'),
    created_by_edit: text('created_by_edit'),
    last_opened_by: intOrNull('last_opened_by_id'),
    last_opened_by_edit: text('last_opened_by_edit'),
    last_used_at: date('last_used_at'),
    deleted: bool('deleted'),
    created_at: date('created_at'),
    updated_at: date('updated_at'),
  }
}

/**
 * `{"projects":[…]}` as JSON.stringify writes the decorated JSON objects (`ProjectService.render`),
 * without making them: each project's keys in `layout`'s order, the projects plugin's values from
 * `own`, the others from `valuesOf` (per fields of the layout, the lookup its `read` answered).
 * A value JSON.stringify leaves out (undefined) leaves its key out, as in an object.
 */
export function projectPageJson(rows: readonly RowArray[], ids: readonly number[], layout: ProjectJsonLayout, own: readonly ((r: RowArray) => string)[], valuesOf: ReadonlyArray<(id: number) => readonly unknown[]>): string {
  const { keys, sources } = layout
  let body = '{"projects":['
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]
    const values = valuesOf.map((lookup) => lookup(ids[i]))
    let project = ''
    for (let k = 0; k < keys.length; k++) {
      const [from, index] = sources[k]
      const value = from === -1 ? own[k](row) : JSON.stringify(values[from][index])
      if (value !== undefined) project += (project ? ',' : '{') + keys[k] + value
    }
    body += (i ? ',' : '') + (project || '{') + '}'
  }
  return `${body}]}`
}

/** the date columns of a project */
const DATE_COLUMNS: readonly ProjectColumn[] = ['size_calculated_at', 'frozen_at', 'last_used_at', 'created_at', 'updated_at']

/**
 * PostgreSQL: the select list of `columns` (`p.name`…) for a page written as text, and after them an
 * `ok` column. The driver's parsing of each timestamp into a Date and of the JSON column cost more
 * than the rest of the page: dates come as epoch milliseconds (floored, as the driver's Date drops
 * microseconds) and `custom_metadata` as its stored text (every writer stores JSON.stringify's,
 * `columnJson.json`). `ok` is false for a row with a date outside the years 1900–9999, which the
 * driver's Date parser does not read as its text says (years below 1000): its page is read again
 * with the plain columns, whatever the driver makes of them.
 */
export function pgPageColumns(columns: readonly string[]): string {
  const name = (c: string) => c.slice(c.indexOf('.') + 1) as ProjectColumn
  const select = columns.map((c) => (DATE_COLUMNS.includes(name(c)) ? `floor(extract(epoch from ${c}) * 1000)::float8 as ${name(c)}` : name(c) === 'custom_metadata' ? `${c}::text as ${name(c)}` : c))
  const ok = columns.filter((c) => DATE_COLUMNS.includes(name(c))).map((c) => `(${c} is null or (${c} >= '1900-01-01' and ${c} < '10000-01-01'))`)
  return `${select.join(', ')}, (${ok.join(' and ')}) as ok`
}
