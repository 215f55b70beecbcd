import qs from 'qs'
import type { MamConfig } from '../config.js'
import { MamError } from '../errors.js'

/** Framework parameters that some clients send along and that no route schema describes. */
export const RESERVED_PARAMS = ['auth_token', '_method', 'format', 'utf8', 'authenticity_token', 'guest_token'] // guest_token: the credential of a gallery guest link (plugins/galleries)

/**
 * A number in brackets (`custom_metadata[5]=x`) is a hash key, as in Rails: a form keyed by field ids
 * keeps its ids. qs would read it as a list index (and lose the key, or refuse one above
 * `arrayLimit`), so the key decoder marks such a segment with a private-use character, which makes it
 * no index, and `unmark` takes the mark off again. Lists are `name[]=a&name[]=b` (or `name=a&name=b`),
 * bounded by `arrayLimit`; a parameter a route declares as a list that arrives with indices
 * (`ids[0]=a&ids[1]=b`) becomes a list again in `mergeInput`, in the order of its indices.
 */
const INDEX_MARK = '\uE000'
const MARKED_INDEX = /\[(\d+)\]/g

export function qsOptions(limits: MamConfig['limits']): qs.IParseOptions {
  return {
    depth: limits.queryDepth,
    parameterLimit: limits.queryParameters,
    arrayLimit: limits.arrayLength,
    strictDepth: true,
    throwOnLimitExceeded: true,
    allowPrototypes: false,
    decoder(text, decode, charset, type) {
      const decoded = decode(text, decode, charset)
      return type === 'key' && typeof decoded === 'string' ? decoded.replace(MARKED_INDEX, `[${INDEX_MARK}$1]`) : decoded
    },
  }
}

/** `template[name]=x&paths[]=a&values[5]=y` → `{template: {name: 'x'}, paths: ['a'], values: {5: 'y'}}`, bounded by the limits. */
export function parseQuery(querystring: string, options: qs.IParseOptions): Record<string, unknown> {
  if (!querystring) return {}
  try {
    return unmark(qs.parse(querystring, options)) as Record<string, unknown>
  } catch (err) {
    throw limitError(err)
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** takes the index marks off the keys of a parsed query or form (in place; nothing to do for JSON) */
export function unmark(value: unknown): unknown {
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) value[i] = unmark(value[i])
  else if (isPlainObject(value))
    for (const key of Object.keys(value)) {
      const inner = unmark(value[key])
      if (key.charCodeAt(0) === 0xe000) {
        delete value[key]
        value[key.slice(1)] = inner
      } else value[key] = inner
    }
  return value
}

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
 * A parameter the route declares as a list but that arrived keyed by numbers (`ids[0]=a&ids[1]=b`,
 * or a JSON object `{"0": …}` from a form-minded client) becomes the list, in index order; objects
 * the route declares are walked for the lists inside them. Everything else is left as it came.
 */
export function listsAsDeclared(value: unknown, schema: SchemaShape | undefined): unknown {
  if (!schema || typeof schema !== 'object') return value
  const types = typesOf(schema)
  if (isPlainObject(value) && types.includes('array') && !types.includes('object') && !types.includes('any')) {
    const keys = Object.keys(value)
    if (keys.every((k) => /^(0|[1-9]\d{0,8})$/.test(k))) {
      const items = (schema.anyOf ?? schema.oneOf ?? [schema]).find((s) => typesOf(s).includes('array'))?.items
      return keys
        .map(Number)
        .sort((a, b) => a - b)
        .map((k) => listsAsDeclared(value[String(k)], items))
    }
    return value
  }
  if (Array.isArray(value) && schema.items) return value.map((item) => listsAsDeclared(item, schema.items))
  if (isPlainObject(value)) {
    const objectSchema = schema.anyOf || schema.oneOf ? (schema.anyOf ?? schema.oneOf)!.filter((s) => typesOf(s).includes('object')) : [schema]
    if (objectSchema.length !== 1) return value
    const { properties, patternProperties, additionalProperties } = objectSchema[0]
    const rest = patternProperties ? Object.values(patternProperties)[0] : typeof additionalProperties === 'object' ? additionalProperties : undefined
    for (const key of Object.keys(value)) {
      const inner = properties?.[key] ?? rest
      if (inner) value[key] = listsAsDeclared(value[key], inner)
    }
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
    // a form body was parsed by the body reader with these options: its keys carry the marks
    if (typeof body === 'object' && !Array.isArray(body)) Object.assign(merged, unmark(body))
    else if (bodyKey) merged[bodyKey] = body
    else throw new MamError('bad_request', 'The request body must be a JSON object')
  }
  for (const key of RESERVED_PARAMS) if (!declared?.properties?.[key]) delete merged[key]
  for (const key of Object.keys(pathParams)) delete merged[key]
  return listsAsDeclared(merged, declared as SchemaShape | undefined) as Record<string, unknown>
}
