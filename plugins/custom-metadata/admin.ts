import { APPLIES_TO, FIELD_TYPES, LONG_TEXT_MAX, PATTERN_MAX, compilePattern, templateProblem, type FieldRow, type OptionRow } from './types.js'
import type { CustomMetadataService, SetRow } from './service.js'

import { conflict, invalid, invalidParam, isUniqueViolation, type Knex, type ParamError } from '../../core/index.js'
export interface SetInput {
  name?: string
  applies_to?: string
  root?: boolean
  parent_id?: number | null
  position?: number
  project_id?: number | null
  asset_id?: number | null
}

export interface FieldInput {
  name?: string
  type?: string
  custom_metadata_set_id?: number
  mandatory?: boolean
  maxlen?: number | null
  pattern?: string | null
  min?: number | null
  max?: number | null
  integer?: boolean
  position?: number
  use_in_project_name?: boolean
}

export interface OptionInput {
  name?: string
  custom_metadata_field_id?: number
  custom_metadata_sub_set_id?: number | null
  safe_search?: boolean
  position?: number
}

/** a display name: trimmed, one line, 1 … 255 characters */
function nameProblem(name: string | undefined): string | null {
  if (name === undefined) return 'is required'
  const n = name.trim()
  if (!n) return 'must not be blank'
  if ([...n].length > 255) return 'is longer than 255 characters'
  if (/[\u0000-\u001f\u007f]/.test(n)) return 'must not contain control characters or line breaks'
  return null
}

const taken = (what: string, name: string, param: string) => conflict(`A ${what} named "${name}" exists there already`, { errors: [{ param, message: 'is taken' }] })

/** Writes of sets, fields and options (capability `metadata.manage`); the service reads them. */
export class MetadataAdmin {
  constructor(
    private readonly knex: Knex,
    private readonly service: CustomMetadataService,
  ) {}

  // ---- sets -----------------------------------------------------------------------------------

  private async checkSet(input: SetInput, current?: SetRow): Promise<Record<string, unknown>> {
    const p = (f: string) => `custom_metadata_set[${f}]`
    const errors: ParamError[] = []
    const row: Record<string, unknown> = {}
    if (input.name !== undefined || !current) {
      const problem = nameProblem(input.name)
      if (problem) errors.push({ param: p('name'), message: problem })
      else row.name = input.name!.trim()
    }
    if (input.applies_to !== undefined) {
      if (!(APPLIES_TO as readonly string[]).includes(input.applies_to)) errors.push({ param: p('applies_to'), message: `must be one of: ${APPLIES_TO.join(', ')}` })
      else row.applies_to = input.applies_to
    } else if (!current) row.applies_to = 'both'
    if (input.parent_id !== undefined) {
      if (input.parent_id !== null) {
        const parent = await this.knex('custom_metadata_sets').where({ id: input.parent_id }).first('id')
        if (!parent) errors.push({ param: p('parent_id'), message: 'is not a custom metadata set' })
        else if (current && (await this.service.setTree(this.knex, current.id)).includes(input.parent_id)) errors.push({ param: p('parent_id'), message: 'would make the set its own ancestor' })
      }
      row.parent_id = input.parent_id
    }
    if (input.root !== undefined) row.root = input.root
    else if (!current) row.root = (input.parent_id ?? null) === null
    if (input.position !== undefined) row.position = input.position
    if (!current) {
      if (input.project_id != null && input.asset_id != null) errors.push({ param: p('asset_id'), message: 'a set belongs to one project or one asset, not both' })
      if (input.project_id != null) {
        if (!(await this.knex('projects').where({ id: input.project_id, deleted: false }).first('id'))) errors.push({ param: p('project_id'), message: 'is not a project' })
        row.scope_project_id = input.project_id
      }
      if (input.asset_id != null) {
        if (!(await this.knex('assets').where({ id: input.asset_id }).first('id'))) errors.push({ param: p('asset_id'), message: 'is not an asset' })
        row.scope_asset_id = input.asset_id
      }
    } else {
      if (input.project_id !== undefined && input.project_id !== current.scopeProjectId) errors.push({ param: p('project_id'), message: 'cannot change after creation' })
      if (input.asset_id !== undefined && input.asset_id !== current.scopeAssetId) errors.push({ param: p('asset_id'), message: 'cannot change after creation' })
    }
    if (errors.length) throw invalid(errors)
    return row
  }

