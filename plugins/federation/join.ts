import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import canonicalize from 'canonicalize'
import { conflict, deriveKey, forbidden, invalidParam, MamError, seal, unseal, type Knex } from '../../core/index.js'
import { TABLES } from './migrations.js'
import type { FederationService } from './service.js'
import { fingerprintOf, shortIdOf, verifySignature } from './site.js'
import type { SitePrincipal } from './signing.js'
import type { WireCrdt } from './store.js'

/**
 * The join handshake (FEDERATION.md §6.2): an admin of a member (the sponsor) issues a single-use
 * invite carrying the sponsor's URL, its key fingerprint, a token id and a 256-bit secret; an admin
 * of the new site hands the invite to its server, which says hello (signed with its key, with an
 * HMAC of the secret as proof), checks the sponsor's key against the pinned fingerprint, copies
 * the snapshot and finalises. No PKI and no clocks: the expiry is checked on the sponsor's clock only.
 */
export interface HelloBody {
  phase: 'hello'
  token_id: string
  site: { uuid: string; name: string; base_url: string | null; public_key: string; replica: string }
  nonce_j: string
  proof: string
}

const proofOf = (secret: string, body: Omit<HelloBody, 'proof'>) => createHmac('sha256', Buffer.from(secret, 'base64url')).update(canonicalize(body) ?? '').digest('base64')

export function parseInvite(invite: string): { url: string; fingerprint: string; tokenId: string; secret: string } {
  const parts = invite.split('|').map((p) => p.trim())
  if (parts.length !== 4) throw invalidParam('invite', 'must be "<sponsor url>|<key fingerprint>|<token id>|<secret>" as issued by initiate_join')
  const [url, fingerprint, tokenId, secret] = parts
  try {
    const u = new URL(url)
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error()
  } catch {
    throw invalidParam('invite', 'does not start with the sponsor site\'s http(s) URL')
  }
  if (!/^[A-Z2-7]{4}(-[A-Z2-7]{1,4})+$/.test(fingerprint) || !/^[A-Za-z0-9_-]{16,32}$/.test(tokenId) || !/^[A-Za-z0-9_-]{43}$/.test(secret)) throw invalidParam('invite', 'is malformed')
  return { url, fingerprint, tokenId, secret }
}

export class JoinService {
  private readonly sealingKey: Buffer

  constructor(
    private readonly fed: FederationService,
    secretKey: Buffer,
  ) {
    this.sealingKey = deriveKey(secretKey, 'federation.invites')
  }

  private get knex(): Knex {
    return this.fed.knex
  }

  /** step 1, on the sponsor: a single-use invite for a site to come */
  async invite(userId: number, input: { name: string; base_url?: string | null }, sponsorUrl: string): Promise<{ invite: string; token_id: string; expires_at: Date; fingerprint: string; federation: string }> {
    const federation = await this.fed.ensureFederation(sponsorUrl)
    const self = this.fed.site.current
    const tokenId = randomBytes(12).toString('base64url')
    const secret = randomBytes(32).toString('base64url')
    const expiresAt = new Date(Date.now() + this.fed.settings().inviteTtlMinutes * 60_000)
    const now = new Date()
    await this.knex(TABLES.invites).insert({ token_id: tokenId, secret_sealed: seal(this.sealingKey, secret, tokenId), name: input.name, base_url: input.base_url ?? null, created_by_id: userId, expires_at: expiresAt, created_at: now, updated_at: now })
    const url = self.base_url ?? sponsorUrl
    return { invite: `${url}|${this.fed.site.fingerprint()}|${tokenId}|${secret}`, token_id: tokenId, expires_at: expiresAt, fingerprint: this.fed.site.fingerprint(), federation }
  }

