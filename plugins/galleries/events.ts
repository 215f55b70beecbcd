import { Type } from 'typebox'
import { defineEvent } from '../../core/index.js'
/** approvers were asked to review assets of a gallery */
export const reviewRequested = defineEvent('review.requested', {
  plugin: 'galleries',
  subject: 'gallery',
  description: 'approvers were asked to review assets or folders of a gallery',
  payload: Type.Object({
    gallery_id: Type.Integer(),
    request_id: Type.Integer(),
    rule: Type.String(),
    approver_ids: Type.Array(Type.Integer()),
    approver_emails: Type.Array(Type.String()),
    asset_ids: Type.Array(Type.Integer()),
    paths: Type.Array(Type.String()),
    requested_by_id: Type.Integer(),
  }),
  audience: (p) => ({ users: p.approver_ids }),
})

/** one approver decided on one asset */
export const reviewStatusChanged = defineEvent('review.status-changed', {
  plugin: 'galleries',
  subject: 'gallery',
  description: "an approver set an asset's review status",
  payload: Type.Object({
    gallery_id: Type.Integer(),
    request_id: Type.Integer(),
    asset_id: Type.Integer(),
    status: Type.String(),
    overall_status: Type.String(),
    approver_user_id: Type.Union([Type.Integer(), Type.Null()]),
    approver_email: Type.Union([Type.String(), Type.Null()]),
    requested_by_id: Type.Union([Type.Integer(), Type.Null()]),
  }),
  audience: (p) => ({ users: [p.requested_by_id] }),
})

/** every asset of a request has its overall status decided, or the request was forced */
export const reviewCompleted = defineEvent('review.completed', {
  plugin: 'galleries',
  subject: 'gallery',
  description: 'a review request was decided for every asset it covers, or force-approved',
  payload: Type.Object({ gallery_id: Type.Integer(), request_id: Type.Integer(), state: Type.String(), requested_by_id: Type.Union([Type.Integer(), Type.Null()]) }),
  audience: (p) => ({ users: [p.requested_by_id] }),
})

/** a gallery was shared with an email address */
export const galleryShared = defineEvent('gallery.shared', {
  plugin: 'galleries',
  subject: 'gallery',
  description: 'a gallery was shared through an email address',
  payload: Type.Object({ gallery_id: Type.Integer(), share_id: Type.Integer(), email: Type.String(), expires_at: Type.String(), allow_download: Type.Boolean(), allow_approval: Type.Boolean() }),
  audience: () => ({ readers: true }),
})

export const galleryEvents = [reviewRequested, reviewStatusChanged, reviewCompleted, galleryShared]