  async createSet(input: SetInput): Promise<SetRow> {
    const row = await this.checkSet(input)
    const now = new Date()
    const [id] = await this.knex('custom_metadata_sets').insert({ position: 0, ...row, created_at: now, updated_at: now }).returning('id')
    return this.service.set(Number((id as any)?.id ?? id))
  }

  async updateSet(set: SetRow, input: SetInput): Promise<SetRow> {
    const row = await this.checkSet(input, set)
    if (Object.keys(row).length) await this.knex('custom_metadata_sets').where({ id: set.id }).update({ ...row, updated_at: new Date() })
    return this.service.set(set.id)
  }

  /** in use (a value in any field of the set or its sub-sets): 409 unless forced, which deletes the values too */
  async deleteSet(set: SetRow, force: boolean): Promise<void> {
    await this.knex.transaction(async (trx) => {
      const used = await this.service.setUse(trx, set.id)
      if (used && !force) throw conflict(`Set "${set.name}" holds ${used} value(s); delete with force=true to delete them too`, { in_use: true, values: used })
      // fields, options, sub-sets and values go by their foreign keys (ON DELETE CASCADE)
      await trx('custom_metadata_sets').where({ id: set.id }).delete()
    })
  }

  // ---- fields ---------------------------------------------------------------------------------

  private async checkField(input: FieldInput, current?: FieldRow): Promise<Record<string, unknown>> {
    const p = (f: string) => `custom_metadata_field[${f}]`
    const errors: ParamError[] = []
    const row: Record<string, unknown> = {}
    if (input.name !== undefined || !current) {
      const problem = nameProblem(input.name)
      if (problem) errors.push({ param: p('name'), message: problem })
      else row.name = input.name!.trim()
    }
    const type = input.type ?? current?.type
    if (input.type !== undefined || !current) {
      if (!input.type) errors.push({ param: p('type'), message: `is required (${FIELD_TYPES.join(', ')})` })
      else if (!(FIELD_TYPES as readonly string[]).includes(input.type)) errors.push({ param: p('type'), message: `must be one of: ${FIELD_TYPES.join(', ')}` })
      else if (current && input.type !== current.type && (await this.service.fieldUse(this.knex, [current.id])))
        throw conflict(`Field "${current.name}" holds values; its type cannot change`, { errors: [{ param: p('type'), message: 'cannot change while the field holds values' }] })
      else row.type = input.type
    }
    let setId = current?.setId
    if (input.custom_metadata_set_id !== undefined || !current) {
      if (input.custom_metadata_set_id === undefined) errors.push({ param: p('custom_metadata_set_id'), message: 'is required' })
      else if (!(await this.knex('custom_metadata_sets').where({ id: input.custom_metadata_set_id }).first('id'))) errors.push({ param: p('custom_metadata_set_id'), message: 'is not a custom metadata set' })
      else if (current && input.custom_metadata_set_id !== current.setId) errors.push({ param: p('custom_metadata_set_id'), message: 'changes through PUT /custom_metadata_fields/:id/move' })
      else row.custom_metadata_set_id = setId = input.custom_metadata_set_id
    }
    for (const key of ['mandatory', 'integer', 'use_in_project_name'] as const) if (input[key] !== undefined) row[key] = input[key]
    if (input.position !== undefined) row.position = input.position
    if (input.maxlen !== undefined) {
      if (input.maxlen !== null && type !== 'text' && type !== 'long_text') errors.push({ param: p('maxlen'), message: 'applies to text and long text fields only' })
      else if (input.maxlen !== null && (input.maxlen < 1 || input.maxlen > LONG_TEXT_MAX)) errors.push({ param: p('maxlen'), message: `must be 1 … ${LONG_TEXT_MAX}` })
      else row.maxlen = input.maxlen
    }
    const pattern = input.pattern !== undefined ? input.pattern : current?.pattern ?? null
    if (input.pattern !== undefined || input.type !== undefined) {
      if (pattern !== null && pattern !== '' && type !== 'text' && type !== 'generator') {
        if (input.pattern !== undefined) errors.push({ param: p('pattern'), message: 'applies to text fields (a regular expression) and generator fields (a template) only' })
        else row.pattern = null
      } else if (type === 'generator') {
        const problem = pattern ? templateProblem(pattern) : 'is required for a generator field (e.g. EP-{counter:4})'
        if (problem) errors.push({ param: p('pattern'), message: problem })
        else row.pattern = pattern
      } else if (pattern) {
        if (pattern.length > PATTERN_MAX) errors.push({ param: p('pattern'), message: `is longer than ${PATTERN_MAX} characters` })
        else if (!compilePattern(pattern)) errors.push({ param: p('pattern'), message: 'is not a regular expression' })
        else row.pattern = pattern
      } else row.pattern = null
    }
    for (const key of ['min', 'max'] as const)
      if (input[key] !== undefined) {
        if (input[key] !== null && type !== 'number') errors.push({ param: p(key), message: 'applies to number fields only' })
        else row[key] = input[key]
      }
    const min = (row.min !== undefined ? row.min : current?.min) as number | null | undefined
    const max = (row.max !== undefined ? row.max : current?.max) as number | null | undefined
    if (min != null && max != null && min > max) errors.push({ param: p('max'), message: `is below min (${min})` })
    if (input.integer === true && type !== 'number') errors.push({ param: p('integer'), message: 'applies to number fields only' })
    if (input.use_in_project_name === true && setId !== undefined) {
      const set = await this.knex('custom_metadata_sets').where({ id: setId }).first('applies_to')
      if (set && set.applies_to === 'asset') errors.push({ param: p('use_in_project_name'), message: 'needs a set that applies to projects' })
    }
    if (errors.length) throw invalid(errors)
    return row
  }

