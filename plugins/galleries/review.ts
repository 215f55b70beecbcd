import { reviewCompleted, reviewRequested, reviewStatusChanged } from './events.js'
import { guestOf } from './service.js'

import { MamError, column, forbidden, invalid, iso, notFound, type Knex, type Outbox, type ParamError, type Principal } from '../../core/index.js'
export type Rule = 'all' | 'any'
export type Decision = 'approved' | 'rejected' | 'needs_changes'
export type Overall = 'pending' | Decision
export const DECISIONS: readonly Decision[] = ['approved', 'rejected', 'needs_changes']

/** states whose requests still decide an asset's status; cancelled and superseded ones no longer do */
const LIVE = ['open', 'completed', 'forced']

export interface NewRequest {
  galleryId: number
  assetIds: number[]
  folders: string[]
  approverIds: number[]
  /** each with the id of the review link mailed to it */
  approverEmails: Array<{ email: string; shareId: number | null }>
  rule: Rule
  comment: string | null
}

const now = () => new Date()

/**
 * The overall status of an asset under its request: `all` needs every approver's approval (one
 * rejection rejects, one "needs changes" holds it); `any` takes the first approval, and rejects only
 * when every approver rejected or asked for changes.
 */
export function overallOf(rule: Rule, state: string, n: number, approved: number, rejected: number, changes: number): Overall {
  if (state === 'forced') return 'approved'
  if (rule === 'any') {
    if (approved > 0) return 'approved'
    if (changes > 0) return 'needs_changes'
    if (n > 0 && rejected === n) return 'rejected'
    return 'pending'
  }
  if (rejected > 0) return 'rejected'
  if (changes > 0) return 'needs_changes'
  if (n > 0 && approved === n) return 'approved'
  return 'pending'
}

/**
 * Review requests of galleries: approvers (users, or addresses with review links) decide per asset;
 * a request covers single assets and folders (every asset in them, also ones added later), and the
 * newest live request that covers an asset decides its status. Every change goes to review_history.
 */
export class ReviewService {
  constructor(
    private readonly knex: Knex,
    private readonly outbox: Outbox,
  ) {}

  /** SQL: the entry `e` lies in what item `i` covers (its asset, its folder, or below it) */
  private static COVERS = `(i.asset_id = e.asset_id or i.folder = '' or e.folder = i.folder or substr(e.folder, 1, length(i.folder) + 1) = i.folder || '/')`

  /**
   * The overall review status of the gallery's assets (all, or `assetIds`), in one query: the newest
   * live request covering each asset, its approver count and the decisions on that asset.
   */
  async statusOf(galleryId: number, assetIds?: number[], db: Knex = this.knex): Promise<Map<number, { status: Overall; requestId: number }>> {
    const covering = db('gallery_entries as e')
      .join('review_requests as r', function () {
        this.on('r.gallery_id', '=', 'e.gallery_id')
      })
      .whereIn('r.state', LIVE)
      .join('review_request_items as i', function () {
        this.on('i.request_id', '=', 'r.id')
      })
      .whereRaw(ReviewService.COVERS)
      .where('e.gallery_id', galleryId)
      .groupBy('e.asset_id')
      .select('e.asset_id', db.raw('max(r.id) as request_id'))
    if (assetIds) covering.whereIn('e.asset_id', assetIds)
    const rows = await db
      .with('cov', covering)
      .from('cov')
      .join('review_requests as r', 'r.id', 'cov.request_id')
      .leftJoin('review_statuses as s', function () {
        this.on('s.request_id', '=', 'cov.request_id').andOn('s.asset_id', '=', 'cov.asset_id')
      })
      .groupBy('cov.asset_id', 'cov.request_id', 'r.rule', 'r.state')
      .select(
        'cov.asset_id',
        'cov.request_id',
        'r.rule',
        'r.state',
        db.raw('(select count(*) from review_approvers ap where ap.request_id = cov.request_id) as approvers'),
        db.raw(`sum(case when s.status = 'approved' then 1 else 0 end) as approved`),
        db.raw(`sum(case when s.status = 'rejected' then 1 else 0 end) as rejected`),
        db.raw(`sum(case when s.status = 'needs_changes' then 1 else 0 end) as changes`),
      )
    const out = new Map<number, { status: Overall; requestId: number }>()
    for (const r of rows as any[])
      out.set(Number(r.asset_id), { requestId: Number(r.request_id), status: overallOf(r.rule, r.state, Number(r.approvers), Number(r.approved ?? 0), Number(r.rejected ?? 0), Number(r.changes ?? 0)) })
    return out
  }

