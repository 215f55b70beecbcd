import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

/**
 * Secrets the server must read back in clear later (SMB passwords, per-asset proxy keys;
 * SECURITY.md): AES-256-GCM under
 * a key derived from the server key. The stored form is `v1:<base64 iv|tag|ciphertext>`, so a
 * later scheme can sit beside it. `context` is bound as associated data: a ciphertext copied onto
 * another row (another edit's name) no longer decrypts.
 */
const VERSION = 'v1'
const IV_BYTES = 12
const TAG_BYTES = 16

/** one subkey per purpose, so the raw server key never encrypts anything itself */
export function deriveKey(serverKey: Buffer, purpose: string): Buffer {
  if (serverKey.length < 32) throw new Error('the server secret key must be at least 32 bytes')
  return Buffer.from(hkdfSync('sha256', serverKey, Buffer.alloc(0), `mamkit:${purpose}`, 32))
}

export function seal(key: Buffer, plaintext: string, context: string): string {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  cipher.setAAD(Buffer.from(context, 'utf8'))
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
  return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`
}

/** throws when the value was tampered with, sealed under another key or for another context */
export function open(key: Buffer, sealed: string, context: string): string {
  const [version, payload] = sealed.split(':')
  if (version !== VERSION || !payload) throw new Error('unknown secret format')
  const raw = Buffer.from(payload, 'base64')
  if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('truncated secret')
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES))
  decipher.setAAD(Buffer.from(context, 'utf8'))
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
  return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8')
}