  async createField(input: FieldInput): Promise<FieldRow> {
    const row = await this.checkField(input)
    row.position ??= await nextPosition(this.knex, 'custom_metadata_fields', 'custom_metadata_set_id', row.custom_metadata_set_id as number)
    return this.service.field(await this.insertNamed('custom_metadata_fields', row, 'field', 'custom_metadata_field[name]'))
  }

  async updateField(field: FieldRow, input: FieldInput): Promise<FieldRow> {
    const row = await this.checkField(input, field)
    try {
      if (Object.keys(row).length) await this.knex('custom_metadata_fields').where({ id: field.id }).update({ ...row, updated_at: new Date() })
    } catch (err) {
      if (isUniqueViolation(err)) throw taken('field', String(row.name), 'custom_metadata_field[name]')
      throw err
    }
    return this.service.field(field.id)
  }

  async deleteField(field: FieldRow, force: boolean): Promise<void> {
    await this.knex.transaction(async (trx) => {
      const used = await this.service.fieldUse(trx, [field.id])
      if (used && !force) throw conflict(`Field "${field.name}" holds ${used} value(s); delete with force=true to delete them too`, { in_use: true, values: used })
      await trx('custom_metadata_fields').where({ id: field.id }).delete()
    })
  }

  /** a copy of the field and its options in another set (or the same one); values stay with the original */
  async copyField(field: FieldRow, targetSetId: number | undefined, name: string | undefined): Promise<FieldRow> {
    const setId = targetSetId ?? field.setId
    if (!(await this.knex('custom_metadata_sets').where({ id: setId }).first('id'))) throw invalidParam('custom_metadata_set_id', 'is not a custom metadata set')
    if (name !== undefined) {
      const problem = nameProblem(name)
      if (problem) throw invalidParam('name', problem)
    }
    return this.knex.transaction(async (trx) => {
      const names = new Set((await trx('custom_metadata_fields').where('custom_metadata_set_id', setId).select('name')).map((r: any) => r.name))
      let copyName = name?.trim() ?? field.name
      if (name !== undefined && names.has(copyName)) throw taken('field', copyName, 'name')
      for (let i = 1; names.has(copyName); i++) copyName = `${field.name} (copy${i > 1 ? ` ${i}` : ''})`.slice(0, 255)
      const position = await nextPosition(trx, 'custom_metadata_fields', 'custom_metadata_set_id', setId)
      const now = new Date()
      const [id] = await trx('custom_metadata_fields')
        .insert({
          custom_metadata_set_id: setId,
          name: copyName,
          type: field.type,
          mandatory: field.mandatory,
          maxlen: field.maxlen,
          pattern: field.pattern,
          min: field.min,
          max: field.max,
          integer: field.integer,
          position,
          use_in_project_name: field.useInProjectName,
          counter: 0,
          created_at: now,
          updated_at: now,
        })
        .returning('id')
      const newId = Number((id as any)?.id ?? id)
      const options = await this.service.options(trx, [field.id])
      if (options.length)
        await trx('select_field_options').insert(
          options.map((o) => ({ custom_metadata_field_id: newId, name: o.name, position: o.position, custom_metadata_sub_set_id: o.subSetId, safe_search: o.safeSearch, created_at: now, updated_at: now })),
        )
      return this.service.field(newId, trx)
    })
  }

