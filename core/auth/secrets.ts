import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto'

const scrypt = (password: string, salt: Buffer, keylen: number, options: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCb(password, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key))),
  )

const SCRYPT = { N: 16384, r: 8, p: 1 }

/** `scrypt$N$r$p$salt$hash`, so the cost can rise later without breaking stored hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await scrypt(password, salt, 32, SCRYPT)
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), key.toString('base64')].join('$')
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  // hash anyway when there is no stored hash, so a missing user costs the same time as a wrong password
  const parts = (stored ?? DUMMY_HASH).split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [, N, r, p, salt, expected] = parts
  const want = Buffer.from(expected, 'base64')
  const got = await scrypt(password, Buffer.from(salt, 'base64'), want.length, { N: +N, r: +r, p: +p })
  return timingSafeEqual(got, want) && stored !== null
}
const DUMMY_HASH = 'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='

/**
 * Bearer credentials look like `mk_12_<secret>` (API key 12) or `mt_34_<secret>` (login token 34):
 * a recognisable prefix for secret scanners, the row id for a direct lookup, and 256 random bits.
 */
export type CredentialKind = 'api_key' | 'token'
const PREFIX: Record<CredentialKind, string> = { api_key: 'mk', token: 'mt' }

export function newSecret(): { secret: string; hash: string } {
  const secret = randomBytes(32).toString('base64url')
  return { secret, hash: sha256(secret) }
}

export const formatCredential = (kind: CredentialKind, id: number, secret: string) => `${PREFIX[kind]}_${id}_${secret}`

export function parseCredential(value: string): { kind: CredentialKind; id: number; secret: string } | null {
  const m = /^(mk|mt)_(\d{1,15})_([A-Za-z0-9_-]{43})$/.exec(value)
  if (!m) return null
  return { kind: m[1] === 'mk' ? 'api_key' : 'token', id: Number(m[2]), secret: m[3] }
}

export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex')

export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(sha256(secret), 'hex')
  const b = Buffer.from(storedHash, 'hex')
  return a.length === b.length && timingSafeEqual(a, b)
}
