import qs from 'qs'
import type { MamConfig } from '../config.js'
import { MamError } from '../errors.js'

/** Framework parameters that some clients send along and that no route schema describes. */
export const RESERVED_PARAMS = ['auth_token', '_method', 'format', 'utf8', 'authenticity_token', 'guest_token'] // guest_token: the credential of a gallery guest link (plugins/galleries)

export function qsOptions(limits: MamConfig['limits']): qs.IParseOptions {
  return {
    depth: limits.queryDepth,
    parameterLimit: limits.queryParameters,
    arrayLimit: limits.arrayLength,
    strictDepth: true,
    throwOnLimitExceeded: true,
    allowPrototypes: false,
  }
}

/** `template[name]=x&paths[]=a` → `{template: {name: 'x'}, paths: ['a']}`, bounded by the limits. */
export function parseQuery(querystring: string, options: qs.IParseOptions): Record<string, unknown> {
  if (!querystring) return {}
  try {
    return qs.parse(querystring, options) as Record<string, unknown>
  } catch (err) {
    throw limitError(err)
  }
}

export function limitError(err: unknown): MamError {
  const message = (err as Error)?.message ?? ''
  if (/depth/i.test(message)) return new MamError('bad_request', 'Parameters are nested too deeply')
  if (/limit/i.test(message)) return new MamError('payload_too_large', 'Too many parameters')
  return new MamError('bad_request', 'Malformed parameters')
}

/**
 * Rails-style params: query string and body in one object (the body wins on a clash). Path
 * parameters and framework parameters are left out: they are validated separately or not at all,
 * unless the route's input declares one (`download_editor_xml?format=avid`).
 */
export function mergeInput(
  query: Record<string, unknown>,
  body: unknown,
  pathParams: Record<string, unknown>,
  bodyKey: string | undefined,
  declared?: { properties?: Record<string, unknown> },
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...query }
  if (body !== undefined && body !== null) {
    if (typeof body === 'object' && !Array.isArray(body)) Object.assign(merged, body)
    else if (bodyKey) merged[bodyKey] = body
    else throw new MamError('bad_request', 'The request body must be a JSON object')
  }
  // only keys that are there: a `delete` of a present key turns the object into a slow dictionary
  for (const key of RESERVED_PARAMS) if (Object.hasOwn(merged, key) && !declared?.properties?.[key]) delete merged[key]
  for (const key in pathParams) if (Object.hasOwn(merged, key)) delete merged[key]
  return merged
}
