import { IdParams, andThen, coreServices, invalid, type RegisterApi, type MamContext, type ParamError } from '../../core/index.js'
import { DeleteInput, TemplateInput } from './schemas.js'
import { readPatterns } from './patterns-input.js'
import type { TemplateChanges } from './service.js'
import { templateServices } from './refs.js'
import { TEMPLATE_TYPES } from './types.js'

const MANAGE = 'templates.manage'

/** §4.1: all seven template endpoints. */
export function registerTemplateRoutes({ routes }: RegisterApi) {
  const service = (ctx: MamContext) => ctx.resolve(templateServices.service)

  routes.get('/templates', { access: 'authenticated', summary: 'list all templates' }, (ctx) =>
    andThen(service(ctx).listSerialized(ctx.resolve(coreServices.knex), ctx.user), (templates) => ({ templates })),
  )

  routes.get('/templates/:id', { access: 'authenticated', params: IdParams, summary: 'show a template' }, (ctx) =>
    andThen(service(ctx).getSerialized(ctx.resolve(coreServices.knex), ctx.params.id, ctx.user), (template) => ({ template })),
  )

  routes.post('/templates', { access: MANAGE, input: TemplateInput, summary: 'create a template' }, async (ctx) => {
    const changes = readChanges(ctx, true)
    const s = service(ctx)
    ctx.status = 201
    return { template: s.serialize(await s.create(ctx.em, changes as Required<TemplateChanges>), ctx.user) }
  })

  routes.post('/templates/:id/duplicate', { access: MANAGE, params: IdParams, summary: 'copy a template and its folder' }, async (ctx) => {
    const s = service(ctx)
    ctx.status = 201
    return { template: s.serialize(await s.duplicate(ctx.em, ctx.params.id), ctx.user) }
  })

  routes.put('/templates/:id', { access: MANAGE, params: IdParams, input: TemplateInput, summary: 'update a template' }, async (ctx) => {
    const s = service(ctx)
    await s.get(ctx.em, ctx.params.id) // an unknown id is a 404 before the pattern checks (schema errors come first, in core)
    return { template: s.serialize(await s.update(ctx.em, ctx.params.id, readChanges(ctx, false)), ctx.user) }
  })

  routes.delete('/templates/:id', { access: MANAGE, params: IdParams, input: DeleteInput, summary: 'delete a template and its folder' }, async (ctx) => {
    const s = service(ctx)
    return { template: s.serialize(await s.remove(ctx.em, ctx.params.id, ctx.input.ignore_missing_directory), ctx.user) }
  })

  routes.get('/template_types', { access: 'authenticated', summary: 'list all template types' }, () => ({ template_types: TEMPLATE_TYPES }))
}

/** `template[...]` plus `substitution_patterns` (top level or inside `template`), with the spec's required fields. */
function readChanges(ctx: MamContext, creating: boolean): TemplateChanges {
  const template = ctx.input.template ?? {}
  const errors: ParamError[] = []
  if (creating) {
    if (template.name === undefined) errors.push({ param: 'template[name]', message: 'is required' })
    if (template.template_type === undefined) errors.push({ param: 'template[template_type]', message: 'is required' })
  }
  const top = readPatterns(ctx.input.substitution_patterns, 'substitution_patterns', ctx.typedInput, errors)
  const nested = readPatterns(template.substitution_patterns, 'template[substitution_patterns]', ctx.typedInput, errors)
  if (errors.length) throw invalid(errors)
  return {
    name: template.name?.normalize('NFC'),
    templateType: template.template_type,
    position: template.position,
    substitutionPatterns: top ?? nested,
  }
}
