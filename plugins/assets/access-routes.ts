import { Type } from 'typebox'
import { IdParam, IdParams, notFound, type RegisterApi } from '../../core/index.js'
import { AccessRight, identityServices } from '../identity/index.js'
import { PROJECT, projectServices } from '../projects/index.js'
import { assetServices } from './refs.js'

const AssetParams = Type.Object({ asset_id: IdParam })
const AssetRightParams = Type.Object({ asset_id: IdParam, id: IdParam })

/**
 * §4.3 for assets. An asset has no rights of its own: it is reached through its project, so these
 * routes show and remove the rights of the project the asset belongs to.
 */
export function registerAssetAccessRoutes(api: RegisterApi) {
  const { routes } = api
  const assets = api.use(assetServices.service)
  const projects = api.use(projectServices.service)
  const rights = api.use(identityServices.accessRights)
  routes.get('/assets/:asset_id/access_rights', { access: 'authenticated', params: AssetParams, summary: 'the access rights that reach an asset (its project’s)' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.asset_id)
    const found = await ctx.em.find(AccessRight, { objectType: PROJECT.type, objectId: asset.project.id }, { populate: ['team'], orderBy: { id: 'asc' } })
    const service = rights()
    return { access_rights: found.map((r) => ({ ...service.serialize(r), team_name: r.team.name })) }
  })

  routes.delete('/assets/:asset_id/access_rights/:id', { access: 'authenticated', params: AssetRightParams, summary: 'remove an access right that reaches an asset' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.asset_id)
    await projects().writable(ctx.em, ctx.requireUser(), asset.project.id)
    const right = await ctx.em.findOne(AccessRight, { id: ctx.params.id, objectType: PROJECT.type, objectId: asset.project.id }, { populate: ['team'] })
    if (!right) throw notFound('access right', ctx.params.id)
    const body = { access_right: rights().serialize(right) }
    await ctx.em.remove(right).flush()
    return body
  })

  routes.get('/assets/:id/access_right_type', { access: 'authenticated', params: IdParams, summary: 'none, read, write or admin for the current user' }, async (ctx) => {
    const asset = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id).catch(() => null)
    // "none" is an answer here, not a 404: the caller asks what it may do
    const type = asset ? asset.right : 'none'
    return { hash: { access_right_type: type, asset_id: ctx.params.id } }
  })
}
