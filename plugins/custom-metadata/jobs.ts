import { Type } from 'typebox'
import { customMetadataServices } from './refs.js'
import { BULK_MAX } from './schemas.js'

import { IdParam, MamError, coreServices, defineJob, permanentError, type RegisterApi } from '../../core/index.js'
/** a bulk update of more than 1,000 assets: checked by the request, written here in one transaction */
export const BulkUpdate = defineJob(
  'custom-metadata.bulk-update',
  Type.Object({ assetIds: Type.Array(IdParam, { maxItems: BULK_MAX }), values: Type.Record(Type.String(), Type.Unknown()), userId: Type.Union([IdParam, Type.Null()]) }),
)

export function defineJobs(api: RegisterApi) {
  api.jobs.define(BulkUpdate, {
    kind: 'generic',
    maxAttempts: 3,
    async handler(ctx) {
      const service = ctx.resolve(customMetadataServices.service)
      const knex = ctx.resolve(coreServices.knex)
      // the fields may have changed since the request: check again, and fail for good on a misfit
      const changes = await service.resolve(knex, { type: 'asset', id: 0 }, ctx.payload.values).catch((err) => {
        throw err instanceof MamError ? permanentError(err.detail) : err
      })
      const changed = await knex.transaction((trx) => service.bulkApply(trx, ctx.payload.userId, ctx.payload.assetIds, changes))
      ctx.count(ctx.payload.assetIds.length, 0)
      return { count: ctx.payload.assetIds.length, changed }
    },
  })
}