  private history(db: Knex, rows: Array<{ gallery_id: number; request_id: number | null; asset_id?: number | null; action: string; status?: string | null; comment?: string | null; actor_user_id?: number | null; actor_email?: string | null }>) {
    if (!rows.length) return Promise.resolve()
    return db('review_history').insert(rows.map((r) => ({ asset_id: null, status: null, comment: null, actor_user_id: null, actor_email: null, ...r, created_at: now() })))
  }

  async create(principal: Principal, req: NewRequest, trx: Knex): Promise<number> {
    const [row] = await trx('review_requests')
      .insert({ gallery_id: req.galleryId, requested_by_id: principal.userId, rule: req.rule, comment: req.comment, state: 'open', created_at: now(), updated_at: now() })
      .returning('id')
    const id = Number(typeof row === 'object' ? row.id : row)
    const items = [...req.assetIds.map((a) => ({ request_id: id, asset_id: a, folder: null })), ...req.folders.map((f) => ({ request_id: id, asset_id: null, folder: f }))]
    for (let i = 0; i < items.length; i += 500) await trx('review_request_items').insert(items.slice(i, i + 500))
    const approvers = [
      ...req.approverIds.map((u) => ({ request_id: id, user_id: u, email: null, share_id: null, created_at: now(), updated_at: now() })),
      ...req.approverEmails.map((e) => ({ request_id: id, user_id: null, email: e.email.toLowerCase(), share_id: e.shareId, created_at: now(), updated_at: now() })),
    ]
    await trx('review_approvers').insert(approvers)
    await this.history(trx, [{ gallery_id: req.galleryId, request_id: id, action: 'requested', comment: req.comment, actor_user_id: principal.userId }])
    await this.outbox.publish(
      trx,
      reviewRequested,
      {
        gallery_id: req.galleryId,
        request_id: id,
        rule: req.rule,
        approver_ids: req.approverIds,
        approver_emails: req.approverEmails.map((e) => e.email),
        asset_ids: req.assetIds,
        paths: req.folders,
        requested_by_id: principal.userId,
      },
      { subjectId: req.galleryId, actorId: principal.userId },
    )
    return id
  }

  /** the newest live, not forced request of the gallery covering the asset */
  private async currentRequest(db: Knex, galleryId: number, assetId: number): Promise<any | undefined> {
    const status = (await this.statusOf(galleryId, [assetId], db)).get(assetId)
    if (!status) return undefined
    return db('review_requests').where({ id: status.requestId }).first()
  }

  /** the approver row of the principal on a request: a user by id, a guest by the address of its link */
  private async approverOf(db: Knex, requestId: number, principal: Principal) {
    const guest = guestOf(principal)
    const q = db('review_approvers').where({ request_id: requestId })
    return guest ? q.where({ email: guest.email.toLowerCase() }).first() : q.where({ user_id: principal.userId }).first()
  }