  /** the field (with its values and options) into another set; 409 when the target has a field of that name */
  async moveField(field: FieldRow, targetSetId: number | undefined): Promise<FieldRow> {
    if (targetSetId === undefined) throw invalidParam('custom_metadata_set_id', 'is required')
    if (!(await this.knex('custom_metadata_sets').where({ id: targetSetId }).first('id'))) throw invalidParam('custom_metadata_set_id', 'is not a custom metadata set')
    if (targetSetId === field.setId) return field
    try {
      await this.knex.transaction(async (trx) => {
        if (await trx('custom_metadata_fields').where({ custom_metadata_set_id: targetSetId, name: field.name }).first('id')) throw taken('field', field.name, 'custom_metadata_set_id')
        const position = await nextPosition(trx, 'custom_metadata_fields', 'custom_metadata_set_id', targetSetId)
        await trx('custom_metadata_fields').where({ id: field.id }).update({ custom_metadata_set_id: targetSetId, position, updated_at: new Date() })
      })
    } catch (err) {
      // the unique (set, name) index settles a race with a create of that name
      if (isUniqueViolation(err)) throw taken('field', field.name, 'custom_metadata_set_id')
      throw err
    }
    return this.service.field(field.id)
  }

  // ---- options --------------------------------------------------------------------------------

  private async checkOption(input: OptionInput, current?: OptionRow): Promise<Record<string, unknown>> {
    const p = (f: string) => `select_field_option[${f}]`
    const errors: ParamError[] = []
    const row: Record<string, unknown> = {}
    if (input.name !== undefined || !current) {
      const problem = nameProblem(input.name)
      if (problem) errors.push({ param: p('name'), message: problem })
      else row.name = input.name!.trim()
    }
    if (!current) {
      if (input.custom_metadata_field_id === undefined) errors.push({ param: p('custom_metadata_field_id'), message: 'is required' })
      else {
        const field = await this.knex('custom_metadata_fields').where({ id: input.custom_metadata_field_id }).first('type')
        if (!field) errors.push({ param: p('custom_metadata_field_id'), message: 'is not a custom metadata field' })
        else if (field.type !== 'select' && field.type !== 'multi_select') errors.push({ param: p('custom_metadata_field_id'), message: `is a ${field.type} field; options belong to select and multi-select fields` })
        else row.custom_metadata_field_id = input.custom_metadata_field_id
      }
    } else if (input.custom_metadata_field_id !== undefined && input.custom_metadata_field_id !== current.fieldId) errors.push({ param: p('custom_metadata_field_id'), message: 'cannot change after creation' })
    if (input.custom_metadata_sub_set_id !== undefined) {
      if (input.custom_metadata_sub_set_id !== null && !(await this.knex('custom_metadata_sets').where({ id: input.custom_metadata_sub_set_id }).first('id')))
        errors.push({ param: p('custom_metadata_sub_set_id'), message: 'is not a custom metadata set' })
      else row.custom_metadata_sub_set_id = input.custom_metadata_sub_set_id
    }
    if (input.safe_search !== undefined) row.safe_search = input.safe_search
    if (input.position !== undefined) row.position = input.position
    if (errors.length) throw invalid(errors)
    return row
  }

