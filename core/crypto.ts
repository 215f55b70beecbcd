import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

/**
 * Small secrets (SMB passwords, per-asset proxy keys) encrypted at rest with the server key
 * (config.secretKey): AES-256-GCM, stored as base64 of iv | tag | ciphertext.
 */
export function seal(secretKey: Buffer, plain: Buffer | string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', secretKey, iv)
  const body = Buffer.concat([cipher.update(typeof plain === 'string' ? Buffer.from(plain, 'utf8') : plain), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')
}

export function unseal(secretKey: Buffer, sealed: string): Buffer {
  const raw = Buffer.from(sealed, 'base64')
  const decipher = createDecipheriv('aes-256-gcm', secretKey, raw.subarray(0, 12))
  decipher.setAuthTag(raw.subarray(12, 28))
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()])
}
