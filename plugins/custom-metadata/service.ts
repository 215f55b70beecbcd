import { normalize, present, renderTemplate, templateRegExp, ValueError, type FieldRow, type FieldType, type Lookups, type OptionRow, type OwnerType, type Stored } from './types.js'

import { MamError, column, conflict, invalid, isUniqueViolation, iso, notFound, type Dialect, type EntityManager, type Knex, type ParamError, type Principal } from '../../core/index.js'
export interface MetadataOwner {
  type: OwnerType
  id: number
}

/** values of projects, assets and galleries (the owner's access is the caller's check; this checks field rules) */
export interface MetadataValues {
  /** the owner's values as custommetadatum JSON objects (wire.md) */
  list(em: EntityManager, owner: MetadataOwner): Promise<Record<string, unknown>[]>
  /** validate and set (keys: field id or name; null clears), all or nothing, 422 naming the field; returns list() */
  update(em: EntityManager, principal: Principal, owner: MetadataOwner, values: Record<string, unknown>): Promise<Record<string, unknown>[]>
  /** remove every value of the owner (the owner is being deleted) */
  removeOwner(em: EntityManager, owner: MetadataOwner): Promise<void>
}

export interface SetRow {
  id: number
  name: string
  appliesTo: string
  root: boolean
  parentId: number | null
  position: number
  scopeProjectId: number | null
  scopeAssetId: number | null
  createdAt: Date | null
  updatedAt: Date | null
}

/** a field with its set's reach: which owners it applies to */
export interface ScopedField extends FieldRow {
  appliesTo: string
  scopeProjectId: number | null
  scopeAssetId: number | null
  setPosition: number
  setParentId: number | null
}

export interface ValueRow {
  id: number
  fieldId: number
  ownerType: OwnerType
  ownerId: number
  value: string
  text: string
  updatedById: number | null
  createdAt: Date | null
  updatedAt: Date | null
}

/** one change to apply: the field and what to store (null: clear) */
export interface Change {
  field: ScopedField
  stored: Stored | null
  /** generator: take the next value inside the write */
  take?: boolean
}

const HISTORY_SHOWN = 5
const CHUNK = 400

export const setOf = (r: any): SetRow => ({
  id: Number(r.id),
  name: r.name,
  appliesTo: r.applies_to,
  root: column.bool(r.root),
  parentId: column.intOrNull(r.parent_id),
  position: Number(r.position),
  scopeProjectId: column.intOrNull(r.scope_project_id),
  scopeAssetId: column.intOrNull(r.scope_asset_id),
  createdAt: column.date(r.created_at),
  updatedAt: column.date(r.updated_at),
})

export const fieldOf = (r: any): FieldRow => ({
  id: Number(r.id),
  setId: Number(r.custom_metadata_set_id),
  name: r.name,
  type: r.type,
  mandatory: column.bool(r.mandatory),
  maxlen: column.intOrNull(r.maxlen),
  pattern: r.pattern ?? null,
  min: r.min === null || r.min === undefined ? null : Number(r.min),
  max: r.max === null || r.max === undefined ? null : Number(r.max),
  integer: column.bool(r.integer),
  position: Number(r.position),
  useInProjectName: column.bool(r.use_in_project_name),
  counter: Number(r.counter),
  createdAt: column.date(r.created_at),
  updatedAt: column.date(r.updated_at),
})

const scopedFieldOf = (r: any): ScopedField => ({
  ...fieldOf(r),
  appliesTo: r.applies_to,
  scopeProjectId: column.intOrNull(r.scope_project_id),
  scopeAssetId: column.intOrNull(r.scope_asset_id),
  setPosition: Number(r.set_position),
  setParentId: column.intOrNull(r.set_parent_id),
})

export const optionOf = (r: any): OptionRow => ({
  id: Number(r.id),
  fieldId: Number(r.custom_metadata_field_id),
  name: r.name,
  position: Number(r.position),
  subSetId: column.intOrNull(r.custom_metadata_sub_set_id),
  safeSearch: column.bool(r.safe_search),
  createdAt: column.date(r.created_at),
  updatedAt: column.date(r.updated_at),
})

