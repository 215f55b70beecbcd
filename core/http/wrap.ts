import type { TSchema } from 'typebox'
import { MamError } from '../errors.js'

/**
 * Rails' `wrap_parameters`: a route that declares `wrap: 'team'` takes `{"name": "x"}` as if the
 * client had sent `{"team": {"name": "x"}}`. When the input has no `team` key, its top-level keys
 * that are attributes of the `team` object schema (and not parameters of the route's own) move
 * into it, from JSON, forms and query strings alike. Errors then name what the client sent: `name`,
 * not `team[name]`.
 */
export interface WrapSpec {
  key: string
  /** properties of the wrapped object schema that are not top-level parameters of the route too: these move */
  attributes: ReadonlySet<string>
}

/** the wrap of a route, or why its `wrap` and `input` do not fit together */
export function wrapSpecOf(input: TSchema | undefined, key: string): WrapSpec | string {
  const properties = (input as { properties?: Record<string, any> } | undefined)?.properties
  if (!properties) return `wrap: "${key}" needs an input object schema`
  const wrapped = properties[key]?.properties
  if (!wrapped || typeof wrapped !== 'object') return `wrap: "${key}" must name a property of the input schema that is an object schema`
  return { key, attributes: new Set(Object.keys(wrapped).filter((name) => !(name in properties))) }
}

/** moves the attributes sent at the top level into the wrapped object; whether any moved */
export function wrapParams(input: Record<string, unknown>, spec: WrapSpec): boolean {
  if (input[spec.key] !== undefined) return false
  let wrapped: Record<string, unknown> | undefined
  for (const name of Object.keys(input)) {
    if (!spec.attributes.has(name)) continue
    wrapped ??= input[spec.key] = {}
    wrapped[name] = input[name]
    delete input[name]
  }
  return wrapped !== undefined
}

/**
 * A problem of a request whose parameters were wrapped, named the way the client sent them:
 * `team[name]` → `name`, in `errors` and in the detail (also for attributes it did not send: a
 * missing `password` of a top-level `{"username": …}`).
 */
export function unwrapNames(err: unknown, spec: WrapSpec): unknown {
  if (!(err instanceof MamError) || !err.extra.errors) return err
  const rename = (text: string) => {
    for (const name of spec.attributes) text = text.split(`${spec.key}[${name}]`).join(name)
    return text
  }
  const errors = err.extra.errors.map((e) => ({ ...e, param: rename(e.param) }))
  return new MamError(err.code, rename(err.detail), { ...err.extra, errors })
}