  /** the principal's decision on an asset under the request that currently covers it */
  async decide(principal: Principal, galleryId: number, assetId: number, status: Decision, comment: string | null) {
    const guest = guestOf(principal)
    return this.knex.transaction(async (trx) => {
      const request = await this.currentRequest(trx, galleryId, assetId)
      if (!request || request.state === 'forced') throw notFound('open review request for asset', assetId)
      const approver = await this.approverOf(trx, request.id, principal)
      if (!approver) throw forbidden(`You are not an approver of review request ${request.id}`)
      await trx('review_statuses')
        .insert({ request_id: request.id, approver_id: approver.id, asset_id: assetId, status, comment, created_at: now(), updated_at: now() })
        .onConflict(['approver_id', 'asset_id'])
        .merge(['status', 'comment', 'updated_at'])
      await this.history(trx, [{ gallery_id: galleryId, request_id: request.id, asset_id: assetId, action: 'decided', status, comment, actor_user_id: guest ? null : principal.userId, actor_email: guest?.email ?? null }])
      const overall = (await this.statusOf(galleryId, [assetId], trx)).get(assetId)!.status
      const requestedBy = column.intOrNull(request.requested_by_id)
      await this.outbox.publish(
        trx,
        reviewStatusChanged,
        { gallery_id: galleryId, request_id: Number(request.id), asset_id: assetId, status, overall_status: overall, approver_user_id: guest ? null : principal.userId, approver_email: guest?.email ?? null, requested_by_id: requestedBy },
        { subjectId: galleryId, actorId: guest ? null : principal.userId },
      )
      // complete once every covered asset has a final status; of two last decisions racing, the conditional update lets one publish
      const statuses = await this.statusOf(galleryId, undefined, trx)
      const covered = [...statuses.values()].filter((s) => s.requestId === Number(request.id))
      if (covered.every((s) => s.status === 'approved' || s.status === 'rejected')) {
        const closed = await trx('review_requests').where({ id: request.id, state: 'open' }).update({ state: 'completed', closed_at: now(), updated_at: now() })
        if (closed) {
          await this.history(trx, [{ gallery_id: galleryId, request_id: request.id, action: 'completed' }])
          await this.outbox.publish(trx, reviewCompleted, { gallery_id: galleryId, request_id: Number(request.id), state: 'completed', requested_by_id: requestedBy }, { subjectId: galleryId, actorId: guest ? null : principal.userId })
        }
      }
      return { requestId: Number(request.id), overall }
    })
  }

  /** cancels the request that currently covers the asset: its requester or a user who may change the gallery */
  async cancel(principal: Principal, galleryId: number, assetId: number, canWrite: boolean): Promise<number> {
    return this.knex.transaction(async (trx) => {
      const request = await this.currentRequest(trx, galleryId, assetId)
      if (!request || request.state === 'forced') throw notFound('open review request for asset', assetId)
      if (!canWrite && column.intOrNull(request.requested_by_id) !== principal.userId) throw forbidden('Only the requester or a user who may change the gallery cancels a review request')
      const changed = await trx('review_requests').where({ id: request.id }).whereIn('state', ['open', 'completed']).update({ state: 'cancelled', closed_by_id: principal.userId, closed_at: now(), updated_at: now() })
      if (!changed) throw new MamError('conflict', `Review request ${request.id} was closed meanwhile`)
      await this.history(trx, [{ gallery_id: galleryId, request_id: request.id, asset_id: assetId, action: 'cancelled', actor_user_id: principal.userId }])
      return Number(request.id)
    })
  }

  /**
   * Force-approves assets and folders: a `forced` request covers them (so it decides their status),
   * and every earlier live request covering any of them is superseded (no longer decides anything).
   */
  async force(principal: Principal, galleryId: number, assetIds: number[], folders: string[], comment: string | null): Promise<number> {
    return this.knex.transaction(async (trx) => {
      const [row] = await trx('review_requests')
        .insert({ gallery_id: galleryId, requested_by_id: principal.userId, rule: 'all', comment, state: 'forced', closed_by_id: principal.userId, closed_at: now(), created_at: now(), updated_at: now() })
        .returning('id')
      const id = Number(typeof row === 'object' ? row.id : row)
      const items = [...assetIds.map((a) => ({ request_id: id, asset_id: a, folder: null })), ...folders.map((f) => ({ request_id: id, asset_id: null, folder: f }))]
      for (let i = 0; i < items.length; i += 500) await trx('review_request_items').insert(items.slice(i, i + 500))
      // the assets the forced request covers, and the earlier requests that covered them
      const covered = await trx('gallery_entries as e')
        .join('review_request_items as i', function () {
          this.on('i.request_id', '=', trx.raw('?', [id]))
        })
        .whereRaw(ReviewService.COVERS)
        .where('e.gallery_id', galleryId)
        .distinct('e.asset_id')
      const coveredIds = covered.map((r: any) => Number(r.asset_id))
      const earlier: number[] = []
      for (let i = 0; i < coveredIds.length; i += 500) {
        const rows = await trx('gallery_entries as e')
          .join('review_requests as r', 'r.gallery_id', 'e.gallery_id')
          .join('review_request_items as i', 'i.request_id', 'r.id')
          .whereRaw(ReviewService.COVERS)
          .where('e.gallery_id', galleryId)
          .whereIn('r.state', ['open', 'completed', 'forced'])
          .where('r.id', '<', id)
          .whereIn('e.asset_id', coveredIds.slice(i, i + 500))
          .distinct('r.id')
        for (const r of rows) earlier.push(Number(r.id))
      }
      const superseded = [...new Set(earlier)]
      if (superseded.length) await trx('review_requests').whereIn('id', superseded).update({ state: 'superseded', closed_by_id: principal.userId, closed_at: now(), updated_at: now() })
      await this.history(trx, [
        ...superseded.map((r) => ({ gallery_id: galleryId, request_id: r, action: 'superseded', actor_user_id: principal.userId })),
        ...coveredIds.map((a) => ({ gallery_id: galleryId, request_id: id, asset_id: a, action: 'forced', status: 'approved', comment, actor_user_id: principal.userId })),
      ])
      await this.outbox.publish(trx, reviewCompleted, { gallery_id: galleryId, request_id: id, state: 'forced', requested_by_id: principal.userId }, { subjectId: galleryId, actorId: principal.userId })
      return id
    })
  }

