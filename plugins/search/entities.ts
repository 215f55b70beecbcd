import { EntitySchema } from '@mikro-orm/core'
import { Asset } from '../assets/index.js'

/**
 * A piece of text another plugin gives an asset for search (a transcript sentence, with its time),
 * written through `SearchService.setAssetTexts`. Its words are part of the asset's document (weight
 * `D` / FTS column `spoken`); the rows themselves say where in the asset a match is.
 */
export class SearchText {
  id!: number
  assetId!: number
  /** what gave it: `transcript` */
  source!: string
  /** the giver's grouping (the transcript's id) */
  sourceId!: number
  /** the giver's row (the sentence's id) */
  refId!: number
  startMs: number | null = null
  text!: string
}

export const SearchTextSchema = new EntitySchema<SearchText>({
  class: SearchText,
  tableName: 'search_texts',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    // lookups by asset use the (asset_id, source, source_id) index
    assetId: { kind: 'm:1', entity: () => Asset, mapToPk: true, fieldName: 'asset_id', deleteRule: 'cascade', index: false },
    source: { type: 'string', length: 40 },
    sourceId: { type: 'integer' },
    refId: { type: 'integer' },
    startMs: { type: 'integer', nullable: true },
    text: { type: 'text' },
  },
  indexes: [{ properties: ['assetId', 'source', 'sourceId'] }],
})
