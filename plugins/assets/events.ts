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

/** an asset's low-res link was mailed to an address; users with that address are told in the app too */
export const shareReceived = defineEvent('share.received', {
  plugin: 'assets',
  subject: 'asset',
  description: 'an asset was shared with you through your email address',
  payload: Type.Object({
    asset_id: Type.Integer(),
    name: Type.String(),
    project_id: Type.Integer(),
    share_id: Type.Integer(),
    email: Type.String(),
    expires_at: Type.String(),
    shared_by_id: Type.Integer(),
    /** the accounts with the address the link went to */
    recipient_ids: Type.Array(Type.Integer()),
  }),
  audience: (p) => ({ users: p.recipient_ids }),
})

/** an upload took a project, or a team that writes it, past the share of its quota that warns */
export const quotaNearLimit = defineEvent('quota.near-limit', {
  plugin: 'assets',
  subject: 'project',
  description: 'an upload filled a project or team quota past its warning level (90 %)',
  payload: Type.Object({
    scope: Type.Union([Type.Literal('project'), Type.Literal('team')]),
    project_id: Type.Integer(),
    project_name: Type.String(),
    team_id: Type.Union([Type.Integer(), Type.Null()]),
    team_name: Type.Union([Type.String(), Type.Null()]),
    quota: Type.Number(),
    used: Type.Number(),
    percent: Type.Integer(),
    uploaded_by_id: Type.Integer(),
  }),
  // a team's quota concerns its members; a project's, whoever works on it; both the administrators who set them
  audience: (p) => (p.scope === 'team' ? { teams: [p.team_id], admins: true } : { readers: true, admins: true }),
})

export const assetEvents = [assetIngested, assetProxyReady, shareReceived, quotaNearLimit]
