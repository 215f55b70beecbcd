import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import type { MamContext } from '../../core/http/context.js'
import { MamError } from '../../core/errors.js'
import { decryptRange, plainSize } from './proxy-crypto.js'

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` → inclusive [start, end]; null for no or an unsupported header */
export function parseRange(header: string | undefined, size: number): [number, number] | null | 'invalid' {
  if (!header) return null
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (!m || (m[1] === '' && m[2] === '')) return 'invalid'
  let start: number
  let end: number
  if (m[1] === '') {
    start = Math.max(0, size - Number(m[2]))
    end = size - 1
  } else {
    start = Number(m[1])
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1)
  }
  if (start > end || start >= size) return 'invalid'
  return [start, end]
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
 * Content-Range for a range, 416 for an unsatisfiable one. Only the requested bytes are read.
 */
export async function sendBody(ctx: MamContext, body: Body) {
  const { size } = body
  const range = parseRange(ctx.get('range') || undefined, size)
  if (range === 'invalid') {
    ctx.set('Content-Range', `bytes */${size}`)
    throw new MamError('range_not_satisfiable', `The range ${ctx.get('range')} lies outside the ${size} bytes of the file`)
  }
  const [start, end] = range ?? [0, size - 1]
  ctx.set('Accept-Ranges', 'bytes')
  ctx.type = body.type
  if (body.filename) ctx.attachment(body.filename)
  if (range) {
    ctx.status = 206
    ctx.set('Content-Range', `bytes ${start}-${end}/${size}`)
  }
  ctx.length = size === 0 ? 0 : end - start + 1
  ctx.body = size === 0 ? '' : await body.open(start, end)
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
