import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type Koa from 'koa'
import { koaBody } from 'koa-body'
import qs from 'qs'
import type { MamConfig } from '../config.js'
import type { CompiledRoute } from '../plugin/loader.js'
import { MamError } from '../errors.js'
import { limitError, parseQuery, qsOptions } from './params.js'
import { assertUploadsWritten, collectFiles, ensureDir, uploadDirOf, uploadStreamOpener } from './uploads.js'
import type { MamContext } from './context.js'

export const JSON_TYPES = ['json', '+json']
const PLAIN_TYPES = [...JSON_TYPES, 'urlencoded']
/** the codings co-body decodes (through `inflation`) */
const DECODED = new Set(['identity', 'gzip', 'deflate', 'br'])

/** a route's request body: undefined when there is none; `ctx.files` holds the uploads of a multipart body */
export type BodyReader = (ctx: MamContext, route: CompiledRoute) => Promise<unknown>

const noop = async () => {}

export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  if (length !== undefined && ~~length > 0) return true
  const te = req.headers['transfer-encoding']
  return te !== undefined && te !== ''
}

/**
 * JSON and form bodies (koa-body, co-body), gzip/deflate/br decoded, within the limits of the
 * configuration and `http.requestTimeoutMs`; multipart uploads (koa-body, formidable) into temp
 * files, for as long as they keep moving bytes. Every way a body can be wrong ends in a 4xx that
 * says what is wrong, never a 500.
 */
export function bodyReader(config: MamConfig): BodyReader {
  const queryOptions = qsOptions(config.limits)
  const common = {
    json: true,
    jsonTypes: JSON_TYPES,
    urlencoded: true,
    text: false,
    // clients send JSON scalars (a path as a JSON string) and JSON bodies on GET and DELETE
    jsonStrict: false,
    jsonLimit: config.limits.jsonBytes,
    formLimit: config.limits.formBytes,
    parsedMethods: ['POST', 'PUT', 'PATCH', 'GET', 'DELETE'] as any,
    queryString: queryOptions,
    onError(err: Error) {
      throw err
    },
  }
  const plain = koaBody({ ...common, multipart: false })
  const uploadDir = uploadDirOf(config)
  const multipart = (route: CompiledRoute, ctx: MamContext) =>
    koaBody({
      ...common,
      multipart: true,
      formidable: {
        uploadDir,
        maxFileSize: route.multipart!.maxFileSize,
        maxTotalFileSize: route.multipart!.maxFileSize * (route.multipart!.maxFiles ?? 1),
        maxFiles: route.multipart!.maxFiles ?? 1,
        // empty files are legitimate (a 0-byte sidecar); the handler decides what they mean
        allowEmptyFiles: true,
        minFileSize: 0,
        // text fields are held in memory: the form limit, not formidable's 20 MB
        maxFieldsSize: config.limits.formBytes,
        keepExtensions: false,
        createDirsFromUploads: false,
        filename: () => randomUUID(),
        fileWriteStreamHandler: uploadStreamOpener(ctx),
      } as any,
    })
  const timeoutMs = config.http.requestTimeoutMs

  return async (ctx, route) => {
    const encoding = contentEncoding(ctx.req)
    if (ctx.is('multipart')) {
      if (!route.multipart) throw new MamError('unsupported_media_type', 'This route does not take multipart uploads')
      if (encoding !== 'identity')
        throw new MamError('unsupported_media_type', `Uploads are stored as sent: send multipart/form-data without Content-Encoding (not "${encoding}")`)
      await ensureDir(uploadDir)
      await whileMoving(ctx, timeoutMs, parse(multipart(route, ctx), ctx, 'multipart', encoding))
      await assertUploadsWritten(ctx)
      ctx.files = collectFiles((ctx.request as any).files)
      return renest((ctx.request as any).body, queryOptions)
    }
    if (ctx.is(PLAIN_TYPES)) {
      if (!DECODED.has(encoding)) throw new MamError('unsupported_media_type', `Content-Encoding "${encoding}" is not supported; send gzip, deflate, br or none`)
      ctx.req.headers['content-encoding'] = encoding // co-body matches the coding's name case-sensitively
      await withDeadline(ctx, timeoutMs, parse(plain, ctx, ctx.is(JSON_TYPES) ? 'JSON' : 'form', encoding))
      return (ctx.request as any).body
    }
    if (ctx.request.type !== '' || ctx.request.length > 0) {
      // a body nobody would read (text/plain from a fetch without a content type): say so instead of
      // ignoring it; a chunked body without any type may well be empty and is left alone
      throw new MamError('unsupported_media_type', 'Send the body as JSON, a form (urlencoded) or multipart/form-data')
    }
    return undefined
  }
}

const contentEncoding = (req: IncomingMessage) => (req.headers['content-encoding'] ?? '').trim().toLowerCase() || 'identity'

type BodyKind = 'JSON' | 'form' | 'multipart'

function parse(middleware: Koa.Middleware, ctx: MamContext, kind: BodyKind, encoding: string): Promise<void> {
  return (middleware(ctx as any, noop) as Promise<void>).catch((err) => {
    throw bodyError(err, kind, encoding)
  })
}

