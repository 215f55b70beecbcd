import { createHash, randomBytes } from 'node:crypto'
import canonicalize from 'canonicalize'
import type { CredentialResolver, MamContext, Principal } from '../../core/index.js'
import { verifySignature } from './site.js'

declare module '../../core/auth/principal.js' {
  interface PrincipalKinds {
    site: true
  }
}

/**
 * Site-to-site requests are signed, RFC 9421 style (FEDERATION.md §6.3), with Ed25519 over the
 * method, the path with its query, a digest of the body, the sending site and a nonce. The digest
 * is SHA-256 of the body's RFC 8785 canonical form, so it does not depend on how the JSON was
 * spaced or which parser read it. No timestamp window (that would trust clocks): replays are caught
 * by a bounded nonce cache, and replaying a gossip page is harmless anyway (merges are idempotent).
 */
export const SITE_HEADER = 'x-mamkit-site'
export const NONCE_HEADER = 'x-mamkit-nonce'
const COVERED = '("@method" "@path" "content-digest" "x-mamkit-site" "x-mamkit-nonce")'

export const digestOf = (body: unknown) => `sha-256=:${createHash('sha256').update(body === undefined ? '' : (canonicalize(body) ?? '')).digest('base64')}:`

export function signatureBase(method: string, pathWithQuery: string, digest: string, site: string, nonce: string): string {
  return [`"@method": ${method.toUpperCase()}`, `"@path": ${pathWithQuery}`, `"content-digest": ${digest}`, `"x-mamkit-site": ${site}`, `"x-mamkit-nonce": ${nonce}`, `"@signature-params": ${COVERED};keyid="${site}";alg="ed25519"`].join('\n')
}

/** headers for a signed request from `site` */
export function signedHeaders(sign: (data: string) => string, site: string, method: string, pathWithQuery: string, body: unknown): Record<string, string> {
  const nonce = randomBytes(16).toString('base64url')
  const digest = digestOf(body)
  return {
    [SITE_HEADER]: site,
    [NONCE_HEADER]: nonce,
    'content-digest': digest,
    'signature-input': `sig1=${COVERED};keyid="${site}";alg="ed25519"`,
    signature: `sig1=:${sign(signatureBase(method, pathWithQuery, digest, site, nonce))}:`,
  }
}

/** a site as a principal: it reaches only routes that list the `site` scope, and those check its status */
export interface SitePrincipal extends Principal {
  via: 'site'
  scope: { kind: 'site'; id: string; status: string; publicKey: string }
}

export const isSite = (p: Principal | undefined): p is SitePrincipal => p?.via === 'site'

export interface KnownKey {
  publicKey: string
  status: string
}

/** bounded memory of nonces seen (oldest forgotten first) */
export class NonceCache {
  private readonly seen = new Set<string>()
  constructor(private readonly max = 50_000) {}
  /** false when the nonce was seen already */
  add(key: string): boolean {
    if (this.seen.has(key)) return false
    this.seen.add(key)
    if (this.seen.size > this.max) this.seen.delete(this.seen.values().next().value as string)
    return true
  }
}

const SIG = /^sig1=:([A-Za-z0-9+/=]+):$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * The `site-signature` credential: a request carrying `x-mamkit-site` and `signature` is a site's.
 * Unknown site, bad digest, bad signature or a replayed nonce: null (401). A joining site is not
 * known yet: its hello (`POST /federation/initiate_join` with `phase: hello`) is checked against
 * the key inside its own body; the invite's secret proves the rest.
 */
export function siteCredentials(keyOf: (site: string) => Promise<KnownKey | undefined>, nonces: NonceCache): CredentialResolver {
  return {
    name: 'site-signature',
    extract(ctx, _query, body) {
      const site = ctx.req.headers[SITE_HEADER]
      if (typeof site !== 'string' || typeof ctx.req.headers.signature !== 'string') return undefined
      ;(ctx.state as Record<string, unknown>).federationBody = body
      return site
    },
    async resolve(site, ctx) {
      if (!UUID.test(site)) return null
      const h = ctx.req.headers
      const nonce = h[NONCE_HEADER]
      const sig = SIG.exec(String(h.signature))
      if (typeof nonce !== 'string' || nonce.length < 16 || nonce.length > 64 || !sig) return null
      const body = (ctx.state as Record<string, unknown>).federationBody
      const digest = digestOf(body)
      if (h['content-digest'] !== digest) return null
      let key = await keyOf(site)
      if (!key && isHello(ctx, body)) key = { publicKey: String((body as any).site.public_key), status: 'joining' }
      if (!key) return null
      if (!verifySignature(key.publicKey, signatureBase(ctx.method, ctx.originalUrl, digest, site, nonce), sig[1])) return null
      if (!nonces.add(`${site} ${nonce}`)) return null
      const principal: SitePrincipal = {
        userId: 0,
        username: `site:${site}`,
        roleId: 0,
        isAdmin: false,
        capabilities: new Set(),
        via: 'site',
        credentialId: 0,
        scope: { kind: 'site', id: site, status: key.status, publicKey: key.publicKey },
      }
      return principal
    },
  }
}

function isHello(ctx: MamContext, body: unknown): boolean {
  if (ctx.method !== 'POST' || !/\/federation\/initiate_join(\.json)?$/.test(ctx.path)) return false
  const b = body as any
  return b?.phase === 'hello' && typeof b?.site?.public_key === 'string' && b.site.public_key.length < 200
}
