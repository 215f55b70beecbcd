import { randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { MamError, quoted, type MamContext } from '../../core/index.js'
import { decryptRange, plainSize } from './proxy-crypto.js'

/** more ranges in one request than a player ever asks for: the whole body is sent instead */
const MAX_RANGES = 16

/**
 * The byte ranges of a Range header (RFC 9110 §14.1.2, §14.2), inclusive and in the order asked:
 * `bytes=a-b`, `a-`, `-n`, several separated by commas. null when there is no header or one this
 * server ignores (malformed, `bytes=100-5`, another unit, too many ranges): the whole body is sent,
 * which players handle best. 'unsatisfiable' when no range lies within the body (416).
 */
export function parseRange(header: string | undefined, size: number): Array<[number, number]> | null | 'unsatisfiable' {
  if (!header) return null
  const m = /^bytes=(.+)$/i.exec(header.trim())
  if (!m) return null
  const specs = m[1].split(',').map((spec) => spec.trim())
  if (specs.length > MAX_RANGES) return null
  const ranges: Array<[number, number]> = []
  for (const spec of specs) {
    const r = /^(\d*)-(\d*)$/.exec(spec)
    if (!r || (r[1] === '' && r[2] === '')) return null
    if (r[1] === '') {
      // the last n bytes; a suffix of 0 bytes selects nothing
      const n = Number(r[2])
      if (n > 0 && size > 0) ranges.push([Math.max(0, size - n), size - 1])
      continue
    }
    const start = Number(r[1])
    const end = r[2] === '' ? Infinity : Number(r[2])
    if (end < start) return null
    if (start < size) ranges.push([start, Math.min(end, size - 1)])
  }
  return ranges.length ? ranges : 'unsatisfiable'
}

export interface Body {
  size: number
  type: string
  /** attachment file name; inline when absent */
  filename?: string
  /** bytes start..end, inclusive */
  open(start: number, end: number): Readable | Promise<Readable>
}

/**
 * Answers with a body of known size honouring HTTP Range: exact Content-Length, 206 with
 * Content-Range for one range, 206 `multipart/byteranges` for several, 416 when none lies within
 * the body, the whole body (200) for a Range header this server ignores. Only the requested bytes are read.
 */
export async function sendBody(ctx: MamContext, body: Body) {
  const { size } = body
  const header = ctx.get('range') || undefined
  const ranges = parseRange(header, size)
  ctx.set('Accept-Ranges', 'bytes')
  if (ranges === 'unsatisfiable') {
    ctx.set('Content-Range', `bytes */${size}`)
    throw new MamError('range_not_satisfiable', `No range of ${quoted(header!)} starts within the body, which has ${size} bytes`)
  }
  if (body.filename) ctx.attachment(body.filename)
  if (ranges && ranges.length > 1) return sendByteRanges(ctx, body, ranges)
  ctx.type = body.type
  const [start, end] = ranges?.[0] ?? [0, size - 1]
  if (ranges) {
    ctx.status = 206
    ctx.set('Content-Range', `bytes ${start}-${end}/${size}`)
  }
  ctx.length = size === 0 ? 0 : end - start + 1
  ctx.body = size === 0 ? '' : await body.open(start, end)
}

/** several ranges as one `multipart/byteranges` body (RFC 9110 §14.6), its length known up front */
function sendByteRanges(ctx: MamContext, body: Body, ranges: Array<[number, number]>) {
  const boundary = randomBytes(12).toString('hex')
  const heads = ranges.map(([start, end], i) =>
    Buffer.from(`${i ? '\r\n' : ''}--${boundary}\r\nContent-Type: ${body.type}\r\nContent-Range: bytes ${start}-${end}/${body.size}\r\n\r\n`),
  )
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  ctx.status = 206
  ctx.type = `multipart/byteranges; boundary=${boundary}`
  ctx.length = ranges.reduce((n, [start, end], i) => n + heads[i].length + end - start + 1, tail.length)
  ctx.body = Readable.from(
    (async function* () {
      for (const [i, [start, end]] of ranges.entries()) {
        yield heads[i]
        yield* await body.open(start, end)
      }
      yield tail
    })(),
    { objectMode: false },
  )
}

/** a file (plain, or an encrypted proxy decrypted on the fly) with Range */
export async function sendFile(ctx: MamContext, file: { path: string; key?: Buffer; type: string; filename?: string }) {
  const { key, path } = file
  await sendBody(ctx, {
    size: key ? await plainSize(path) : (await stat(path)).size,
    type: file.type,
    filename: file.filename,
    open: (start, end) => (key ? decryptRange(key, path, start, end) : createReadStream(path, { start, end, highWaterMark: 1 << 20 })),
  })
}
