import { projectServices } from '../projects/refs.js'
import { assetServices } from '../assets/refs.js'
import { customMetadataServices } from './refs.js'
import type { Change, MetadataOwner } from './service.js'
import { BulkUpdate } from './jobs.js'
import {
  BULK_MAX,
  BulkInput,
  CopyInput,
  DatumInput,
  FieldInput,
  FieldListInput,
  ForceInput,
  NewDatumInput,
  OptionInput,
  OptionListInput,
  SetInput,
  UpdateMetadataInput,
} from './schemas.js'

import { IdParams, acceptedJob, coreServices, created, invalid, invalidParam, notFound, type MamContext, type ParamError, type Principal, type RegisterApi } from '../../core/index.js'
const MANAGE = 'metadata.manage'
/** above this many assets a bulk update runs as a job (202) */
export const BULK_INLINE_MAX = 1000
const OPTIONS_KEY = 'selectfieldoption::activerecord_relation' // wire.md

/**
 * The values hash as sent: JSON, or a form keyed by field ids or names (`custom_metadata[5]=x`; the
 * parameter parser keeps numbers in brackets as keys). A JSON list is refused with a message.
 */
export function valuesOf(raw: unknown, param = 'custom_metadata'): Record<string, unknown> {
  if (Array.isArray(raw)) throw invalidParam(param, 'must be a hash keyed by field id or name, not a list')
  return (raw ?? {}) as Record<string, unknown>
}

