/**
 * Every error a request can end in, in one table. Handlers throw `MamError`s (usually through
 * the helpers below); the HTTP layer turns them into RFC 9457 problem bodies. Anything else that
 * escapes a handler is a 500 whose body says nothing about internals.
 */
export const ERRORS = {
  bad_request: { status: 400, title: 'Bad request' },
  unauthenticated: { status: 401, title: 'Authentication required' },
  // what the license in force allows is used up (users, stored bytes): a larger license lifts it
  license_limit: { status: 402, title: 'License limit reached' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not found' },
  module_inactive: { status: 404, title: 'Module not active' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  request_timeout: { status: 408, title: 'Request timeout' },
  conflict: { status: 409, title: 'Conflict' },
  gone: { status: 410, title: 'Gone' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  range_not_satisfiable: { status: 416, title: 'Range not satisfiable' },
  invalid_parameters: { status: 422, title: 'Invalid parameters' },
  locked: { status: 423, title: 'Locked' },
  rate_limited: { status: 429, title: 'Too many requests' },
  internal: { status: 500, title: 'Internal server error' },
  not_implemented: { status: 501, title: 'Not implemented' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
  database_unavailable: { status: 503, title: 'Database unavailable' },
  insufficient_storage: { status: 507, title: 'Insufficient storage' },
} as const

export type ErrorCode = keyof typeof ERRORS

export interface ParamError {
  /** the parameter in bracket form, as the client sent it: `template[name]` */
  param: string
  message: string
}

export class MamError extends Error {
  readonly status: number
  readonly title: string
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly extra: { errors?: ParamError[]; headers?: Record<string, string>; [key: string]: unknown } = {},
  ) {
    super(detail)
    this.status = ERRORS[code].status
    this.title = ERRORS[code].title
  }
}

export const badRequest = (detail: string, errors?: ParamError[]) => new MamError('bad_request', detail, { errors })
export const unauthenticated = (detail = 'Valid credentials are required') => new MamError('unauthenticated', detail)
export const forbidden = (detail = 'You lack the privilege for this action') => new MamError('forbidden', detail)
export const notFound = (what: string, id?: string | number) =>
  new MamError('not_found', id === undefined ? `${what} not found` : `${what} ${typeof id === 'string' ? clipped(id) : id} not found`)
export const conflict = (detail: string, extra?: Record<string, unknown>) => new MamError('conflict', detail, extra)
export const invalid = (errors: ParamError[]) =>
  new MamError('invalid_parameters', errors.map((e) => `${e.param} ${e.message}`).join('; '), { errors })
export const invalidParam = (param: string, message: string) => invalid([{ param, message }])

/** client input cut to `max` characters for a message, and the length it had when it was cut */
function cut(value: string, max: number): [text: string, length: string] {
  const chars = [...value]
  return chars.length <= max ? [value, ''] : [`${chars.slice(0, max).join('')}…`, ` (${chars.length} characters)`]
}

/** client input for a message, cut short: a 5,000-character header or path is not echoed back whole */
export const clipped = (value: string, max = 200) => cut(value, max).join('')

/** client input quoted in a message, cut short like `clipped`: `"abc…" (5000 characters)` */
export function quoted(value: string, max = 200): string {
  const [text, length] = cut(value, max)
  return `"${text}"${length}`
}

/** a job error that retrying cannot mend (a file gone, a bad payload): the job fails at once */
export const permanentError = (message: string, cause?: unknown): Error & { permanent: true } =>
  Object.assign(new Error(message, cause === undefined ? undefined : { cause }), { permanent: true as const })

/**
 * Faults of the machine rather than of a request (issue 19), recognised wherever they surface:
 * the database unreachable, restarting or busy (503 with Retry-After: the same request succeeds
 * later), and a full disk or quota (507: free space, then retry). A job that meets one is handed
 * back to the queue without counting an attempt (core/jobs/runner.ts); a request answers it as a
 * problem body instead of a 500.
 */
export type Fault = 'database_unavailable' | 'insufficient_storage'

/** set by the database layer (core/db/orm.ts) on every error a query or a connection attempt threw */
export const FROM_DATABASE = Symbol.for('mamkit.fromDatabase')

/** a socket that could not reach, or lost, its peer; counted as an outage only when the database threw it */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED'])
/**
 * PostgreSQL SQLSTATEs of an outage: class 08 (connection exceptions), 57P01-03 (admin or crash
 * shutdown, cannot connect now: starting up or shutting down), 53300 (too many connections)
 */
const PG_OUTAGE = /^(08...|57P0[123]|53300)$/
/**
 * pg, pg-pool and knex messages of a lost or unobtainable connection (they carry no code). knex's
 * "Transaction query already complete" is what the next statement of a transaction gets once a lost
 * connection ended it (rolled back): seen as a 500 in the outage test while a project was created
 */
const OUTAGE_MESSAGES = /Transaction query already complete|Connection terminated|Connection ended unexpectedly|connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|Timeout acquiring a connection|the database system is (starting up|shutting down|in recovery mode)/i
const DISK_FULL_CODES = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL', '53100'])
/** a tool (ffmpeg, an archiver) that ran out of space says so in its message, without a code */
const DISK_FULL_MESSAGES = /No space left on device|Disk quota exceeded/

/** the fault `err` (or an error it was caused by) is, or undefined for any other error */
export function faultOf(err: unknown): Fault | undefined {
  for (let e = err as any, depth = 0; e && typeof e === 'object' && depth < 5; e = e.cause, depth++) {
    const code = typeof e.code === 'string' ? e.code : undefined
    if (code && DISK_FULL_CODES.has(code)) return 'insufficient_storage'
    if (typeof e.message === 'string' && DISK_FULL_MESSAGES.test(e.message)) return 'insufficient_storage'
    // SQLITE_BUSY and its extended codes: another process held the write lock past busy_timeout
    if (code?.startsWith('SQLITE_BUSY') || code === 'SQLITE_LOCKED') return 'database_unavailable'
    if (code && PG_OUTAGE.test(code) && typeof e.severity === 'string') return 'database_unavailable'
    const fromDatabase = e[FROM_DATABASE] === true || e.name === 'DriverException' || e.name === 'ConnectionException' || e.name === 'KnexTimeoutError'
    if (fromDatabase && code && NETWORK_CODES.has(code)) return 'database_unavailable'
    if (e.name === 'KnexTimeoutError' || (typeof e.message === 'string' && OUTAGE_MESSAGES.test(e.message))) return 'database_unavailable'
    if (e instanceof AggregateError) for (const inner of e.errors) if (faultOf(inner)) return faultOf(inner)
  }
  return undefined
}

/** how long a client is asked to wait after a database outage answer (Retry-After, seconds); set from the configuration */
export const faultSettings = { retryAfterSeconds: 5 }

/** the problem a fault answers with, or undefined when `err` is no fault */
export function faultProblem(err: unknown): MamError | undefined {
  const fault = faultOf(err)
  if (fault === 'database_unavailable')
    return new MamError('database_unavailable', 'The database is unreachable or busy; nothing was changed unless an earlier answer said so. Retry later', {
      headers: { 'Retry-After': String(faultSettings.retryAfterSeconds) },
    })
  if (fault === 'insufficient_storage')
    return new MamError('insufficient_storage', 'The disk or quota holding this data is full; nothing was stored. Retry once space was freed')
  return undefined
}

/** Errors raised while plugins are loaded; the process refuses to start. */
export const BOOT_ERRORS = [
  'PLUGIN_DUPLICATE',
  'PLUGIN_MISSING_DEPENDENCY',
  'PLUGIN_CYCLE',
  'PLUGIN_INVALID',
  'ROUTE_DUPLICATE',
  'ROUTE_NO_ACCESS',
  'SCHEMA_INVALID',
  'JOB_DUPLICATE',
  'JOB_INVALID',
  'EVENT_INVALID',
  'SERVICE_INVALID',
  'SERVICE_UNREACHABLE',
  'SETTINGS_INVALID',
] as const
export type BootErrorCode = (typeof BOOT_ERRORS)[number]

export class BootError extends Error {
  constructor(
    readonly code: BootErrorCode,
    readonly plugin: string,
    message: string,
  ) {
    super(`[${code}] plugin "${plugin}": ${message}`)
  }
}