  /** a request with its approvers, items, decisions and the overall status of the assets it decides */
  async show(id: number) {
    const request = await this.knex('review_requests').where({ id }).first()
    if (!request) throw notFound('review request', id)
    const [items, approvers, statuses, history] = await Promise.all([
      this.knex('review_request_items').where({ request_id: id }).orderBy('id'),
      this.knex('review_approvers as ap').leftJoin('users as u', 'u.id', 'ap.user_id').where({ 'ap.request_id': id }).orderBy('ap.id').select('ap.id', 'ap.user_id', 'ap.email', 'u.username'),
      this.knex('review_statuses').where({ request_id: id }).orderBy('id'),
      this.knex('review_history').where({ request_id: id }).orderBy('id'),
    ])
    const overall = await this.statusOf(Number(request.gallery_id))
    return {
      id: Number(request.id),
      gallery_id: Number(request.gallery_id),
      requested_by_id: column.intOrNull(request.requested_by_id),
      rule: request.rule,
      comment: request.comment,
      state: request.state,
      closed_by_id: column.intOrNull(request.closed_by_id),
      closed_at: iso(column.date(request.closed_at)),
      asset_ids: items.filter((i: any) => i.asset_id !== null).map((i: any) => Number(i.asset_id)),
      paths: items.filter((i: any) => i.folder !== null).map((i: any) => i.folder),
      approvers: approvers.map((a: any) => ({
        id: Number(a.id),
        user_id: column.intOrNull(a.user_id),
        username: a.username ?? null,
        email: a.email,
        statuses: statuses.filter((s: any) => Number(s.approver_id) === Number(a.id)).map((s: any) => ({ asset_id: Number(s.asset_id), status: s.status, comment: s.comment, updated_at: iso(column.date(s.updated_at)) })),
      })),
      assets: [...overall.entries()].filter(([, s]) => s.requestId === id).map(([assetId, s]) => ({ asset_id: assetId, review_status: s.status })),
      history: history.map((h: any) => ({ action: h.action, asset_id: column.intOrNull(h.asset_id), status: h.status, comment: h.comment, actor_user_id: column.intOrNull(h.actor_user_id), actor_email: h.actor_email, created_at: iso(column.date(h.created_at)) })),
      created_at: iso(column.date(request.created_at)),
      updated_at: iso(column.date(request.updated_at)),
    }
  }

  /** checks review targets: assets of the gallery and existing gallery folders; errors name them as sent */
  async checkTargets(galleryId: number, assetIds: number[], folders: Array<{ path: string; param: string }>, exists: (folder: string) => Promise<boolean>, present: Set<number>) {
    const errors: ParamError[] = []
    assetIds.forEach((a, i) => {
      if (!present.has(a)) errors.push({ param: `asset_ids[${i}]`, message: 'is not an asset of this gallery' })
    })
    for (const f of folders) if (!(await exists(f.path))) errors.push({ param: f.param, message: 'is not a folder of this gallery' })
    if (errors.length) throw invalid(errors)
  }
}
