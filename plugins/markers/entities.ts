import { EntitySchema } from '@mikro-orm/core'
import { BaseEntity, baseProperties, User } from '../../core/index.js'
import { Asset } from '../assets/index.js'

/**
 * A timecoded note on an asset (§4.7). `inFrame`/`outFrame` count frames from the asset's first
 * frame at `rateNum/rateDen` (never floating seconds); `outFrame` is inclusive, so a point marker has
 * `outFrame === inFrame`. A reply has a `parentId` and shares its parent's asset.
 */
export class MarkerDescription extends BaseEntity {
  assetId!: number
  parentId: number | null = null
  inFrame!: number
  outFrame!: number
  rateNum!: number
  rateDen!: number
  text!: string
  color!: string
  /** `V1`, `A2`, `TC1` … as editing suites name tracks */
  track: string | null = null
  /** the editing suite's user string (`_ATN_CRM_USER`), when the marker came from one */
  author: string | null = null
  /** the editing suite's own identifier of the marker (Avid `_ATN_CRM_ID`, Premiere guid, Resolve customData) */
  guid: string | null = null
  createdById: number | null = null
  updatedById: number | null = null
}

export const MarkerDescriptionSchema = new EntitySchema<MarkerDescription, BaseEntity>({
  class: MarkerDescription,
  tableName: 'marker_descriptions',
  properties: {
    ...baseProperties,
    // lookups by asset use the (asset_id, in_frame, id) index
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: false },
    parentId: { kind: 'm:1', entity: () => MarkerDescription, mapToPk: true, fieldName: 'parent_id', nullable: true, deleteRule: 'cascade', index: true },
    inFrame: { type: 'integer' },
    outFrame: { type: 'integer' },
    rateNum: { type: 'integer' },
    rateDen: { type: 'integer' },
    text: { type: 'text' },
    color: { type: 'string', length: 20 },
    track: { type: 'string', length: 20, nullable: true },
    author: { type: 'string', length: 255, nullable: true },
    guid: { type: 'string', length: 128, nullable: true },
    createdById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'created_by_id', nullable: true, deleteRule: 'set null', index: true },
    updatedById: { kind: 'm:1', entity: () => User, mapToPk: true, fieldName: 'updated_by_id', nullable: true, deleteRule: 'set null', index: true },
  },
  // the list of an asset in timeline order (keyset paging on in_frame, id)
  indexes: [{ properties: ['assetId', 'inFrame', 'id'] }],
  // an editing suite's id names one marker per asset (nulls do not collide)
  uniques: [{ properties: ['assetId', 'guid'] }],
})