export function registerRoutes(api: RegisterApi) {
  const { routes } = api
  const service = api.use(customMetadataServices.service)
  const admin = api.use(customMetadataServices.admin)
  const projects = api.use(projectServices.service)
  const assets = api.use(assetServices.service)
  const jobs = api.use(coreServices.jobs)
  const knex = api.use(coreServices.knex)

  /** the owner after the caller's access check: read, or write (403 read-only, 423 frozen) */
  const reach = async (ctx: MamContext, principal: Principal, owner: MetadataOwner, write: boolean) => {
    if (owner.type === 'project') {
      if (write) await projects().writable(ctx.em, principal, owner.id)
      else await projects().readable(ctx.em, principal, owner.id)
    } else if (owner.type === 'asset') {
      if (write) await assets().writable(ctx.em, principal, owner.id)
      else await assets().readable(ctx.em, principal, owner.id)
    } else throw notFound(`custom metadata of ${owner.type}`, owner.id) // galleries answer through their own routes
  }

  // ---- sets -----------------------------------------------------------------------------------

  const oneSet = async (id: number) => (await service().renderSets(knex(), [await service().set(id)]))[0]

  routes.get('/custom_metadata_sets', { access: 'authenticated', summary: 'global custom metadata sets with their fields and options' }, async () => ({
    array: await service().renderSets(knex(), await service().sets()),
  }))
  routes.post('/custom_metadata_sets', { access: MANAGE, input: SetInput, wrap: 'custom_metadata_set', summary: 'create a set (name, applies_to project|asset|both, root, parent_id; project_id or asset_id: scoped)' }, async (ctx) => {
    const set = await admin().createSet(ctx.input.custom_metadata_set ?? {})
    return created(ctx, { custommetadataset: await oneSet(set.id) })
  })
  routes.get('/custom_metadata_sets/:id', { access: 'authenticated', params: IdParams, summary: 'a set with its fields' }, async (ctx) => ({ custommetadataset: await oneSet(ctx.params.id) }))
  routes.put('/custom_metadata_sets/:id', { access: MANAGE, params: IdParams, input: SetInput, wrap: 'custom_metadata_set', summary: 'change a set' }, async (ctx) => {
    const set = await admin().updateSet(await service().set(ctx.params.id), ctx.input.custom_metadata_set ?? {})
    return { custommetadataset: await oneSet(set.id) }
  })
  routes.delete('/custom_metadata_sets/:id', { access: MANAGE, params: IdParams, input: ForceInput, summary: 'delete a set, its sub-sets and fields (409 when in use unless force=true)' }, async (ctx) => {
    const body = { custommetadataset: await oneSet(ctx.params.id) }
    await admin().deleteSet(await service().set(ctx.params.id), ctx.input.force === true)
    return body
  })
  routes.get('/custom_metadata_sets/:id/in_use', { access: 'authenticated', params: IdParams, summary: 'whether any project or asset holds a value of the set' }, async (ctx) => {
    await service().set(ctx.params.id)
    const values = await service().setUse(knex(), ctx.params.id)
    return { hash: { id: ctx.params.id, in_use: values > 0, values } }
  })

  // ---- fields ---------------------------------------------------------------------------------

  const oneField = async (id: number) => (await service().renderFields(knex(), [await service().field(id)]))[0]

  routes.get('/custom_metadata_fields', { access: 'authenticated', input: FieldListInput, summary: 'custom metadata fields (optionally of one set)' }, async (ctx) => {
    const setId = ctx.input.custom_metadata_set_id
    return { array: await service().renderFields(knex(), await service().fields(knex(), setId === undefined ? undefined : [setId])) }
  })
  routes.post('/custom_metadata_fields', { access: MANAGE, input: FieldInput, wrap: 'custom_metadata_field', summary: 'create a field (name, type, custom_metadata_set_id, mandatory, maxlen, pattern, min, max, integer, position, use_in_project_name)' }, async (ctx) => {
    const field = await admin().createField(ctx.input.custom_metadata_field ?? {})
    return created(ctx, { custommetadatafield: await oneField(field.id) })
  })
  routes.get('/custom_metadata_fields/:id', { access: 'authenticated', params: IdParams, summary: 'a field with its options' }, async (ctx) => ({ custommetadatafield: await oneField(ctx.params.id) }))
  routes.put('/custom_metadata_fields/:id', { access: MANAGE, params: IdParams, input: FieldInput, wrap: 'custom_metadata_field', summary: 'change a field' }, async (ctx) => {
    await admin().updateField(await service().field(ctx.params.id), ctx.input.custom_metadata_field ?? {})
    return { custommetadatafield: await oneField(ctx.params.id) }
  })
  routes.delete('/custom_metadata_fields/:id', { access: MANAGE, params: IdParams, input: ForceInput, summary: 'delete a field (409 when in use unless force=true, which deletes its values)' }, async (ctx) => {
    const body = { custommetadatafield: await oneField(ctx.params.id) }
    await admin().deleteField(await service().field(ctx.params.id), ctx.input.force === true)
    return body
  })
  routes.put('/custom_metadata_fields/:id/copy', { access: MANAGE, params: IdParams, input: CopyInput, wrap: 'custom_metadata_field', summary: 'copy a field and its options to a set (custom_metadata_set_id; optional name)' }, async (ctx) => {
    const f = ctx.input.custom_metadata_field ?? {}
    const copy = await admin().copyField(await service().field(ctx.params.id), f.custom_metadata_set_id, f.name)
    return created(ctx, { custommetadatafield: await oneField(copy.id) })
  })
  routes.put('/custom_metadata_fields/:id/move', { access: MANAGE, params: IdParams, input: CopyInput, wrap: 'custom_metadata_field', summary: 'move a field to another set (409 when it has a field of that name)' }, async (ctx) => {
    const moved = await admin().moveField(await service().field(ctx.params.id), ctx.input.custom_metadata_field?.custom_metadata_set_id)
    return { custommetadatafield: await oneField(moved.id) }
  })
  routes.get('/custom_metadata_fields/:id/in_use', { access: 'authenticated', params: IdParams, summary: 'whether any project or asset holds a value of the field' }, async (ctx) => {
    await service().field(ctx.params.id)
    const values = await service().fieldUse(knex(), [ctx.params.id])
    return { hash: { id: ctx.params.id, in_use: values > 0, values } }
  })

  // ---- options --------------------------------------------------------------------------------

  routes.get('/select_field_options', { access: 'authenticated', input: OptionListInput, summary: 'select field options (optionally of one field)' }, async (ctx) => {
    const fieldId = ctx.input.custom_metadata_field_id
    const list = await service().options(knex(), fieldId === undefined ? undefined : [fieldId])
    return { [OPTIONS_KEY]: list.map((o) => service().serializeOption(o)) }
  })
  routes.post('/select_field_options', { access: MANAGE, input: OptionInput, wrap: 'select_field_option', summary: 'add an option to a select or multi-select field' }, async (ctx) => {
    const o = await admin().createOption(ctx.input.select_field_option ?? {})
    return created(ctx, { selectfieldoption: service().serializeOption(o) })
  })
  routes.get('/select_field_options/:id', { access: 'authenticated', params: IdParams, summary: 'an option' }, async (ctx) => ({ selectfieldoption: service().serializeOption(await service().option(ctx.params.id)) }))
  routes.put('/select_field_options/:id', { access: MANAGE, params: IdParams, input: OptionInput, wrap: 'select_field_option', summary: 'rename or reorder an option (values show the new name)' }, async (ctx) => {
    const o = await admin().updateOption(await service().option(ctx.params.id), ctx.input.select_field_option ?? {})
    return { selectfieldoption: service().serializeOption(o) }
  })
  routes.delete('/select_field_options/:id', { access: MANAGE, params: IdParams, input: ForceInput, summary: 'delete an option (409 when chosen unless force=true, which removes it from the values)' }, async (ctx) => {
    const o = await service().option(ctx.params.id)
    await admin().deleteOption(o, ctx.input.force === true)
    return { selectfieldoption: service().serializeOption(o) }
  })
  routes.get('/select_field_options/:id/in_use', { access: 'authenticated', params: IdParams, summary: 'whether any value holds the option' }, async (ctx) => {
    const values = await service().optionUse(knex(), await service().option(ctx.params.id))
    return { hash: { id: ctx.params.id, in_use: values > 0, values } }
  })

  // ---- single values --------------------------------------------------------------------------

  routes.get('/custom_metadata/new', { access: 'authenticated', input: NewDatumInput, summary: "a generator field's next value (nothing taken), or whether `value` fits and is free" }, async (ctx) => {
    const fieldId = ctx.input.custom_metadata_field_id ?? ctx.input.field_id
    if (fieldId === undefined) throw invalidParam('custom_metadata_field_id', 'is required')
    const field = await service().field(fieldId).catch(() => {
      throw invalidParam(ctx.input.custom_metadata_field_id !== undefined ? 'custom_metadata_field_id' : 'field_id', 'is not a custom metadata field')
    })
    if (field.type !== 'generator') throw invalidParam(ctx.input.custom_metadata_field_id !== undefined ? 'custom_metadata_field_id' : 'field_id', `is a ${field.type} field, not a generator`)
    if (ctx.input.value !== undefined) {
      const checked = await service().check(field, ctx.input.value)
      return { custommetadatum: { custom_metadata_field_id: field.id, value: ctx.input.value, ...checked } }
    }
    return { custommetadatum: { custom_metadata_field_id: field.id, value: await service().peek(field), valid: true, free: true, message: null } }
  })

  routes.post('/custom_metadata', { access: 'authenticated', input: DatumInput, wrap: 'custom_metadatum', summary: 'set one value on a project or asset (a generator takes its next value when none is given)' }, async (ctx) => {
    const f = ctx.input.custom_metadatum ?? {}
    const p = (k: string) => `custom_metadatum[${k}]`
    const errors: ParamError[] = []
    if (f.custom_metadata_field_id === undefined) errors.push({ param: p('custom_metadata_field_id'), message: 'is required' })
    if ((f.project_id === undefined) === (f.asset_id === undefined)) errors.push({ param: p('project_id'), message: 'give project_id or asset_id (one of them)' })
    if (errors.length) throw invalid(errors)
    const owner: MetadataOwner = f.project_id !== undefined ? { type: 'project', id: f.project_id } : { type: 'asset', id: f.asset_id! }
    await reach(ctx, ctx.user, owner, true)
    const id = await knex().transaction(async (trx) => {
      const fields = await service().applicableFields(trx, owner)
      const field = fields.find((x) => x.id === f.custom_metadata_field_id)
      if (!field) throw invalidParam(p('custom_metadata_field_id'), `is not a custom metadata field of this ${owner.type}`)
      if (await trx('custom_metadata_values').where({ custom_metadata_field_id: field.id, owner_type: owner.type, owner_id: owner.id }).first('id'))
        throw invalidParam(p('custom_metadata_field_id'), `has a value on this ${owner.type} already; change it with PUT /custom_metadata/:id`)
      let change: Change
      if ((f.value === undefined || f.value === null || f.value === '') && field.type === 'generator') change = { field, stored: null, take: true }
      else if (f.value === undefined || f.value === null) throw invalidParam(p('value'), 'is required')
      else change = (await service().resolve(trx, owner, { [String(field.id)]: f.value }, 'custom_metadatum', fields).catch((err) => {
        // name the parameter as sent: the value, not the hash key
        if (err?.extra?.errors) err.extra.errors = err.extra.errors.map((e: ParamError) => ({ ...e, param: p('value') }))
        throw err
      }))[0]
      await service().apply(trx, ctx.user.userId, owner, [change], { fields, checkMandatory: false, param: 'custom_metadatum' })
      return Number((await trx('custom_metadata_values').where({ custom_metadata_field_id: field.id, owner_type: owner.type, owner_id: owner.id }).first('id')).id)
    })
    return created(ctx, { custommetadatum: await service().renderDatum(knex(), id) })
  })

  routes.put('/custom_metadata/:id', { access: 'authenticated', params: IdParams, input: DatumInput, wrap: 'custom_metadatum', summary: 'change one value' }, async (ctx) => {
    const { field, owner } = await service().datumOf(knex(), ctx.params.id)
    await reach(ctx, ctx.user, owner, true)
    const value = ctx.input.custom_metadatum?.value
    if (value === undefined) throw invalidParam('custom_metadatum[value]', 'is required (DELETE clears a value)')
    await knex().transaction(async (trx) => {
      const fields = await service().applicableFields(trx, owner)
      const changes = await service().resolve(trx, owner, { [String(field.id)]: value }, 'custom_metadatum', fields).catch((err) => {
        if (err?.extra?.errors) err.extra.errors = err.extra.errors.map((e: ParamError) => ({ ...e, param: 'custom_metadatum[value]' }))
        throw err
      })
      if (changes[0]?.stored === null) throw invalidParam('custom_metadatum[value]', 'is empty; DELETE /custom_metadata/:id clears a value')
      await service().apply(trx, ctx.user.userId, owner, changes, { fields, checkMandatory: false, param: 'custom_metadatum' })
    })
    return { custommetadatum: await service().renderDatum(knex(), ctx.params.id) }
  })

  routes.delete('/custom_metadata/:id', { access: 'authenticated', params: IdParams, summary: 'clear one value (mandatory fields of a project refuse: 422)' }, async (ctx) => {
    const { field, owner } = await service().datumOf(knex(), ctx.params.id)
    await reach(ctx, ctx.user, owner, true)
    const body = { custommetadatum: await service().renderDatum(knex(), ctx.params.id) }
    await knex().transaction(async (trx) => {
      const fields = await service().applicableFields(trx, owner)
      const mandatory = fields.find((f) => f.id === field.id && f.mandatory && f.setParentId === null)
      if (owner.type === 'project' && mandatory) throw invalidParam(`custom_metadata[${field.name}]`, `is mandatory (${field.name}); it can change but not be cleared`)
      await service().apply(trx, ctx.user.userId, owner, [{ field: { ...field }, stored: null }], { fields, checkMandatory: false })
    })
    return body
  })

  // ---- values of projects and assets ----------------------------------------------------------

  for (const type of ['project', 'asset'] as const) {
    const base = `/${type}s/:id`
    routes.get(`${base}/custom_metadata`, { access: 'authenticated', params: IdParams, summary: `custom metadata values of a ${type}, each with who changed it last and its recent history` }, async (ctx) => {
      const owner: MetadataOwner = { type, id: ctx.params.id }
      await reach(ctx, ctx.user, owner, false)
      return { array: await service().list(ctx.em, owner) }
    })
    routes.put(`${base}/update_metadata`, { access: 'authenticated', params: IdParams, input: UpdateMetadataInput, summary: `set or clear custom metadata of a ${type} (custom_metadata: field id or name → value, null clears), all or nothing` }, async (ctx) => {
      const owner: MetadataOwner = { type, id: ctx.params.id }
      await reach(ctx, ctx.user, owner, true)
      return { array: await service().update(ctx.em, ctx.user, owner, valuesOf(ctx.input.custom_metadata)) }
    })
    routes.get(`${base}/scoped_custom_metadata_sets`, { access: 'authenticated', params: IdParams, summary: `the ${type}'s own custom metadata sets when it has any, else the global ones that apply to ${type}s` }, async (ctx) => {
      await reach(ctx, ctx.user, { type, id: ctx.params.id }, false)
      const own = await service().sets(knex(), { scope: { [type]: ctx.params.id } })
      const sets = own.length ? own : (await service().sets()).filter((s) => s.appliesTo === type || s.appliesTo === 'both')
      return { array: await service().renderSets(knex(), sets) }
    })
  }

  routes.post('/assets/bulk_update_custom_metadata', { access: 'authenticated', input: BulkInput, summary: `set or clear fields on up to ${BULK_MAX} assets, all or nothing; above ${BULK_INLINE_MAX} as a job (202)` }, async (ctx) => {
    const assetIds = [...new Set(ctx.input.asset_ids)]
    const values = valuesOf(ctx.input.custom_metadata)
    if (!Object.keys(values).length) throw invalidParam('custom_metadata', 'names no field')
    // every asset must exist and be writable: one read of their projects, one check per project
    const k = knex()
    const projectOf = new Map<number, number>()
    for (let i = 0; i < assetIds.length; i += 500)
      for (const r of await k('assets as a').join('projects as p', 'p.id', 'a.project_id').where('p.deleted', false).whereIn('a.id', assetIds.slice(i, i + 500)).select('a.id', 'a.project_id'))
        projectOf.set(Number(r.id), Number(r.project_id))
    const unknown = ctx.input.asset_ids.map((id, i) => [id, i] as const).filter(([id]) => !projectOf.has(id))
    if (unknown.length) throw invalid(unknown.slice(0, 20).map(([, i]) => ({ param: `asset_ids[${i}]`, message: 'is not an asset' })))
    for (const projectId of new Set(projectOf.values()))
      await projects().writable(ctx.em, ctx.user, projectId).catch((err) => {
        throw err?.status === 404 ? invalidParam('asset_ids', `holds assets of project ${projectId}, which you cannot read`) : err
      })
    const changes = await service().resolve(k, { type: 'asset', id: 0 }, values)
    const generators = changes.filter((c) => c.field.type === 'generator' && c.stored !== null)
    if (generators.length) throw invalid(generators.map((c) => ({ param: `custom_metadata[${c.field.name}]`, message: 'is a generator field: its values are unique per asset and cannot be set in bulk (null clears)' })))
    if (assetIds.length > BULK_INLINE_MAX) {
      const job = await jobs().enqueue(BulkUpdate.type, { assetIds, values, userId: ctx.user.userId }, { userId: ctx.user.userId })
      return acceptedJob(ctx, job)
    }
    const changed = await k.transaction((trx) => service().bulkApply(trx, ctx.user.userId, assetIds, changes))
    return { hash: { count: assetIds.length, changed } }
  })

}