const valueOf = (r: any): ValueRow => ({
  id: Number(r.id),
  fieldId: Number(r.custom_metadata_field_id),
  ownerType: r.owner_type,
  ownerId: Number(r.owner_id),
  value: r.value,
  text: r.text_value,
  updatedById: column.intOrNull(r.updated_by_id),
  createdAt: column.date(r.created_at),
  updatedAt: column.date(r.updated_at),
})

/** the query builder of the caller's transaction when it has one (a gallery's change), else the plain one */
export const knexOf = (em: EntityManager): Knex => ((em.getTransactionContext() as Knex | undefined) ?? em.getKnex()) as Knex

/** the foreign-key columns of an owner's rows */
const ownerColumns = (owner: MetadataOwner) => ({
  owner_type: owner.type,
  owner_id: owner.id,
  project_id: owner.type === 'project' ? owner.id : null,
  asset_id: owner.type === 'asset' ? owner.id : null,
})

const FIELD_COLUMNS = ['f.*', 's.applies_to', 's.scope_project_id', 's.scope_asset_id', 's.position as set_position', 's.parent_id as set_parent_id']

/**
 * Custom metadata: sets of fields, select options, and values of projects, assets and galleries.
 * Every write of values runs in one transaction (all or nothing) with its history rows; generator
 * values are taken with a conditional counter update in that transaction, so concurrent takers get
 * distinct values and a rolled-back write gives its number back (no gaps).
 */
