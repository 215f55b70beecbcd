import { randomBytes } from 'node:crypto'
import type { Mailer } from '../identity/index.js'
import { GUEST, type GuestScope } from './service.js'

import { MamError, column, iso, sha256, type CredentialResolver, type Knex, type Principal } from '../../core/index.js'
declare module '../../core/auth/principal.js' {
  interface PrincipalKinds {
    guest: true
  }
}

/** the server mails any address on a user's word: bounded per user and hour, like shares of assets */
export const SHARES_PER_HOUR = 50
/** `mg_` and 43 characters of base64url (32 random bytes); the core claims only `mk_`/`mt_` */
const TOKEN = /^mg_[A-Za-z0-9_-]{43}$/
const BEARER = /^Bearer\s+(\S+)$/i

/** a mail header must stay one line whatever the gallery or user is called */
export const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f]+/g, ' ')

export interface ShareRow {
  id: number
  gallery_id: number
  shared_by_id: number
  email: string
  message: string | null
  purpose: string
  allow_download: unknown
  allow_approval: unknown
  expires_at: unknown
  revoked_at: unknown
  access_count: unknown
  last_accessed_at: unknown
  created_at: unknown
  updated_at: unknown
}

/**
 * Email shares of galleries and the guest links they carry: a single-purpose token (one gallery;
 * view, and approve or download when the share allows it) that expires and can be revoked. Only its
 * SHA-256 is stored. The guest presents it as `Authorization: Bearer mg_…`, `X-Guest-Token` or the
 * `guest_token` parameter of the mailed link.
 */
export class GuestShares {
  constructor(
    private readonly knex: Knex,
    private readonly mailer: () => Mailer,
  ) {}

  async assertRate(userId: number): Promise<void> {
    const row = await this.knex('gallery_shares').where('shared_by_id', userId).where('created_at', '>', new Date(Date.now() - 3600_000)).count({ n: '*' }).first()
    const recent = Number(row?.n ?? 0)
    if (recent >= SHARES_PER_HOUR) throw new MamError('rate_limited', `You shared galleries by email ${recent} times within the last hour; the limit is ${SHARES_PER_HOUR}`, { headers: { 'Retry-After': '600' } })
  }

  /** a share row and its token (shown once, in the mail) */
  async create(db: Knex, input: { galleryId: number; sharedById: number; email: string; message: string | null; purpose: 'share' | 'review'; allowDownload: boolean; allowApproval: boolean; expiresAt: Date }) {
    const token = `mg_${randomBytes(32).toString('base64url')}`
    const at = new Date()
    const [row] = await db('gallery_shares')
      .insert({
        gallery_id: input.galleryId,
        shared_by_id: input.sharedById,
        email: input.email,
        message: input.message,
        token_hash: sha256(token),
        purpose: input.purpose,
        allow_download: input.allowDownload,
        allow_approval: input.allowApproval,
        expires_at: input.expiresAt,
        access_count: 0,
        created_at: at,
        updated_at: at,
      })
      .returning('id')
    const id = Number(typeof row === 'object' ? row.id : row)
    return { id, token }
  }

  async get(id: number): Promise<ShareRow | undefined> {
    return this.knex('gallery_shares').where({ id }).first()
  }

  async remove(id: number): Promise<void> {
    await this.knex('gallery_shares').where({ id }).delete()
  }

  async revoke(galleryId: number, id: number): Promise<boolean> {
    return (await this.knex('gallery_shares').where({ id, gallery_id: galleryId }).whereNull('revoked_at').update({ revoked_at: new Date(), updated_at: new Date() })) > 0
  }

  linkOf(galleryId: number, token: string): string {
    return `${this.mailer().settings.publicUrl}/api/v1/galleries/${galleryId}?guest_token=${token}`
  }

  async mail(to: string, subject: string, lines: string[]): Promise<void> {
    await this.mailer().send({ to, subject: oneLine(subject), text: lines.join('\n') })
  }

  serialize(s: ShareRow) {
    return {
      id: Number(s.id),
      gallery_id: Number(s.gallery_id),
      email: s.email,
      message: s.message,
      purpose: s.purpose,
      allow_download: column.bool(s.allow_download),
      allow_approval: column.bool(s.allow_approval),
      expires_at: iso(column.date(s.expires_at)),
      revoked_at: iso(column.date(s.revoked_at)),
      shared_by_id: Number(s.shared_by_id),
      access_count: Number(s.access_count),
      last_accessed_at: iso(column.date(s.last_accessed_at)),
      created_at: iso(column.date(s.created_at)),
      updated_at: iso(column.date(s.updated_at)),
    }
  }

  /** the credential resolver of guest links: a principal scoped to the link's gallery */
  resolver(): CredentialResolver {
    return {
      name: 'gallery-guest-link',
      extract(ctx, query, body) {
        const auth = ctx.req.headers.authorization
        if (auth) {
          const m = BEARER.exec(auth)
          if (m && m[1].startsWith('mg_')) return m[1]
        }
        const header = ctx.req.headers['x-guest-token']
        if (typeof header === 'string' && header.startsWith('mg_')) return header
        const param = query.guest_token ?? (body && typeof body === 'object' ? (body as Record<string, unknown>).guest_token : undefined)
        return typeof param === 'string' && param.startsWith('mg_') ? param : undefined
      },
      resolve: async (raw) => {
        if (!TOKEN.test(raw)) return null
        const share = await this.knex('gallery_shares as s').join('users as u', 'u.id', 's.shared_by_id').where('s.token_hash', sha256(raw)).first('s.*', 'u.username', 'u.role_id')
        if (!share) return null
        if (share.revoked_at !== null || column.date(share.expires_at)!.getTime() <= Date.now()) return null
        await this.knex('gallery_shares').where({ id: share.id }).update({ access_count: this.knex.raw('access_count + 1'), last_accessed_at: new Date() })
        const scope: GuestScope = {
          kind: GUEST,
          id: Number(share.gallery_id),
          share_id: Number(share.id),
          email: share.email,
          allow_download: column.bool(share.allow_download),
          allow_approval: column.bool(share.allow_approval),
        }
        const principal: Principal = {
          userId: Number(share.shared_by_id),
          username: `guest:${share.email}`,
          roleId: Number(share.role_id),
          // never the sharer's privileges: the scope alone decides what the link opens
          isAdmin: false,
          capabilities: new Set(),
          via: 'guest',
          credentialId: Number(share.id),
          scope: scope as unknown as Principal['scope'],
        }
        return principal
      },
    }
  }
}
