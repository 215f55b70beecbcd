import qs from 'qs'
import type { MamConfig } from '../config.js'
import { MamError } from '../errors.js'

/** Framework parameters that some clients send along and that no route schema describes. */
export const RESERVED_PARAMS = ['auth_token', '_method', 'format', 'utf8', 'authenticity_token', 'guest_token'] // guest_token: the credential of a gallery guest link (plugins/galleries)

/**
 * A number in brackets (`custom_metadata[5]=x`) is a hash key, as in Rails: a form keyed by field ids
 * keeps its ids. qs would read it as a list index (and lose the key, or refuse one above
 * `arrayLimit`), so the key decoder marks such a segment with a private-use character, which makes it
 * no index; `shapeInput` takes the mark off. Lists are `name[]=a&name[]=b` (or `name=a&name=b`),
 * bounded by `arrayLimit`. A parameter the route declares as a list that arrives with indices
 * (`ids[0]=a&ids[1]=b`) becomes a list again, in index order; an index at or above `arrayLimit`
 * there is refused as before (413), which the second mark records.
 */
const INDEX = '\uE000'
const FAR_INDEX = '\uE001'
const BRACKETED_NUMBER = /\[(\d+)\]/g
const isMarked = (key: string) => key.charCodeAt(0) === 0xe000 || key.charCodeAt(0) === 0xe001

export function qsOptions(limits: MamConfig['limits']): qs.IParseOptions {
  const limit = limits.arrayLength
  return {
    depth: limits.queryDepth,
    parameterLimit: limits.queryParameters,
    arrayLimit: limit,
    strictDepth: true,
    throwOnLimitExceeded: true,
    allowPrototypes: false,
    decoder(text, decode, charset, type) {
      const decoded = decode(text, decode, charset)
      if (type !== 'key' || typeof decoded !== 'string') return decoded
      return decoded.replace(BRACKETED_NUMBER, (_, n: string) => `[${n.length < 10 && Number(n) < limit ? INDEX : FAR_INDEX}${n}]`)
    },
  }
}

/** `template[name]=x&paths[]=a&values[5]=y` → `{template: {name: 'x'}, paths: ['a'], values: {5: 'y'}}` (keys marked until `shapeInput`), bounded by the limits. */
export function parseQuery(querystring: string, options: qs.IParseOptions): Record<string, unknown> {
  if (!querystring) return {}
  try {
    return qs.parse(querystring, options) as Record<string, unknown>
  } catch (err) {
    throw limitError(err)
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

interface SchemaShape {
  type?: string | string[]
  items?: SchemaShape
  properties?: Record<string, SchemaShape>
  patternProperties?: Record<string, SchemaShape>
  additionalProperties?: boolean | SchemaShape
  anyOf?: SchemaShape[]
  oneOf?: SchemaShape[]
}

const typesOf = (schema: SchemaShape): string[] => {
  const alternatives = schema.anyOf ?? schema.oneOf
  if (alternatives) return alternatives.flatMap(typesOf)
  return schema.type === undefined ? ['any'] : Array.isArray(schema.type) ? schema.type : [schema.type]
}

/**
 * The parsed parameters as the route declares them (in place): index marks taken off the keys, and
 * a declared list that arrived keyed by numbers (`ids[0]=a&ids[1]=b`, or JSON `{"0": …}`) made the
 * list, in index order. Without a declaration only the marks go. Everything else is left as it came.
 */
export function shapeInput(value: unknown, schema: SchemaShape | undefined): unknown {
  const declared = schema && typeof schema === 'object' ? schema : undefined
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = shapeInput(value[i], declared?.items)
    return value
  }
  if (!isPlainObject(value)) return value
  const keys = Object.keys(value)
  const types = declared ? typesOf(declared) : []
  if (keys.length && types.includes('array') && !types.includes('object') && !types.includes('any') && keys.every((k) => isMarked(k) || /^(0|[1-9]\d{0,8})$/.test(k))) {
    if (keys.some((k) => k.charCodeAt(0) === 0xe001)) throw new MamError('payload_too_large', 'Too many parameters')
    const items = (declared!.anyOf ?? declared!.oneOf ?? [declared!]).find((s) => typesOf(s).includes('array'))?.items
    return keys
      .map((k) => ({ index: Number(isMarked(k) ? k.slice(1) : k), item: value[k] }))
      .sort((a, b) => a.index - b.index)
      .map(({ item }) => shapeInput(item, items))
  }
  const objects = declared ? (declared.anyOf ?? declared.oneOf ?? [declared]).filter((s) => typesOf(s).includes('object')) : []
  const only = objects.length === 1 ? objects[0] : undefined
  const rest = only?.patternProperties ? Object.values(only.patternProperties)[0] : typeof only?.additionalProperties === 'object' ? only.additionalProperties : undefined
  for (const key of keys) {
    const name = isMarked(key) ? key.slice(1) : key
    const inner = shapeInput(value[key], only?.properties?.[name] ?? rest)
    if (name !== key) delete value[key]
    value[name] = inner
  }
  return value
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
  // query and form bodies were parsed with qsOptions: their keys carry index marks until here
  return shapeInput(merged, declared as SchemaShape | undefined) as Record<string, unknown>
}