const timeoutError = (detail: string) => new MamError('request_timeout', detail, { headers: { Connection: 'close' } })

/** a JSON or form body must have arrived within the request timeout (408, and the connection is closed) */
function withDeadline(ctx: MamContext, ms: number, work: Promise<void>): Promise<void> {
  if (!(ms > 0)) return work
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError(`The request body did not arrive within ${ms / 1000} s`)), ms)
  })
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer))
}

/** an upload may take as long as it needs while bytes keep coming; one that stalls for the request timeout gets a 408 */
function whileMoving(ctx: MamContext, ms: number, work: Promise<void>): Promise<void> {
  const socket = ctx.req.socket
  if (!(ms > 0) || !socket) return work
  let timer: NodeJS.Timeout | undefined
  const stalled = new Promise<never>((_, reject) => {
    let seen = socket.bytesRead
    let movedAt = Date.now()
    timer = setInterval(
      () => {
        const now = Date.now()
        if (socket.bytesRead !== seen) {
          seen = socket.bytesRead
          movedAt = now
        } else if (now - movedAt >= ms) {
          reject(timeoutError(`The upload stalled: no data for ${ms / 1000} s`))
        }
      },
      Math.max(10, Math.min(1000, ms / 4)),
    )
  })
  return Promise.race([work, stalled]).finally(() => clearInterval(timer))
}

/** what went wrong reading a body, as the client's error where it is theirs */
function bodyError(err: any, kind: BodyKind, encoding: string): unknown {
  if (err instanceof MamError) return err
  if (err instanceof RangeError) return limitError(err) // qs: too many or too deeply nested parameters
  if (isDecompressionError(err)) return new MamError('bad_request', `The body is not valid ${encoding} data (Content-Encoding: ${encoding}): ${err.message}`)
  switch (err?.type) {
    // raw-body, under co-body
    case 'entity.too.large':
      return new MamError('payload_too_large', `The ${kind} body exceeds the limit of ${err.limit} bytes`)
    case 'request.aborted':
      return new MamError('bad_request', 'The client stopped sending the body')
    case 'request.size.invalid':
      return new MamError('bad_request', `The body has ${err.received} bytes where Content-Length announced ${err.expected}`)
  }
  if (err?.status === 415) return new MamError('unsupported_media_type', String(err.message))
  if (kind === 'JSON' && err instanceof SyntaxError) return new MamError('bad_request', `The JSON body is malformed: ${jsonProblem(err)}`)
  if (kind === 'multipart' && typeof err?.code === 'number' && typeof err?.httpCode === 'number') return multipartError(err)
  return err
}

const isDecompressionError = (err: any) => typeof err?.errno === 'number' && typeof err?.code === 'string' && /^(Z_|ERR_BROTLI|ERR__ERROR)/.test(err.code)

/** V8's message ("… in JSON at position 11") with the line and column a person can find */
function jsonProblem(err: SyntaxError & { body?: unknown }): string {
  const message = err.message.length > 300 ? `${err.message.slice(0, 300)}…` : err.message
  const at = /at position (\d+)/.exec(message)
  if (!at || typeof err.body !== 'string') return message
  const before = err.body.slice(0, Number(at[1]))
  const line = before.split('\n').length
  const column = before.length - before.lastIndexOf('\n')
  return `${message} (line ${line}, column ${column})`
}

// formidable's error codes (formidable/src/FormidableError.js)
const MULTIPART_PROBLEMS: Record<number, [code: 'bad_request' | 'payload_too_large', detail: (message: string) => string]> = {
  1002: ['bad_request', () => 'The client stopped sending the upload'],
  1006: ['payload_too_large', () => 'The text fields of the upload exceed the form size limit'],
  1007: ['payload_too_large', () => 'The upload has too many fields'],
  1009: ['payload_too_large', () => 'The upload exceeds the size limit of this route'],
  1011: ['bad_request', () => 'The multipart body has no Content-Type'],
  1012: ['bad_request', (m) => `The multipart body is malformed or truncated (it ended before its closing boundary): ${m}`],
  1013: ['bad_request', () => 'The multipart body has no boundary: send Content-Type: multipart/form-data; boundary=…'],
  1014: ['bad_request', () => 'A part of the multipart body has an unknown Content-Transfer-Encoding'],
  1015: ['payload_too_large', () => 'The upload has more files than this route takes'],
  1016: ['payload_too_large', () => 'The upload exceeds the size limit of this route'],
}

function multipartError(err: { code: number; message: string }): unknown {
  const known = MULTIPART_PROBLEMS[err.code]
  return known ? new MamError(known[0], known[1](err.message)) : err
}

/** multipart fields arrive flat (`template[name]`); nest them like a form body */
function renest(fields: Record<string, unknown> | undefined, options: qs.IParseOptions) {
  if (!fields) return {}
  const flat = new URLSearchParams()
  for (const [k, v] of Object.entries(fields)) for (const item of Array.isArray(v) ? v : [v]) flat.append(k, String(item))
  return parseQuery(flat.toString(), options)
}
