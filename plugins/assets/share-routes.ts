import { randomBytes } from 'node:crypto'
import { Type } from 'typebox'
import { raw } from '@mikro-orm/core'
import { IdParam, IdParams, Page, MamError, coreServices, forbidden, notFound, sha256, User, iso, type RegisterApi } from '../../core/index.js'
import { identityServices } from '../identity/index.js'
import type { Asset } from './entities.js'
import { assetServices } from './refs.js'
import { lowresKind, sendProxy } from './proxy-routes.js'
import { AssetShare, serializeShare } from './shares.js'
import { shareReceived } from './events.js'

// one address only: no list separators, brackets or quotes that would turn `to` into several recipients
const Email = Type.String({ maxLength: 254, pattern: '^[^\\s@<>,;"()\\[\\]\\\\]+@[^\\s@<>,;"()\\[\\]\\\\]+\\.[^\\s@<>,;"()\\[\\]\\\\]+$' })
const ShareInput = Type.Object(
  {
    email: Email,
    message: Type.Optional(Type.String({ maxLength: 2000 })),
    expires_in_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 30, default: 7 })),
  },
  { additionalProperties: false },
)
const ShareParams = Type.Object({ id: IdParam, share_id: IdParam })
const ListInput = Type.Object(Page, { additionalProperties: false })
// no pattern here: a malformed token is answered like an unknown one (404), not with a 422 that states the rules
const TokenParams = Type.Object({ token: Type.String() })
const SHARES_PER_HOUR = 50
/** 32 random bytes in base64url */
const TOKEN = /^[A-Za-z0-9_-]{43}$/

/** a mail header must stay one line whatever the file or user is called */
const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f]+/g, ' ')

