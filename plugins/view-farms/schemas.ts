import { IdParam, PageInput, Type } from '../../core/index.js'

export const ListInput = Type.Object({ ...PageInput }, { additionalProperties: false })

const JobTypes = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { minItems: 1, maxItems: 500 })

export const NodeFields = {
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  /** jobs the node runs at once; null: its process's own setting again */
  concurrency: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 256 }), Type.Null()])),
  /** the job types it claims; null: every type its process can run */
  job_types: Type.Optional(Type.Union([JobTypes, Type.Null()])),
}
export const NodeInput = Type.Object({ viewfarmnode: Type.Object(NodeFields, { additionalProperties: false }) }, { additionalProperties: false })

/** DELETE /view_farms/revoke?id=… (or a body `{"id": …}`) */
export const RevokeInput = Type.Object({ id: IdParam }, { additionalProperties: false })
