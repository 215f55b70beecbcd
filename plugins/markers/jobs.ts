import { Type } from 'typebox'
import { defineJob, IdParam, permanentError, type RegisterApi } from '../../core/index.js'
import { Asset } from '../assets/index.js'
import { markerServices } from './refs.js'

/** a marker and its replies queued for the editing client of an edit; the job's result is what the client collects */
export const PushToApp = defineJob('markers.push-to-app', Type.Object({ assetId: IdParam, markerId: IdParam, editId: IdParam }))

export function defineMarkerJobs(api: RegisterApi) {
  api.jobs.define(PushToApp, {
    kind: 'asset',
    maxAttempts: 3,
    async handler(ctx) {
      const { assetId, markerId, editId } = ctx.payload
      const service = ctx.resolve(markerServices.service)
      const asset = await ctx.em.findOne(Asset, assetId)
      if (!asset) throw permanentError(`asset ${assetId} is gone`)
      const row = await service.row(assetId, markerId).catch(() => {
        throw permanentError(`marker ${markerId} of asset ${assetId} is gone`)
      })
      const replies = (await service.repliesOf([row.id])).get(row.id) ?? []
      ctx.count(1, 0)
      // the editing client of the edit reads this from GET /edit/status or GET /asset_status/:id
      return { edit_id: editId, asset_id: assetId, markerdescription: service.serialize(row, service.timeline(asset), replies) }
    },
  })
}
