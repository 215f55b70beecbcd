import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

const REQUEST_ID = /^[\w.:-]{1,100}$/

/**
 * Request ids: a random UUID per process whose last 12 hex digits count the requests, so an id
 * still has the UUID's form and is unique in this process (and, by the random part, across
 * processes) without drawing random bytes per request.
 */
let requestIdPrefix = randomUUID().slice(0, 24)
let requestCount = 0
export function nextRequestId(): string {
  if (requestCount > 0xffff_ffff_ffff) {
    requestIdPrefix = randomUUID().slice(0, 24)
    requestCount = 0
  }
  return requestIdPrefix + (requestCount++).toString(16).padStart(12, '0')
}

/** the client's `X-Request-Id` when it is sane (ties a client's logs to ours), else a new one */
export function requestIdOf(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : nextRequestId()
}