  /** step 2, on the sponsor: the joiner's hello, signed with the key inside it */
  async hello(principal: SitePrincipal, body: HelloBody) {
    if (principal.scope.id !== body.site.uuid || principal.scope.publicKey !== body.site.public_key) throw forbidden('The hello must be signed by the key of the site it introduces')
    const self = await this.fed.site.load()
    if (!self.federation_uuid) throw conflict('This site has no federation to join')
    const invite = await this.knex(TABLES.invites).where({ token_id: body.token_id }).first()
    if (!invite) throw invalidParam('token_id', 'is not an invite of this site')
    const secret = unseal(this.sealingKey, invite.secret_sealed, invite.token_id)
    const { proof, ...unsigned } = body
    const expected = Buffer.from(proofOf(secret, unsigned))
    const given = Buffer.from(String(proof))
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalidParam('proof', 'does not prove possession of the invite secret')
    if (invite.used_at) throw conflict('The invite was used already')
    if (new Date(invite.expires_at).getTime() < Date.now()) throw conflict('The invite has expired')
    const short = shortIdOf(body.site.uuid)
    if (body.site.replica.split('.')[0] !== short) throw invalidParam('site[replica]', 'does not belong to the site uuid')
    if (body.site.uuid === self.site_uuid || short === shortIdOf(self.site_uuid)) throw conflict('The joining site collides with the sponsor\'s site id')
    const peers = await this.fed.peers()
    if (peers.some((p) => p.site_uuid !== body.site.uuid && shortIdOf(p.site_uuid) === short)) throw conflict('The joining site\'s short id collides with a member\'s; it must make a new identity')
    if (peers.some((p) => p.site_uuid === body.site.uuid && p.status !== 'pending')) throw conflict('This site is a member already (or left; a site that left needs a new identity)')
    const nonceS = randomBytes(16).toString('base64url')
    await this.fed.transaction(async (_em, k) => {
      // single use: of two hellos with one token, only one sets used_at
      const taken = await k(TABLES.invites).where({ id: invite.id }).whereNull('used_at').update({ used_at: new Date(), joiner_site: body.site.uuid, nonce: nonceS, updated_at: new Date() })
      if (!taken) throw conflict('The invite was used already')
      const fields = { name: body.site.name, base_url: body.site.base_url, public_key: body.site.public_key, replica: body.site.replica, status: 'pending', updated_at: new Date() }
      const existing = await k(TABLES.peers).where({ site_uuid: body.site.uuid }).first()
      if (existing) await k(TABLES.peers).where({ id: existing.id }).update(fields)
      else await k(TABLES.peers).insert({ site_uuid: body.site.uuid, ...fields, created_at: new Date() })
    })
    const sites = (await this.fed.peers()).filter((p) => p.status !== 'pending').map((p) => ({ uuid: p.site_uuid, name: p.name, base_url: p.base_url, public_key: p.public_key, replica: p.replica, status: p.status }))
    return {
      federation: self.federation_uuid,
      sponsor: { uuid: self.site_uuid, name: self.name, base_url: self.base_url, public_key: self.public_key, replica: this.fed.replica() },
      sites,
      nonce_s: nonceS,
      signature: this.fed.site.sign(`${body.nonce_j}\n${body.site.public_key}\n${self.federation_uuid}`),
    }
  }

  /** step 4, on the sponsor: the joiner has the snapshot; it becomes an active member and its site record is gossiped */
  async activate(principal: SitePrincipal, body: { nonce_s: string; watermark: number; signature: string }) {
    if (principal.scope.status !== 'pending') throw conflict(`This site is ${principal.scope.status}, not waiting to join`)
    const invite = await this.knex(TABLES.invites).where({ joiner_site: principal.scope.id, nonce: body.nonce_s }).first()
    if (!invite) throw invalidParam('nonce_s', 'does not belong to a hello of this site')
    if (!verifySignature(principal.scope.publicKey, `${body.nonce_s}\n${body.watermark}`, body.signature)) throw invalidParam('signature', 'is not the joining site\'s signature over the nonce and watermark')
    const self = await this.fed.site.load()
    const peer = (await this.fed.peer(principal.scope.id))!
    await this.fed.transaction(async (_em, k) => {
      const moved = await k(TABLES.peers).where({ site_uuid: peer.site_uuid, status: 'pending' }).update({ status: 'active', introduced_by: self.site_uuid, updated_at: new Date() })
      if (!moved) throw conflict('The site was activated already')
      await this.fed.store.writeLocal(k, this.fed.replica(), { uuid: peer.site_uuid, type: 'site', origin_site: peer.site_uuid, owner_site: peer.site_uuid }, {
        name: peer.name,
        base_url: peer.base_url,
        'public_keys/k1': peer.public_key,
        replica: peer.replica,
        status: 'active',
        pull_only: false,
        introduced_by: self.site_uuid,
      })
    })
    return { site: { uuid: peer.site_uuid, name: peer.name, status: 'active', introduced_by: self.site_uuid } }
  }