export class CustomMetadataService implements MetadataValues {
  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
  ) {}

  // ---- reads ----------------------------------------------------------------------------------

  async sets(k: Knex = this.knex, where: { scope?: { project?: number; asset?: number }; ids?: number[] } = {}): Promise<SetRow[]> {
    let q = k('custom_metadata_sets')
    if (where.ids) q = q.whereIn('id', where.ids)
    else if (where.scope?.project !== undefined) q = q.where('scope_project_id', where.scope.project)
    else if (where.scope?.asset !== undefined) q = q.where('scope_asset_id', where.scope.asset)
    else q = q.whereNull('scope_project_id').whereNull('scope_asset_id')
    return (await q.orderBy([{ column: 'position' }, { column: 'id' }])).map(setOf)
  }

  async set(id: number, k: Knex = this.knex): Promise<SetRow> {
    const row = await k('custom_metadata_sets').where({ id }).first()
    if (!row) throw notFound('custom metadata set', id)
    return setOf(row)
  }

  async fields(k: Knex = this.knex, setIds?: number[]): Promise<FieldRow[]> {
    let q = k('custom_metadata_fields')
    if (setIds) q = q.whereIn('custom_metadata_set_id', setIds)
    return (await q.orderBy([{ column: 'custom_metadata_set_id' }, { column: 'position' }, { column: 'id' }])).map(fieldOf)
  }

  async field(id: number, k: Knex = this.knex): Promise<ScopedField> {
    const row = await k('custom_metadata_fields as f').join('custom_metadata_sets as s', 's.id', 'f.custom_metadata_set_id').where('f.id', id).first(FIELD_COLUMNS)
    if (!row) throw notFound('custom metadata field', id)
    return scopedFieldOf(row)
  }

  async options(k: Knex = this.knex, fieldIds?: number[]): Promise<OptionRow[]> {
    let q = k('select_field_options')
    if (fieldIds) q = q.whereIn('custom_metadata_field_id', fieldIds)
    return (await q.orderBy([{ column: 'custom_metadata_field_id' }, { column: 'position' }, { column: 'id' }])).map(optionOf)
  }

  async option(id: number, k: Knex = this.knex): Promise<OptionRow> {
    const row = await k('select_field_options').where({ id }).first()
    if (!row) throw notFound('select field option', id)
    return optionOf(row)
  }

  /** the fields an owner may hold: sets that apply to its kind, global or scoped to the owner itself */
  async applicableFields(k: Knex, owner: MetadataOwner): Promise<ScopedField[]> {
    let q = k('custom_metadata_fields as f').join('custom_metadata_sets as s', 's.id', 'f.custom_metadata_set_id')
    if (owner.type !== 'gallery') q = q.whereIn('s.applies_to', [owner.type, 'both'])
    q = q.where((w) => {
      w.where((g) => g.whereNull('s.scope_project_id').whereNull('s.scope_asset_id'))
      if (owner.type === 'project') w.orWhere('s.scope_project_id', owner.id)
      if (owner.type === 'asset') w.orWhere('s.scope_asset_id', owner.id)
    })
    const rows = await q.orderBy([{ column: 's.position' }, { column: 's.id' }, { column: 'f.position' }, { column: 'f.id' }]).select(FIELD_COLUMNS)
    return rows.map(scopedFieldOf)
  }

  lookups(k: Knex): Lookups {
    const cache = new Map<number, Promise<OptionRow[]>>()
    return {
      options: (fieldId) => {
        if (!cache.has(fieldId)) cache.set(fieldId, this.options(k, [fieldId]))
        return cache.get(fieldId)!
      },
      user: async (key) => {
        const q = k('users')
        const row = typeof key === 'number' || /^\d+$/.test(key) ? await q.where('id', Number(key)).first('id', 'username') : await q.where('username', key).first('id', 'username')
        return row ? { id: Number(row.id), username: row.username } : null
      },
    }
  }

  // ---- values ---------------------------------------------------------------------------------

  async valueRows(k: Knex, owner: MetadataOwner): Promise<ValueRow[]> {
    return (await k('custom_metadata_values').where({ owner_type: owner.type, owner_id: owner.id }).orderBy('id')).map(valueOf)
  }

  async list(em: EntityManager, owner: MetadataOwner): Promise<Record<string, unknown>[]> {
    return this.listWith(knexOf(em), owner)
  }

  async listWith(k: Knex, owner: MetadataOwner): Promise<Record<string, unknown>[]> {
    const rows = await this.valueRows(k, owner)
    if (!rows.length) return []
    const fields = new Map<number, FieldRow>()
    for (let i = 0; i < rows.length; i += CHUNK)
      for (const r of await k('custom_metadata_fields').whereIn('id', rows.slice(i, i + CHUNK).map((v) => v.fieldId))) fields.set(Number(r.id), fieldOf(r))
    const history = await this.history(k, owner)
    const safe = await this.safeOptions(k, [...fields.values()])
    const users = await this.usernames(k, rows.map((r) => r.updatedById))
    const out = rows
      .filter((r) => fields.has(r.fieldId))
      .sort((a, b) => fields.get(a.fieldId)!.setId - fields.get(b.fieldId)!.setId || fields.get(a.fieldId)!.position - fields.get(b.fieldId)!.position || a.id - b.id)
      .map((r) => this.datum(r, fields.get(r.fieldId)!, owner, history.get(r.fieldId) ?? [], safe, users))
    return out
  }

  private async safeOptions(k: Knex, fields: FieldRow[]): Promise<Set<number>> {
    const ids = fields.filter((f) => f.type === 'select' || f.type === 'multi_select').map((f) => f.id)
    if (!ids.length) return new Set()
    return new Set((await k('select_field_options').whereIn('custom_metadata_field_id', ids).where('safe_search', true).select('id')).map((r: any) => Number(r.id)))
  }

  private async usernames(k: Knex, ids: Array<number | null>): Promise<Map<number, string>> {
    const wanted = [...new Set(ids.filter((i): i is number => i !== null))]
    if (!wanted.length) return new Map()
    return new Map((await k('users').whereIn('id', wanted).select('id', 'username')).map((r: any) => [Number(r.id), r.username]))
  }

  /** the latest changes per field of an owner (who changed what, when) */
  async history(k: Knex, owner: MetadataOwner): Promise<Map<number, Record<string, unknown>[]>> {
    const rows = await k('custom_metadata_history as h')
      .leftJoin('users as u', 'u.id', 'h.user_id')
      .where({ 'h.owner_type': owner.type, 'h.owner_id': owner.id })
      .orderBy('h.id', 'desc')
      .limit(500)
      .select('h.*', 'u.username')
    const out = new Map<number, Record<string, unknown>[]>()
    for (const r of rows) {
      const fieldId = column.intOrNull(r.custom_metadata_field_id)
      if (fieldId === null) continue
      const list = out.get(fieldId) ?? []
      if (list.length < HISTORY_SHOWN) list.push({ old_value: r.old_value, new_value: r.new_value, user_id: column.intOrNull(r.user_id), username: r.username ?? null, changed_at: iso(column.date(r.created_at)) })
      out.set(fieldId, list)
    }
    return out
  }

  datum(r: ValueRow, field: FieldRow, owner: MetadataOwner, history: Record<string, unknown>[], safe: Set<number>, users: Map<number, string>): Record<string, unknown> {
    const raw = JSON.parse(r.value)
    const optionIds: number[] = field.type === 'select' ? [raw] : field.type === 'multi_select' ? raw : []
    return {
      id: r.id,
      custom_metadata_field_id: field.id,
      custom_metadata_field: { id: field.id, name: field.name, type: field.type, custom_metadata_set_id: field.setId },
      asset_id: owner.type === 'asset' ? owner.id : null,
      project_id: owner.type === 'project' ? owner.id : null,
      gallery_id: owner.type === 'gallery' ? owner.id : null,
      value: present(field.type, r.value, r.text),
      display_value: r.text,
      option_ids: optionIds.length ? optionIds : undefined,
      safe_search: optionIds.some((id) => safe.has(id)),
      updated_by: r.updatedById,
      updated_by_name: r.updatedById === null ? null : (users.get(r.updatedById) ?? null),
      created_at: iso(r.createdAt),
      updated_at: iso(r.updatedAt),
      history,
    }
  }

  /**
   * Reads a hash of values (keys: field id or name) against the owner's fields: the changes to
   * apply, or a 422 naming every misfit as `${param}[key]`, the key as the client sent it.
   */
  async resolve(k: Knex, owner: MetadataOwner, values: Record<string, unknown>, param = 'custom_metadata', fields?: ScopedField[]): Promise<Change[]> {
    const applicable = fields ?? (await this.applicableFields(k, owner))
    const byId = new Map(applicable.map((f) => [f.id, f]))
    const lookups = this.lookups(k)
    const errors: ParamError[] = []
    const changes = new Map<number, Change>()
    for (const [key, raw] of Object.entries(values)) {
      const name = `${param}[${key}]`
      let field: ScopedField | undefined
      if (/^\d+$/.test(key)) field = byId.get(Number(key))
      if (!field) {
        const named = applicable.filter((f) => f.name === key)
        if (named.length > 1) {
          errors.push({ param: name, message: `names fields in several sets (ids ${named.map((f) => f.id).join(', ')}); key by the field's id` })
          continue
        }
        field = named[0]
      }
      if (!field) {
        errors.push({ param: name, message: `is not a custom metadata field of this ${owner.type}` })
        continue
      }
      if (changes.has(field.id)) {
        errors.push({ param: name, message: `names field ${field.id} a second time` })
        continue
      }
      if (raw === null || raw === undefined || (raw === '' && field.type !== 'text' && field.type !== 'long_text')) {
        changes.set(field.id, { field, stored: null })
        continue
      }
      try {
        changes.set(field.id, { field, stored: await normalize(field, raw, lookups) })
      } catch (err) {
        if (!(err instanceof ValueError)) throw err
        errors.push({ param: name, message: `(${field.name}, ${field.type.replace('_', ' ')}) ${err.message}` })
      }
    }
    if (errors.length) throw invalid(errors)
    return [...changes.values()]
  }

  /** fields that must hold a value on a project: mandatory fields of its root sets */
  async missingMandatory(k: Knex, owner: MetadataOwner, present: Set<number>, fields?: ScopedField[], param = 'custom_metadata'): Promise<ParamError[]> {
    if (owner.type !== 'project') return []
    const applicable = fields ?? (await this.applicableFields(k, owner))
    return applicable.filter((f) => f.mandatory && f.setParentId === null && !present.has(f.id)).map((f) => ({ param: `${param}[${f.name}]`, message: `is mandatory (${f.name})` }))
  }

  async update(em: EntityManager, principal: Principal, owner: MetadataOwner, values: Record<string, unknown>, param = 'custom_metadata'): Promise<Record<string, unknown>[]> {
    const outer = em.getTransactionContext() as Knex | undefined
    const run = async (trx: Knex) => {
      const fields = await this.applicableFields(trx, owner)
      const changes = await this.resolve(trx, owner, values, param, fields)
      await this.apply(trx, principal.userId, owner, changes, { fields, param })
      return this.listWith(trx, owner)
    }
    return outer ? run(outer) : this.knex.transaction(run)
  }

  /**
   * Writes the changes of one owner with their history, inside `trx`. Projects keep their mandatory
   * fields (checked against what holds after the change).
   */
  async apply(trx: Knex, userId: number | null, owner: MetadataOwner, changes: Change[], options: { fields?: ScopedField[]; param?: string; checkMandatory?: boolean } = {}): Promise<void> {
    const param = options.param ?? 'custom_metadata'
    const current = new Map((await this.valueRows(trx, owner)).map((r) => [r.fieldId, r]))
    if (owner.type === 'project' && options.checkMandatory !== false) {
      const holding = new Set(current.keys())
      for (const c of changes) c.stored === null && !c.take ? holding.delete(c.field.id) : holding.add(c.field.id)
      const missing = await this.missingMandatory(trx, owner, holding, options.fields, param)
      if (missing.length) throw invalid(missing)
    }
    const now = new Date()
    for (const change of changes) {
      const old = current.get(change.field.id)
      let stored = change.stored
      if (change.take) stored = await this.take(trx, change.field)
      if (stored === null) {
        if (!old) continue
        await trx('custom_metadata_values').where({ id: old.id }).delete()
      } else {
        if (old && old.value === stored.value) continue
        try {
          if (old)
            await trx('custom_metadata_values')
              .where({ id: old.id })
              .update({ value: stored.value, text_value: stored.text, unique_key: stored.uniqueKey, updated_by_id: userId, updated_at: now })
          else
            await trx('custom_metadata_values').insert({
              custom_metadata_field_id: change.field.id,
              ...ownerColumns(owner),
              value: stored.value,
              text_value: stored.text,
              unique_key: stored.uniqueKey,
              updated_by_id: userId,
              created_at: now,
              updated_at: now,
            })
        } catch (err) {
          if (!isUniqueViolation(err)) throw err
          // a generator value someone holds, or a concurrent first write of this field on this owner
          throw conflict(
            stored.uniqueKey !== null ? `The value "${stored.text}" of ${change.field.name} is taken` : `Field ${change.field.name} was set concurrently; retry`,
            { errors: [{ param: `${param}[${change.field.id}]`, message: stored.uniqueKey !== null ? 'is taken' : 'was set concurrently' }] },
          )
        }
      }
      await trx('custom_metadata_history').insert({
        ...ownerColumns(owner),
        custom_metadata_field_id: change.field.id,
        field_name: change.field.name,
        old_value: old?.text ?? null,
        new_value: stored?.text ?? null,
        user_id: userId,
        created_at: now,
      })
    }
  }

  async removeOwner(em: EntityManager, owner: MetadataOwner): Promise<void> {
    const k = knexOf(em)
    await k('custom_metadata_values').where({ owner_type: owner.type, owner_id: owner.id }).delete()
    await k('custom_metadata_history').where({ owner_type: owner.type, owner_id: owner.id }).delete()
  }

  /**
   * The same changes on many assets (bulk_update_custom_metadata), in `trx`, set-based: per field one
   * statement writes the history rows of the assets whose value changes (old value read in the same
   * statement) and one writes the values (an upsert that leaves equal values alone, or a delete). The
   * ids travel as one parameter (PostgreSQL array, SQLite JSON list), so 10,000 assets are four
   * statements per field, and the search index refreshes once per statement (PostgreSQL).
   */
  async bulkApply(trx: Knex, userId: number | null, assetIds: number[], changes: Change[]): Promise<number> {
    if (!assetIds.length) return 0
    const now = new Date()
    const pg = this.dialect === 'postgresql'
    // the asset ids as a one-column table `ids(id)`
    const ids = pg ? trx.raw('(SELECT unnest(?::integer[]) AS id) ids', [assetIds]) : trx.raw('(SELECT value AS id FROM json_each(?)) ids', [JSON.stringify(assetIds)])
    const affected = (result: any): number => Number(result?.rowCount ?? result?.changes ?? 0)
    let changed = 0
    for (const { field, stored } of changes) {
      const history = `INSERT INTO custom_metadata_history (owner_type, owner_id, project_id, asset_id, custom_metadata_field_id, field_name, old_value, new_value, user_id, created_at)`
      if (stored === null) {
        changed += affected(
          await trx.raw(
            `${history} SELECT 'asset', v.owner_id, NULL, v.owner_id, v.custom_metadata_field_id, ?, v.text_value, NULL, ?, ? FROM custom_metadata_values v
             WHERE v.custom_metadata_field_id = ? AND v.owner_type = 'asset' AND v.owner_id IN (SELECT id FROM ?)`,
            [field.name, userId, now, field.id, ids],
          ),
        )
        await trx.raw(`DELETE FROM custom_metadata_values WHERE custom_metadata_field_id = ? AND owner_type = 'asset' AND owner_id IN (SELECT id FROM ?)`, [field.id, ids])
        continue
      }
      changed += affected(
        await trx.raw(
          `${history} SELECT 'asset', ids.id, NULL, ids.id, ?, ?, v.text_value, ?, ?, ? FROM ?
           LEFT JOIN custom_metadata_values v ON v.custom_metadata_field_id = ? AND v.owner_type = 'asset' AND v.owner_id = ids.id
           WHERE v.id IS NULL OR v.value <> ?`,
          [field.id, field.name, stored.text, userId, now, ids, field.id, stored.value],
        ),
      )
      // `WHERE true`: SQLite would read ON CONFLICT after a bare SELECT … FROM as a join's ON
      await trx.raw(
        `INSERT INTO custom_metadata_values (custom_metadata_field_id, owner_type, owner_id, project_id, asset_id, value, text_value, unique_key, updated_by_id, created_at, updated_at)
         SELECT ?, 'asset', ids.id, NULL, ids.id, ?, ?, NULL, ?, ?, ? FROM ? WHERE true
         ON CONFLICT (custom_metadata_field_id, owner_type, owner_id) DO UPDATE
           SET value = excluded.value, text_value = excluded.text_value, updated_by_id = excluded.updated_by_id, updated_at = excluded.updated_at
           WHERE custom_metadata_values.value <> excluded.value`,
        [field.id, stored.value, stored.text, userId, now, now, ids],
      )
    }
    return changed
  }

  // ---- generator ------------------------------------------------------------------------------

  /** the value the next take would get (nothing taken) */
  async peek(field: FieldRow, k: Knex = this.knex): Promise<string> {
    let n = field.counter
    for (let i = 0; i < 10_000; i++) {
      const value = renderTemplate(field.pattern!, ++n)
      if (!(await this.taken(k, field.id, value))) return value
    }
    throw new MamError('conflict', `Generator ${field.name}: no free value in 10,000 steps`)
  }

  async taken(k: Knex, fieldId: number, value: string): Promise<boolean> {
    return !!(await k('custom_metadata_values').where({ custom_metadata_field_id: fieldId, unique_key: value }).first('id'))
  }

  /**
   * Takes the next value inside `trx`: the counter update locks the field's row until the
   * transaction ends (PostgreSQL), or runs on SQLite's one writer, so no two takers read the same
   * number; a rollback returns it. Values someone set by hand are stepped over.
   */
  async take(trx: Knex, field: FieldRow): Promise<Stored> {
    for (let i = 0; i < 10_000; i++) {
      await trx('custom_metadata_fields').where({ id: field.id }).increment('counter', 1)
      const row = await trx('custom_metadata_fields').where({ id: field.id }).first('counter', 'pattern')
      const value = renderTemplate(row.pattern, Number(row.counter))
      if (!(await this.taken(trx, field.id, value))) return { value: JSON.stringify(value), text: value, uniqueKey: value }
    }
    throw new MamError('conflict', `Generator ${field.name}: no free value in 10,000 steps`)
  }

  /** whether a value fits the generator's template and nobody holds it */
  async check(field: FieldRow, value: string, k: Knex = this.knex): Promise<{ valid: boolean; free: boolean; message: string | null }> {
    const valid = field.pattern !== null && templateRegExp(field.pattern).test(value)
    const free = valid ? !(await this.taken(k, field.id, value)) : false
    return { valid, free, message: !valid ? `does not fit the template ${field.pattern}` : !free ? 'is taken' : null }
  }

  // ---- in use ---------------------------------------------------------------------------------

  async fieldUse(k: Knex, fieldIds: number[]): Promise<number> {
    if (!fieldIds.length) return 0
    let n = 0
    for (let i = 0; i < fieldIds.length; i += CHUNK) {
      const [{ count }] = await k('custom_metadata_values').whereIn('custom_metadata_field_id', fieldIds.slice(i, i + CHUNK)).count({ count: '*' })
      n += Number(count)
    }
    return n
  }

  /** value rows that hold the option (select: the id; multi-select: the id in the sorted list) */
  optionValues(k: Knex, option: OptionRow) {
    const id = String(option.id)
    return k('custom_metadata_values')
      .where('custom_metadata_field_id', option.fieldId)
      .where((w) => w.where('value', id).orWhere('value', `[${id}]`).orWhere('value', 'like', `[${id},%`).orWhere('value', 'like', `%,${id},%`).orWhere('value', 'like', `%,${id}]`))
  }

  async optionUse(k: Knex, option: OptionRow): Promise<number> {
    const [{ count }] = await this.optionValues(k, option).count({ count: '*' })
    return Number(count)
  }

  /** a set and its sub-sets, all the way down */
  async setTree(k: Knex, id: number): Promise<number[]> {
    const out = [id]
    for (let i = 0; i < out.length && out.length < 10_000; i++) for (const r of await k('custom_metadata_sets').where('parent_id', out[i]).select('id')) out.push(Number(r.id))
    return out
  }

  async setUse(k: Knex, setId: number): Promise<number> {
    const ids = await this.setTree(k, setId)
    const fieldIds = (await k('custom_metadata_fields').whereIn('custom_metadata_set_id', ids).select('id')).map((r: any) => Number(r.id))
    return this.fieldUse(k, fieldIds)
  }

  // ---- serialisation --------------------------------------------------------------------------

  serializeOption(o: OptionRow) {
    return {
      id: o.id,
      name: o.name,
      custom_metadata_field_id: o.fieldId,
      custom_metadata_sub_set_id: o.subSetId,
      safe_search: o.safeSearch,
      position: o.position,
      created_at: iso(o.createdAt),
      updated_at: iso(o.updatedAt),
    }
  }

  serializeField(f: FieldRow, options: OptionRow[]) {
    return {
      id: f.id,
      name: f.name,
      type: f.type,
      custom_metadata_set_id: f.setId,
      mandatory: f.mandatory,
      maxlen: f.maxlen,
      pattern: f.pattern,
      position: f.position,
      restriction: f.type === 'number' ? { min: f.min, max: f.max, integer: f.integer } : null,
      min: f.min,
      max: f.max,
      integer: f.integer,
      use_in_project_name: f.useInProjectName,
      select_field_options: f.type === 'select' || f.type === 'multi_select' ? options.map((o) => this.serializeOption(o)) : [],
      created_at: iso(f.createdAt),
      updated_at: iso(f.updatedAt),
    }
  }

  async renderFields(k: Knex, fields: FieldRow[]) {
    const options = await this.options(k, fields.map((f) => f.id))
    const byField = new Map<number, OptionRow[]>()
    for (const o of options) byField.set(o.fieldId, [...(byField.get(o.fieldId) ?? []), o])
    return fields.map((f) => this.serializeField(f, byField.get(f.id) ?? []))
  }

  async renderSets(k: Knex, sets: SetRow[]) {
    const fields = await this.fields(k, sets.map((s) => s.id))
    const rendered = await this.renderFields(k, fields)
    return sets.map((s) => ({
      id: s.id,
      name: s.name,
      applies_to: s.appliesTo,
      root: s.root,
      parent_id: s.parentId,
      position: s.position,
      project_id: s.scopeProjectId,
      asset_id: s.scopeAssetId,
      custom_metadata_fields: rendered.filter((f) => f.custom_metadata_set_id === s.id),
      created_at: iso(s.createdAt),
      updated_at: iso(s.updatedAt),
    }))
  }

  /** the value types by field, for callers that show a single datum */
  async datumOf(k: Knex, valueId: number): Promise<{ row: ValueRow; field: ScopedField; owner: MetadataOwner }> {
    const row = await k('custom_metadata_values').where({ id: valueId }).first()
    if (!row) throw notFound('custom metadatum', valueId)
    const v = valueOf(row)
    return { row: v, field: await this.field(v.fieldId, k), owner: { type: v.ownerType, id: v.ownerId } }
  }

  async renderDatum(k: Knex, valueId: number): Promise<Record<string, unknown>> {
    const { row, field, owner } = await this.datumOf(k, valueId)
    const history = (await this.history(k, owner)).get(field.id) ?? []
    return this.datum(row, field, owner, history, await this.safeOptions(k, [field]), await this.usernames(k, [row.updatedById]))
  }
}

export type { FieldType }
