import { identityServices } from '../identity/refs.js'
import { galleryServices } from './refs.js'
import { GALLERY, galleryPath, guestOf } from './service.js'
import { AssetParams, AssetReviewInput, CancelInput, DecideInput, ForceInput, GalleryIdParams, ReviewRequestInput } from './schemas.js'
import { GUEST_SCOPES } from './routes.js'
import type { Rule } from './review.js'

import { ADMIN_ROLE, User, coreServices, invalid, invalidParam, notFound, type ParamError, type Principal, type RegisterApi } from '../../core/index.js'
const DAY = 86_400_000
/** review links live as long as a review usually takes */
const REVIEW_LINK_DAYS = 30

/** §4.16 review requests: ask approvers, decide, cancel, force-approve (both listings' routes) */
export function registerReviewRoutes(api: RegisterApi) {
  const { routes } = api
  const galleries = api.use(galleryServices.service)
  const review = api.use(galleryServices.review)
  const shares = api.use(galleryServices.shares)
  const rights = api.use(identityServices.accessRights)
  const mailer = api.use(identityServices.mailer)
  const knex = api.use(coreServices.knex)

  /** the gallery an asset route acts in: `gallery_id`, a guest link's gallery, or the one gallery holding the asset */
  const galleryOfAsset = async (principal: Principal, assetId: number, galleryId: number | undefined): Promise<number> => {
    const guest = guestOf(principal)
    if (galleryId !== undefined) return galleryId
    if (guest) return guest.id
    const rows = await knex()('gallery_entries').where({ asset_id: assetId }).select('gallery_id')
    const ids = rows.map((r: any) => Number(r.gallery_id))
    if (ids.length === 0) throw notFound('asset in a gallery', assetId)
    if (ids.length > 1) throw invalidParam('gallery_id', 'is required: the asset is in several galleries')
    return ids[0]
  }

  /** approver user ids must be users who can read the gallery */
  const checkApprovers = async (ctx: { em: any }, galleryId: number, ids: number[], param = 'approver_ids') => {
    const readers = await rights().effective(GALLERY.type, galleryId)
    const errors: ParamError[] = []
    for (const [i, id] of ids.entries()) {
      if (readers[String(id)]) continue
      const user = await ctx.em.findOne(User, id, { populate: ['role'] })
      if (!user) errors.push({ param: `${param}[${i}]`, message: 'is not a known user' })
      else if (user.role?.name !== ADMIN_ROLE) errors.push({ param: `${param}[${i}]`, message: 'is a user who cannot read this gallery' })
    }
    if (errors.length) throw invalid(errors)
  }

  /** targets as sent: assets of the gallery and existing folders */
  const targets = async (galleryId: number, assetIds: number[], paths: string[]) => {
    const folders = paths.map((p, i) => ({ path: galleryPath(p, paths.length > 1 ? `paths[${i}]` : 'paths'), param: paths.length > 1 ? `paths[${i}]` : 'paths' }))
    const present = await galleries().entriesAmong(knex(), galleryId, assetIds)
    await review().checkTargets(galleryId, assetIds, folders, (f) => galleries().folderExists(knex(), galleryId, f), present)
    return folders.map((f) => f.path)
  }

  /** creates a request; addresses get review links by mail after the commit (a failed mail undoes the request) */
  const request = async (ctx: any, galleryId: number, galleryName: string, input: { assetIds: number[]; folders: string[]; approverIds: number[]; emails: string[]; rule: Rule; comment: string | null }) => {
    const emails = [...new Set(input.emails.map((e) => e.toLowerCase()))]
    if (emails.length) {
      mailer().assertConfigured()
      await shares().assertRate(ctx.user.userId)
    }
    const links: Array<{ email: string; token: string; shareId: number }> = []
    const id = await knex().transaction(async (trx) => {
      const approverEmails = []
      for (const email of emails) {
        const share = await shares().create(trx, { galleryId, sharedById: ctx.user.userId, email, message: input.comment, purpose: 'review', allowDownload: false, allowApproval: true, expiresAt: new Date(Date.now() + REVIEW_LINK_DAYS * DAY) })
        links.push({ email, token: share.token, shareId: share.id })
        approverEmails.push({ email, shareId: share.id })
      }
      return review().create(ctx.user, { galleryId, assetIds: input.assetIds, folders: input.folders, approverIds: [...new Set(input.approverIds)], approverEmails, rule: input.rule, comment: input.comment }, trx)
    })
    try {
      for (const link of links)
        await shares().mail(link.email, `${ctx.user.username} asks for your review of "${galleryName}"`, [
          `${ctx.user.username} asks you to review ${input.assetIds.length + input.folders.length === 1 ? 'an item' : 'items'} of the gallery "${galleryName}".`,
          ...(input.comment ? ['', input.comment] : []),
          '',
          'Review and approve in your browser, no account needed:',
          '',
          `  ${shares().linkOf(galleryId, link.token)}`,
          '',
          `The link works for ${REVIEW_LINK_DAYS} days.`,
          '',
        ])
    } catch (err) {
      await knex()('review_requests').where({ id }).delete()
      await knex()('gallery_shares').whereIn('id', links.map((l) => l.shareId)).delete()
      throw err
    }
    return id
  }

  routes.post(
    '/galleries/:gallery_id/review_request',
    { access: 'authenticated', params: GalleryIdParams, input: ReviewRequestInput, summary: 'ask approvers (approver_ids, approver_emails) to review asset_ids and/or folders (paths) by rule all|any' },
    async (ctx) => {
      const { gallery } = await galleries().access(ctx.user, ctx.params.gallery_id, 'write')
      const { asset_ids = [], paths = [], approver_ids = [], approver_emails = [], rule = 'all', comment } = ctx.input
      const errors: ParamError[] = []
      if (!asset_ids.length && !paths.length) errors.push({ param: 'asset_ids', message: 'or paths is required: what to review' })
      if (!approver_ids.length && !approver_emails.length) errors.push({ param: 'approver_ids', message: 'or approver_emails is required: who reviews' })
      if (errors.length) throw invalid(errors)
      const folders = await targets(gallery.id, asset_ids, paths)
      await checkApprovers(ctx, gallery.id, approver_ids)
      const id = await request(ctx, gallery.id, gallery.name, { assetIds: [...new Set(asset_ids)], folders, approverIds: approver_ids, emails: approver_emails, rule, comment: comment ?? null })
      ctx.status = 201
      return { reviewrequest: await review().show(id) }
    },
  )

  routes.put(
    '/galleries/:gallery_id/review_request',
    { access: 'authenticated', params: GalleryIdParams, input: ForceInput, summary: 'force-approve asset_ids and/or folders (paths); earlier requests covering them no longer count' },
    async (ctx) => {
      const { gallery } = await galleries().access(ctx.user, ctx.params.gallery_id, 'write')
      const { asset_ids = [], paths = [], comment } = ctx.input
      if (!asset_ids.length && !paths.length) throw invalidParam('asset_ids', 'or paths is required: what to approve')
      const folders = await targets(gallery.id, asset_ids, paths)
      const id = await review().force(ctx.user, gallery.id, [...new Set(asset_ids)], folders, comment ?? null)
      return { reviewrequest: await review().show(id) }
    },
  )

  routes.patch(
    '/assets/:asset_id/review_request',
    { access: 'authenticated', params: AssetParams, input: DecideInput, scopes: GUEST_SCOPES, summary: "set the current user's (or review link's) status of an asset: approved, rejected, needs_changes, with a comment" },
    async (ctx) => {
      const galleryId = await galleryOfAsset(ctx.user, ctx.params.asset_id, ctx.input.gallery_id)
      const { gallery } = await galleries().access(ctx.user, galleryId, guestOf(ctx.user) ? 'approve' : 'read')
      await galleries().entry(gallery.id, ctx.params.asset_id)
      const { requestId } = await review().decide(ctx.user, gallery.id, ctx.params.asset_id, ctx.input.status, ctx.input.comment ?? null)
      return { reviewrequest: await review().show(requestId) }
    },
  )

  routes.delete('/assets/:asset_id/review_request', { access: 'authenticated', params: AssetParams, input: CancelInput, summary: 'cancel the review request that covers the asset (its requester, or a user who may change the gallery)' }, async (ctx) => {
    const galleryId = await galleryOfAsset(ctx.user, ctx.params.asset_id, ctx.input.gallery_id)
    const { gallery, right } = await galleries().access(ctx.user, galleryId, 'read')
    await galleries().entry(gallery.id, ctx.params.asset_id)
    const id = await review().cancel(ctx.user, gallery.id, ctx.params.asset_id, right !== 'read')
    return { reviewrequest: await review().show(id) }
  })

  routes.post(
    '/assets/:asset_id/review_request',
    { access: 'authenticated', params: AssetParams, input: AssetReviewInput, summary: 'older listing: ask the gallery approvers to review the asset; when a request is open already, force-approve it' },
    async (ctx) => {
      const galleryId = await galleryOfAsset(ctx.user, ctx.params.asset_id, ctx.input.gallery_id)
      const { gallery } = await galleries().access(ctx.user, galleryId, 'write')
      await galleries().entry(gallery.id, ctx.params.asset_id)
      const current = (await review().statusOf(gallery.id, [ctx.params.asset_id])).get(ctx.params.asset_id)
      const open = current ? await knex()('review_requests').where({ id: current.requestId }).whereIn('state', ['open', 'completed']).first('id') : undefined
      if (open) {
        // the second POST of the older listing: approve by force, earlier requests stop counting
        const id = await review().force(ctx.user, gallery.id, [ctx.params.asset_id], [], ctx.input.comment ?? null)
        return { reviewrequest: await review().show(id) }
      }
      // "all gallery approvers": the named ones, else every user who can read the gallery but the requester
      let approvers = ctx.input.approver_ids ?? []
      if (approvers.length) await checkApprovers(ctx, gallery.id, approvers)
      else approvers = Object.keys(await rights().effective(GALLERY.type, gallery.id)).map(Number).filter((u) => u !== ctx.user.userId)
      if (!approvers.length) throw invalidParam('approver_ids', 'is required: no other user can read this gallery to approve')
      const id = await request(ctx, gallery.id, gallery.name, { assetIds: [ctx.params.asset_id], folders: [], approverIds: approvers, emails: [], rule: ctx.input.rule ?? 'all', comment: ctx.input.comment ?? null })
      ctx.status = 201
      return { reviewrequest: await review().show(id) }
    },
  )
}
