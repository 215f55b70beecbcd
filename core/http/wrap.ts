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
  /** properties of the wrapped object schema */
  attributes: ReadonlySet<string>
  /** the input schema's own top-level properties: never moved */
  topLevel: ReadonlySet<string>
}

/** the wrap of a route, or why its `wrap` and `input` do not fit together */
export function wrapSpecOf(input: TSchema | undefined, key: string): WrapSpec | string {
  const properties = (input as { properties?: Record<string, any> } | undefined)?.properties
  if (!properties) return `wrap: "${key}" needs an input object schema`
  const wrapped = properties[key]?.properties
  if (!wrapped || typeof wrapped !== 'object') return `wrap: "${key}" must name a property of the input schema that is an object schema`
  return { key, attributes: new Set(Object.keys(wrapped)), topLevel: new Set(Object.keys(properties)) }
}

/** moves the attributes sent at the top level into the wrapped object; the moved keys, or undefined when nothing moved */
export function wrapParams(input: Record<string, unknown>, spec: WrapSpec): string[] | undefined {
  if (input[spec.key] !== undefined) return undefined
  let moved: string[] | undefined
  for (const name of Object.keys(input)) {
    if (!spec.attributes.has(name) || spec.topLevel.has(name)) continue
    const wrapped = ((input[spec.key] as Record<string, unknown> | undefined) ??= {})
    wrapped[name] = input[name]
    delete input[name]
    ;(moved ??= []).push(name)
  }
  return moved
}

/** a problem whose parameter names follow the wrapped form (`team[name]`) renamed to what the client sent (`name`) */
export function unwrapNames(err: unknown, key: string, moved: string[]): unknown {
  if (!(err instanceof MamError) || !err.extra.errors) return err
  const rename = (text: string) => {
    for (const name of moved) text = text.split(`${key}[${name}]`).join(name)
    return text
  }
  const errors = err.extra.errors.map((e) => ({ ...e, param: e.param.startsWith(`${key}[`) ? rename(e.param) : e.param }))
  return new MamError(err.code, rename(err.detail), { ...err.extra, errors })
}
