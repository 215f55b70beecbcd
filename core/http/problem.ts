import type { Context } from 'koa'
import type { Logger } from 'pino'
import { ForeignKeyConstraintViolationException, UniqueConstraintViolationException } from '@mikro-orm/core'
import { ERRORS, faultProblem, MamError, type ErrorCode } from '../errors.js'

const BY_STATUS = new Map<number, ErrorCode>(
  (Object.entries(ERRORS) as [ErrorCode, { status: number }][]).reverse().map(([code, e]) => [e.status, code]),
)

/** Maps anything thrown into a MamError: ours as they are, koa/http-errors by status, the rest as 500. */
export function toMamError(err: unknown): MamError {
  if (err instanceof MamError) return err
  const e = err as { status?: number; statusCode?: number; httpCode?: number; expose?: boolean; message?: string; type?: string }
  if (e?.message && /maxFileSize|maxTotalFileSize|maxFiles|maxFields/.test(e.message)) return new MamError('payload_too_large', 'The upload exceeds the size limit of this route')
  // formidable (multipart) says `httpCode`: a malformed upload is the client's error, not a 500
  const status = e?.status ?? e?.statusCode ?? e?.httpCode
  if (status && status >= 400 && status < 500 && BY_STATUS.has(status)) {
    // body parser errors: malformed JSON or multipart (400), over the size limit (413), unsupported charset (415)
    const detail = e.expose && e.message ? e.message : ERRORS[BY_STATUS.get(status)!].title
    return new MamError(BY_STATUS.get(status)!, detail)
  }
  // a check-then-write raced another request (two creates of one name): the database kept one
  if (err instanceof UniqueConstraintViolationException) return new MamError('conflict', 'A record with these values exists already')
  if (err instanceof ForeignKeyConstraintViolationException) return new MamError('conflict', 'The record is referenced by, or refers to, a record that changed meanwhile')
  // the database down or busy (503 + Retry-After), a disk or quota full (507): the machine's fault, not a bug
  const fault = faultProblem(err)
  if (fault) return fault
  return new MamError('internal', 'The server failed to handle this request; the request id identifies it in the logs')
}

export function sendProblem(ctx: Context, err: unknown, requestId: string, log: Logger): void {
  const problem = toMamError(err)
  if (problem.status >= 500 && problem.code === 'internal') log.error({ err, req_id: requestId }, 'unhandled error')
  else if (problem.code === 'database_unavailable' || problem.code === 'insufficient_storage') log.warn({ err: { message: (err as Error)?.message, code: (err as any)?.code }, req_id: requestId }, problem.title)
  const { errors, headers, ...extra } = problem.extra
  for (const [name, value] of Object.entries(headers ?? {})) ctx.set(name, value)
  ctx.status = problem.status
  ctx.type = 'application/problem+json'
  ctx.body = {
    type: `https://mamkit.dev/problems/${problem.code.replace(/_/g, '-')}`,
    title: problem.title,
    status: problem.status,
    detail: problem.detail,
    code: problem.code,
    request_id: requestId,
    ...(errors ? { errors } : {}),
    ...extra,
  }
}