  async createOption(input: OptionInput): Promise<OptionRow> {
    const row = await this.checkOption(input)
    row.position ??= await nextPosition(this.knex, 'select_field_options', 'custom_metadata_field_id', row.custom_metadata_field_id as number)
    return this.service.option(await this.insertNamed('select_field_options', row, 'option', 'select_field_option[name]'))
  }

  /** inserts a checked field or option; its unique (parent, name) index turns a name taken meanwhile into a 409 naming `param` */
  private async insertNamed(table: string, row: Record<string, unknown>, what: string, param: string): Promise<number> {
    const now = new Date()
    try {
      const [id] = await this.knex(table).insert({ ...row, created_at: now, updated_at: now }).returning('id')
      return Number((id as any)?.id ?? id)
    } catch (err) {
      if (isUniqueViolation(err)) throw taken(what, String(row.name), param)
      throw err
    }
  }

  /** a renamed option: the words of the values that hold it follow in the same transaction */
  async updateOption(option: OptionRow, input: OptionInput): Promise<OptionRow> {
    const row = await this.checkOption(input, option)
    try {
      await this.knex.transaction(async (trx) => {
        if (Object.keys(row).length) await trx('select_field_options').where({ id: option.id }).update({ ...row, updated_at: new Date() })
        if (row.name !== undefined && row.name !== option.name) await this.refreshWords(trx, option)
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw taken('option', String(row.name), 'select_field_option[name]')
      throw err
    }
    return this.service.option(option.id)
  }

  private async refreshWords(trx: Knex, option: OptionRow): Promise<void> {
    const names = new Map((await this.service.options(trx, [option.fieldId])).map((o) => [o.id, o.name]))
    for (const r of await this.service.optionValues(trx, option).select('id', 'value')) {
      const ids: number[] = ([] as number[]).concat(JSON.parse(r.value))
      await trx('custom_metadata_values').where({ id: r.id }).update({ text_value: ids.map((id) => names.get(id) ?? '').join('\n') })
    }
  }

  /** in use: 409 unless forced; forced, selects holding it are cleared and multi-selects lose it */
  async deleteOption(option: OptionRow, force: boolean): Promise<void> {
    await this.knex.transaction(async (trx) => {
      const used = await this.service.optionUse(trx, option)
      if (used && !force) throw conflict(`Option "${option.name}" is chosen in ${used} value(s); delete with force=true to remove it from them`, { in_use: true, values: used })
      const rows = used ? await this.service.optionValues(trx, option).select('id', 'value') : []
      await trx('select_field_options').where({ id: option.id }).delete()
      const names = new Map((await this.service.options(trx, [option.fieldId])).map((o) => [o.id, o.name]))
      for (const r of rows) {
        const ids = ([] as number[]).concat(JSON.parse(r.value)).filter((id) => id !== option.id)
        if (!ids.length || !String(r.value).startsWith('[')) await trx('custom_metadata_values').where({ id: r.id }).delete()
        else await trx('custom_metadata_values').where({ id: r.id }).update({ value: JSON.stringify(ids), text_value: ids.map((id) => names.get(id) ?? '').join('\n'), updated_at: new Date() })
      }
    })
  }
}

/** the position after the last of a parent's rows (0 for the first) */
async function nextPosition(db: Knex, table: string, parentColumn: string, parentId: number): Promise<number> {
  const [{ m }] = await db(table).where(parentColumn, parentId).max({ m: 'position' })
  return m === null || m === undefined ? 0 : Number(m) + 1
}