  /** the joiner's side (steps 2–5), run by an admin of the new site with the invite */
  async join(inviteText: string, local: { name?: string; base_url?: string | null }, selfUrl: string) {
    const invite = parseInvite(inviteText)
    let self = await this.fed.site.load()
    if (self.federation_uuid) throw conflict('This site is in a federation already')
    if (local.name || local.base_url !== undefined || !self.base_url) self = await this.fed.site.update(this.knex, { name: local.name ?? self.name, base_url: local.base_url ?? self.base_url ?? selfUrl })
    const unsigned = {
      phase: 'hello' as const,
      token_id: invite.tokenId,
      site: { uuid: self.site_uuid, name: self.name, base_url: self.base_url, public_key: self.public_key, replica: this.fed.replica() },
      nonce_j: randomBytes(16).toString('base64url'),
    }
    const hello = await this.fed.call(invite.url, 'POST', '/federation/initiate_join', { ...unsigned, proof: proofOf(invite.secret, unsigned) })
    if (hello.status !== 200) throw this.refused('hello', hello)
    const h = hello.body?.join
    if (typeof h?.sponsor?.public_key !== 'string' || fingerprintOf(h.sponsor.public_key) !== invite.fingerprint) throw invalidParam('invite', 'the sponsor\'s key does not match the fingerprint in the invite')
    if (!verifySignature(h.sponsor.public_key, `${unsigned.nonce_j}\n${self.public_key}\n${h.federation}`, String(h.signature))) throw invalidParam('invite', 'the sponsor\'s answer is not signed by its key')
    await this.fed.transaction(async (_em, k) => {
      await this.fed.site.update(k, { federation_uuid: h.federation })
      const now = new Date()
      for (const s of [{ ...h.sponsor, status: 'active' }, ...(h.sites as any[])]) {
        if (s.uuid === self.site_uuid) continue
        const fields = { name: String(s.name), base_url: s.base_url ?? null, public_key: String(s.public_key), replica: s.replica ?? null, status: String(s.status), updated_at: now }
        const existing = await k(TABLES.peers).where({ site_uuid: s.uuid }).first()
        if (existing) await k(TABLES.peers).where({ id: existing.id }).update(fields)
        else await k(TABLES.peers).insert({ site_uuid: s.uuid, ...fields, created_at: now })
      }
      await this.fed.writeSiteRecord(k, self.site_uuid, await this.fed.ownSiteFields())
    })
    // step 3: the snapshot, page by page (each page merged and committed: resumable)
    let cursor: string | null = null
    let watermark: number | undefined
    let records = 0
    do {
      const q: string = `/federation/initial_data?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`
      const page: { status: number; body: any } = await this.fed.call(invite.url, 'GET', q)
      if (page.status !== 200) throw this.refused('initial_data', page)
      const data = page.body.initial_data
      watermark ??= Number(data.watermark.seq)
      const crdts = data.crdts as WireCrdt[]
      await this.fed.transaction((em, k) => this.fed.mergeAll(em, k, crdts))
      records += crdts.length
      cursor = data.cursor
    } while (cursor)
    const sponsorUuid = String(h.sponsor.uuid)
    await this.knex(TABLES.peers).where({ site_uuid: sponsorUuid }).update({ recv_seq: watermark ?? 0, updated_at: new Date() })
    const done = await this.fed.call(invite.url, 'POST', '/federation/finalize_join', { nonce_s: h.nonce_s, watermark: watermark ?? 0, signature: this.fed.site.sign(`${h.nonce_s}\n${watermark ?? 0}`) })
    if (done.status !== 200) throw this.refused('finalize_join', done)
    // step 5: this site's own data flows out through an ordinary push
    const sponsor = await this.fed.peer(sponsorUuid)
    if (sponsor) await this.fed.pushTo(sponsor).catch(() => undefined)
    return { federation: String(h.federation), sponsor: sponsorUuid, records, watermark: watermark ?? 0 }
  }

  private refused(step: string, res: { status: number; body: any }): MamError {
    const detail = `The sponsor refused ${step} (${res.status}): ${res.body?.detail ?? 'no detail'}`
    if (res.status >= 500) return new MamError('service_unavailable', detail)
    return invalidParam('invite', detail)
  }
}
