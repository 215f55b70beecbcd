/**
 * Every error a request can end in, in one table. Handlers throw `MamError`s (usually through
 * the helpers below); the HTTP layer turns them into RFC 9457 problem bodies. Anything else that
 * escapes a handler is a 500 whose body says nothing about internals.
 */
export const ERRORS = {
  bad_request: { status: 400, title: 'Bad request' },
  unauthenticated: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not found' },
  module_inactive: { status: 404, title: 'Module not active' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
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