/** Sharing an asset's low-res proxy with someone without an account, through an expiring emailed link. */
export function registerShareRoutes(api: RegisterApi) {
  const { routes } = api
  const assets = api.use(assetServices.service)
  const proxyStore = api.use(assetServices.proxyStore)
  const mailerOf = api.use(identityServices.mailer)
  const outbox = api.use(coreServices.outbox)
  const playable = (asset: Asset) => proxyStore().fileOf(asset, lowresKind(asset)) !== null

  routes.put('/assets/:id/share_via_email', { access: 'authenticated', params: IdParams, input: ShareInput, summary: 'share the asset with a user through an email address (an expiring link to its low-res proxy)' }, async (ctx) => {
    // sharing is a read: read access suffices and a frozen project does not block it
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    if (!playable(asset)) {
      // an analysed `other` asset never gets one; anything else may still be on its way
      const why = asset.type === 'other' && asset.analysisState === 'ready' ? 'is of type other and has no playable proxy to share' : `has no playable proxy yet (analysis_state: ${asset.analysisState}, proxy_state: ${asset.proxyState})`
      throw new MamError('conflict', `Asset ${asset.id} ${why}`, { analysis_state: asset.analysisState, proxy_state: asset.proxyState })
    }
    const mailer = mailerOf()
    mailer.assertConfigured()
    // the server sends mail to any address on a user's word: bound how much, per user and hour
    const recent = await ctx.em.count(AssetShare, { sharedBy: ctx.user.userId, createdAt: { $gt: new Date(Date.now() - 3600_000) } })
    if (recent >= SHARES_PER_HOUR) throw new MamError('rate_limited', `You shared ${recent} assets by email within the last hour; the limit is ${SHARES_PER_HOUR}`, { headers: { 'Retry-After': '600' } })

    const token = randomBytes(32).toString('base64url')
    const sharedBy = await ctx.em.findOneOrFail(User, ctx.user.userId)
    const { email, message, expires_in_days: days } = ctx.input
    const share = ctx.em.create(AssetShare, { asset, sharedBy, email, message: message || null, tokenHash: sha256(token), expiresAt: new Date(Date.now() + (days ?? 7) * 86_400_000) })
    await ctx.em.flush()

    const fullName = [sharedBy.firstname, sharedBy.lastname].filter(Boolean).join(' ')
    const who = fullName || sharedBy.username
    const link = `${mailer.settings.publicUrl}/api/v1/asset_shares/${token}`
    try {
      await mailer.send({
        to: email,
        subject: oneLine(`${who} shared "${asset.name}" with you`),
        text: [
          `${fullName ? `${fullName} (${sharedBy.username})` : who} shared "${asset.name}" with you.`,
          ...(share.message ? ['', `Message from ${who}:`, '', share.message] : []),
          '',
          'Watch it in your browser, no account needed:',
          '',
          `  ${link}`,
          '',
          `The link works until ${iso(share.expiresAt)} (UTC).`,
          '',
        ].join('\n'),
      })
    } catch (err) {
      await ctx.em.remove(share).flush() // a link nobody received must not stay valid
      throw err
    }
    // told once the mail went out (a link whose mail failed is removed above, so no event may announce it);
    // accounts with that address hear it in the app too, when they may read the asset
    const recipients = await ctx.em.find(User, { [raw('lower(email)')]: email.toLowerCase() }, { fields: ['id'] })
    await outbox().publish(
      ctx.em,
      shareReceived,
      { asset_id: asset.id, name: asset.name, project_id: asset.project.id, share_id: share.id, email, expires_at: share.expiresAt.toISOString(), shared_by_id: sharedBy.id, recipient_ids: recipients.map((u) => u.id) },
      { subjectId: asset.id, actorId: sharedBy.id },
    )
    return { asset_share: serializeShare(share) }
  })

  routes.get('/assets/:id/shares', { access: 'authenticated', params: IdParams, input: ListInput, summary: 'the email shares of an asset, newest first' }, async (ctx) => {
    const { asset } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    const perPage = ctx.input.per_page ?? 100
    const [shares, total] = await ctx.em.findAndCount(AssetShare, { asset }, { populate: ['sharedBy'], orderBy: { createdAt: 'desc', id: 'desc' }, limit: perPage, offset: ((ctx.input.page ?? 1) - 1) * perPage })
    ctx.set('X-Total-Count', String(total))
    return { asset_shares: shares.map(serializeShare) }
  })

  routes.delete('/assets/:id/shares/:share_id', { access: 'authenticated', params: ShareParams, summary: 'revoke an email share (its sharer, or a user with write on the project)' }, async (ctx) => {
    const { asset, right } = await assets().readable(ctx.em, ctx.requireUser(), ctx.params.id)
    const share = await ctx.em.findOne(AssetShare, { id: ctx.params.share_id, asset }, { populate: ['sharedBy'] })
    if (!share) throw notFound('asset share', ctx.params.share_id)
    // revoking withdraws a read, it does not change the project: write right is enough, frozen or not
    if (share.sharedBy.id !== ctx.user.userId && right === 'read') throw forbidden('Only the user who shared it or a user who may change the project revokes a share')
    share.revokedAt ??= new Date()
    await ctx.em.flush()
    return { asset_share: serializeShare(share) }
  })

  routes.get('/asset_shares/:token', { access: 'public', params: TokenParams, summary: "play a shared asset's low-res proxy (the emailed link), with HTTP Range" }, async (ctx) => {
    const token = ctx.params.token as string
    if (!TOKEN.test(token)) throw notFound('asset share')
    const share = await ctx.em.findOne(AssetShare, { tokenHash: sha256(token) }, { populate: ['asset', 'asset.project'] })
    if (!share) throw notFound('asset share')
    if (share.revokedAt) throw new MamError('gone', `This link was revoked on ${iso(share.revokedAt)}`)
    if (share.expiresAt.getTime() <= Date.now()) throw new MamError('gone', `This link expired on ${iso(share.expiresAt)}`)
    const asset = share.asset
    // the anonymous caller learns nothing about ids: a deleted project or a vanished proxy reads like no share
    if (asset.project.deleted || !playable(asset)) throw notFound('shared asset')
    // the link is a capability: no shared cache keeps it, no referrer carries it on, no search engine lists it
    ctx.set('Cache-Control', 'private, no-store')
    ctx.set('Referrer-Policy', 'no-referrer')
    ctx.set('X-Robots-Tag', 'noindex')
    await sendProxy(ctx, asset, lowresKind(asset))
    // a player fetches many ranges per viewing; count the requests that start at the beginning
    if (!/^bytes=(?!0-)/.test(ctx.get('range').trim()))
      await ctx.em.nativeUpdate(AssetShare, { id: share.id }, { accessCount: raw('access_count + 1'), lastAccessedAt: new Date() })
  })
}
