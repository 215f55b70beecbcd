import type Koa from 'koa'

/**
 * A route's plain JSON answer (an object or array a handler returned), written by mamkit itself:
 * one `writeHead` and one `end` with the same status, status message and headers Koa would send,
 * in the same order (what the handler set, then Content-Type, then Content-Length). Koa's way there
 * costs per request the body setter (status setter, type sniffing, a MIME lookup, header removals)
 * and `respond` (its checks for empty statuses, HEAD, buffers, strings, blobs, web streams,
 * `Response`s and node streams before `JSON.stringify`). Anything else keeps Koa's path: HEAD, an
 * empty status (204, 205, 304), a Content-Type, Content-Length or Transfer-Encoding the handler
 * set, headers already sent, a body set by other means (problems, files, streams, strings, buffers).
 */
const JSON_ANSWER = Symbol('mamkit.jsonAnswer')
const JSON_TYPE = 'application/json; charset=utf-8'

/** off: every answer takes Koa's path (tests compare the two byte by byte); `written` counts direct answers */
export const directJson = { enabled: true, written: 0 }

type Answerable = Koa.Context & { [JSON_ANSWER]?: object }

/** JSON already written as text (a page PostgreSQL spelled): a handler returns `jsonText(text)`, answered as `application/json` */
export class JsonText {
  constructor(readonly text: string) {}
}
export const jsonText = (text: string): JsonText => new JsonText(text)

/** what Koa's way gets as `ctx.body`: the text of a JsonText (typed JSON), any other value as it is */
function koaBody(ctx: Koa.Context, value: unknown): void {
  if (value instanceof JsonText) {
    ctx.type = 'application/json'
    ctx.body = value.text
  } else ctx.body = value
}

/** an object Koa would answer as JSON: a plain object or an array (not a buffer, stream, blob, Response...) */
const isPlainJson = (value: unknown): value is object => {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === Array.prototype || proto === null
}

/** the handler's answer: kept aside for `respondJson` when it is plain JSON, else Koa's `ctx.body` */
export function setAnswer(ctx: Koa.Context, value: unknown): void {
  const c = ctx as Answerable
  if (!directJson.enabled || !(value instanceof JsonText || isPlainJson(value)) || ctx.body !== undefined) {
    koaBody(ctx, value)
    return
  }
  c[JSON_ANSWER] = value
  // what Koa's body setter does to the status: 200 unless the handler chose one (201, 202 …)
  if (!(ctx.response as { _explicitStatus?: boolean })._explicitStatus) ctx.res.statusCode = 200
}

/** whether the route answered (a body for Koa, or plain JSON kept aside) */
export function hasAnswer(ctx: Koa.Context): boolean {
  return ctx.body !== undefined || (ctx as Answerable)[JSON_ANSWER] !== undefined
}

const EMPTY_STATUS = new Set([204, 205, 304])

/**
 * Sends the kept JSON answer (then Koa's `respond` leaves the response alone: `ctx.respond = false`),
 * or hands it to Koa as `ctx.body` when the request needs Koa's way. Called after the request was
 * logged and observed, where Koa would respond.
 */
export function respondJson(ctx: Koa.Context): void {
  const c = ctx as Answerable
  const value = c[JSON_ANSWER]
  if (value === undefined) return
  c[JSON_ANSWER] = undefined
  // a problem (or any body) set after the answer wins, as `ctx.body = …` would have
  if (ctx.body !== undefined || ctx.respond === false) return
  const res = ctx.res
  let json: string | undefined
  if (
    ctx.method !== 'HEAD' &&
    !res.headersSent &&
    !EMPTY_STATUS.has(res.statusCode) &&
    ctx.writable &&
    !res.hasHeader('content-type') &&
    !res.hasHeader('content-length') &&
    !res.hasHeader('transfer-encoding')
  ) {
    try {
      json = value instanceof JsonText ? value.text : JSON.stringify(value)
    } catch {
      // a value JSON cannot hold (a cycle, a BigInt): Koa's respond fails on it as it always did
    }
  }
  if (json === undefined) {
    koaBody(ctx, value)
    return
  }
  ctx.respond = false
  directJson.written++
  res.writeHead(res.statusCode, { 'Content-Type': JSON_TYPE, 'Content-Length': Buffer.byteLength(json) })
  res.end(json)
}
