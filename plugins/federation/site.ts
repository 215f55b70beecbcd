import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, sign, verify, type KeyObject } from 'node:crypto'
import { deriveKey, seal, unseal, type Knex } from '../../core/index.js'
import { TABLES } from './migrations.js'

/**
 * This site's identity (FEDERATION.md §6.1): a uuid, an Ed25519 key pair and an incarnation. The
 * private key is sealed with a key derived from the server secret, bound to the site uuid. The
 * replica id that writes dots is `<6 hex of SHA-256(site uuid)>.<incarnation>`.
 */
export interface SiteRow {
  site_uuid: string
  federation_uuid: string | null
  name: string
  base_url: string | null
  incarnation: number
  public_key: string
}

export const shortIdOf = (siteUuid: string) => createHash('sha256').update(siteUuid).digest('hex').slice(0, 6)

/** base32 of SHA-256 of the SPKI key, in groups of four (Syncthing device-id style) */
export function fingerprintOf(publicKeyB64: string): string {
  const digest = createHash('sha256').update(Buffer.from(publicKeyB64, 'base64')).digest()
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  let bits = 0
  let value = 0
  let out = ''
  for (const byte of digest) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31]
  return out.match(/.{1,4}/g)!.join('-')
}

export function publicKeyObject(publicKeyB64: string): KeyObject {
  return createPublicKey({ key: Buffer.from(publicKeyB64, 'base64'), format: 'der', type: 'spki' })
}

export function verifySignature(publicKeyB64: string, data: string, signatureB64: string): boolean {
  try {
    return verify(null, Buffer.from(data), publicKeyObject(publicKeyB64), Buffer.from(signatureB64, 'base64'))
  } catch {
    return false
  }
}

export class SiteIdentity {
  private readonly sealingKey: Buffer
  private row: SiteRow | undefined
  private privateKey: KeyObject | undefined

  constructor(
    private readonly knex: Knex,
    secretKey: Buffer,
    private readonly defaultName: string,
  ) {
    this.sealingKey = deriveKey(secretKey, 'federation.site-key')
  }

  /** the identity, created at first use; concurrent first uses (several processes) keep the first row */
  async load(): Promise<SiteRow> {
    if (this.row) return this.row
    let row = await this.knex(TABLES.site).orderBy('id').first()
    if (!row) {
      const siteUuid = randomUUID()
      const { publicKey, privateKey } = generateKeyPairSync('ed25519')
      const pub = publicKey.export({ format: 'der', type: 'spki' }).toString('base64')
      const priv = privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64')
      const now = new Date()
      await this.knex(TABLES.site)
        .insert({ site_uuid: siteUuid, name: this.defaultName, incarnation: 1, public_key: pub, private_key_sealed: seal(this.sealingKey, priv, siteUuid), created_at: now, updated_at: now })
        .catch(() => undefined)
      row = await this.knex(TABLES.site).orderBy('id').first()
    }
    let sealed: string
    try {
      sealed = unseal(this.sealingKey, row.private_key_sealed, row.site_uuid)
    } catch {
      // every process on one database must run with the same server key (dataDir/secret.key)
      throw new Error(`The federation site key in the database was sealed with another server secret key: every mamkit process on one database needs the same secret.key in its data directory`)
    }
    this.privateKey = createPrivateKey({ key: Buffer.from(sealed, 'base64'), format: 'der', type: 'pkcs8' })
    this.row = { site_uuid: row.site_uuid, federation_uuid: row.federation_uuid ?? null, name: row.name, base_url: row.base_url ?? null, incarnation: Number(row.incarnation), public_key: row.public_key }
    return this.row
  }

  /** after the row changed (federation joined, renamed) */
  async reload(): Promise<SiteRow> {
    this.row = undefined
    return this.load()
  }

  get current(): SiteRow {
    if (!this.row) throw new Error('site identity not loaded')
    return this.row
  }

  replica(): string {
    return `${shortIdOf(this.current.site_uuid)}.${this.current.incarnation}`
  }

  fingerprint(): string {
    return fingerprintOf(this.current.public_key)
  }

  sign(data: string): string {
    if (!this.privateKey) throw new Error('site identity not loaded')
    return sign(null, Buffer.from(data), this.privateKey).toString('base64')
  }

  async update(db: Knex, changes: Partial<Pick<SiteRow, 'federation_uuid' | 'name' | 'base_url'>>): Promise<SiteRow> {
    await db(TABLES.site).where({ site_uuid: this.current.site_uuid }).update({ ...changes, updated_at: new Date() })
    this.row = { ...this.current, ...changes }
    return this.row
  }
}
