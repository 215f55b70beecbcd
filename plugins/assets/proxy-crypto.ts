import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { open, rename, rm, stat } from 'node:fs/promises'
import { Transform, pipeline as pipe, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'

/**
 * Proxy files are encrypted at rest with a per-asset 256-bit key: AES-256-CTR, the 16-byte
 * initial counter block written as the file's first 16 bytes. CTR lets the server decrypt any byte
 * range without reading what comes before it, so HTTP Range requests on proxies stay cheap.
 */
export const HEADER_BYTES = 16

export const newProxyKey = () => randomBytes(32)

/** encrypts `plainFile` into `target` (via a temporary name, so a crash never leaves half a proxy) */
export async function encryptFile(key: Buffer, plainFile: string, target: string): Promise<number> {
  const iv = randomBytes(16)
  const temp = `${target}.partial-${process.pid}`
  const out = createWriteStream(temp)
  out.write(iv)
  try {
    await pipeline(createReadStream(plainFile, { highWaterMark: 1 << 20 }), createCipheriv('aes-256-ctr', key, iv), out)
    await rename(temp, target)
  } catch (err) {
    await rm(temp, { force: true })
    throw err
  }
  return (await stat(target)).size - HEADER_BYTES
}

/** the counter block for byte `offset`: the initial block plus offset / 16, as a 128-bit big-endian add */
function counterAt(iv: Buffer, offset: number): Buffer {
  const block = iv.readBigUInt64BE(8) + BigInt(Math.floor(offset / 16))
  const out = Buffer.from(iv)
  const carry = block >> 64n
  out.writeBigUInt64BE(block & 0xffffffffffffffffn, 8)
  if (carry) out.writeBigUInt64BE((iv.readBigUInt64BE(0) + carry) & 0xffffffffffffffffn, 0)
  return out
}

/** plaintext bytes start..end (inclusive) of an encrypted proxy file, as a stream */
export async function decryptRange(key: Buffer, file: string, start: number, end: number): Promise<Readable> {
  const handle = await open(file, 'r')
  const iv = Buffer.alloc(HEADER_BYTES)
  try {
    await handle.read(iv, 0, HEADER_BYTES, 0)
  } finally {
    await handle.close()
  }
  const blockStart = start - (start % 16)
  const decipher = createDecipheriv('aes-256-ctr', key, counterAt(iv, blockStart))
  let skip = start - blockStart
  const trim = new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (skip) {
        const cut = Math.min(skip, chunk.length)
        chunk = chunk.subarray(cut)
        skip -= cut
      }
      done(null, chunk)
    },
  })
  const source = createReadStream(file, { start: HEADER_BYTES + blockStart, end: HEADER_BYTES + end, highWaterMark: 1 << 20 })
  // errors anywhere destroy the whole chain, so a reader never waits on a dead stream
  return pipe(source, decipher, trim, () => {})
}

/** plaintext size of an encrypted proxy file */
export async function plainSize(file: string): Promise<number> {
  return (await stat(file)).size - HEADER_BYTES
}
