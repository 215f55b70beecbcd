import { Type } from 'typebox'
import { defineEvent } from '../../core/index.js'

/** a file was uploaded into a project and has its asset row */
export const assetIngested = defineEvent('asset.ingested', {
  plugin: 'assets',
  subject: 'asset',
  description: 'a file was uploaded into a project',
  payload: Type.Object({ asset_id: Type.Integer(), name: Type.String(), folder: Type.String(), size: Type.Number(), project_id: Type.Integer(), project_name: Type.String() }),
  audience: () => ({ readers: true }),
})

export const assetProxyReady = defineEvent('asset.proxy-ready', {
  plugin: 'assets',
  subject: 'asset',
  description: 'the low-res proxies of an asset were made',
  payload: Type.Object({ asset_id: Type.Integer(), name: Type.String(), project_id: Type.Integer(), proxies: Type.Array(Type.String()) }),
  audience: () => ({ readers: true }),
})

export const assetEvents = [assetIngested, assetProxyReady]
