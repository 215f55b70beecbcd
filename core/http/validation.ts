import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import type { TSchema } from 'typebox'
import { invalid, type ParamError } from '../errors.js'

/**
 * Query strings and form bodies carry only strings, so they are validated with type coercion
 * ("5" → 5, "true" → true), and a single value where an array is declared is a one-element array
 * (`tags=a` as `tags[]=a`). Never the other way round: a one-element array where a scalar is
 * declared (`template[name][]=a`) is a 422, which Ajv's `coerceTypes: 'array'` would let through.
 * JSON bodies are typed already and are validated strictly, except that "true"/"false" strings are
 * accepted for booleans (one client sends them that way; wire.md).
 */
const coercing = new Ajv({ allErrors: true, coerceTypes: true, useDefaults: true, strict: false })
const strict = new Ajv({ allErrors: true, coerceTypes: false, useDefaults: true, strict: false })

export interface CompiledSchema {
  schema: TSchema
  coercing: ValidateFunction
  strict: ValidateFunction
  /** whether the schema declares an array anywhere (only then are form values looked at for one) */
  hasArrays: boolean
}

/**
 * The schema is checked against Ajv's meta-schema at once (a bad schema still stops the boot with
 * SCHEMA_INVALID), but its two validators are generated on first use: compiling every route's,
 * job's and event's schemas at boot was a quarter of a server's start-up (issue 19: restarts of
 * the kill campaign), and most routes of a process that restarts are never called before it ends.
 */
export function compileSchema(schema: TSchema): CompiledSchema {
  if (!strict.validateSchema(schema)) throw new Error(`schema is invalid: ${strict.errorsText(strict.errors)}`)
  let forCoercing: ValidateFunction | undefined
  let forStrict: ValidateFunction | undefined
  return {
    schema,
    get coercing() {
      return (forCoercing ??= coercing.compile(schema))
    },
    get strict() {
      return (forStrict ??= strict.compile(schema))
    },
    hasArrays: JSON.stringify(schema).includes('"array"'),
  }
}

/** Validates in place (defaults and coercions are applied to `data`); throws a 422 naming each parameter. */
export function validate(compiled: CompiledSchema, data: unknown, typed: boolean, prefix = ''): void {
  const errors = check(compiled, data, typed, prefix)
  if (errors.length) throw invalid(errors)
}

/** Like `validate`, but returns the errors so a caller can add its own checks before answering. */
export function check(compiled: CompiledSchema, data: unknown, typed: boolean, prefix = ''): ParamError[] {
  if (typed) normaliseBooleans(compiled.schema, data)
  else if (compiled.hasArrays) scalarsToArrays(compiled.schema, data)
  // (the validator of the other mode is not generated unless it is needed)
  const fn = typed ? compiled.strict : compiled.coercing
  return fn(data) ? [] : paramErrors(fn.errors ?? [], prefix)
}

/** Ajv's `/template/name` → `template[name]` (the bracket form clients send). */
export function bracketName(pointer: string, prefix = ''): string {
  const parts = pointer.split('/').filter(Boolean).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  const all = prefix ? [prefix, ...parts] : parts
  return all.map((p, i) => (i === 0 ? p : `[${p}]`)).join('')
}

export function paramErrors(errors: ErrorObject[], prefix = ''): ParamError[] {
  const byParam = new Map<string, ParamError>()
  // union branches repeat the same failure; the first, most specific message per parameter wins
  const ordered = [...errors].sort((a, b) => Number(a.keyword === 'anyOf') - Number(b.keyword === 'anyOf'))
  for (const e of ordered) {
    let pointer = e.instancePath
    if (e.keyword === 'required') pointer += `/${(e.params as { missingProperty: string }).missingProperty}`
    if (e.keyword === 'additionalProperties')
      pointer += `/${(e.params as { additionalProperty: string }).additionalProperty}`
    const param = bracketName(pointer, prefix) || '(body)'
    if (!byParam.has(param)) byParam.set(param, { param, message: describe(e) })
  }
  return [...byParam.values()]
}

function describe(e: ErrorObject): string {
  const p = e.params as Record<string, any>
  switch (e.keyword) {
    case 'required':
      return 'is required'
    case 'additionalProperties':
      return 'is not a known parameter'
    case 'type':
      return `must be ${article(String(p.type))}`
    case 'enum':
      return `must be one of: ${(p.allowedValues as unknown[]).join(', ')}`
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}`
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${p.limit} characters`
    case 'maxLength':
      return `must be at most ${p.limit} characters`
    case 'pattern':
      return 'has an invalid format'
    case 'minimum':
      return `must be at least ${p.limit}`
    case 'maximum':
      return `must be at most ${p.limit}`
    case 'maxItems':
      return `must have at most ${p.limit} elements`
    case 'minItems':
      return `must have at least ${p.limit} elements`
    case 'anyOf':
      return 'has an invalid type or value'
    default:
      return e.message ?? 'is invalid'
  }
}

const ARTICLES: Record<string, string> = { object: 'a hash', array: 'an array', string: 'a string', integer: 'an integer', number: 'a number', boolean: 'true or false', null: 'null' }
/** Ajv's `object,null` (a nil-allowed hash) → "a hash or null" */
const article = (type: string) => type.split(',').map((t) => ARTICLES[t] ?? t).join(' or ')

/** "true"/"false" → booleans wherever the schema expects a boolean. */
function normaliseBooleans(schema: any, data: any): any {
  if (!schema || data === null || data === undefined) return data
  if (accepts(schema, 'boolean') && (data === 'true' || data === 'false')) return data === 'true'
  if (Array.isArray(data) && schema.items) {
    for (let i = 0; i < data.length; i++) data[i] = normaliseBooleans(schema.items, data[i])
  } else if (typeof data === 'object') {
    const branches = [schema, ...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]
    for (const branch of branches) {
      for (const key of Object.keys(branch.properties ?? {}))
        if (key in data) data[key] = normaliseBooleans(branch.properties[key], data[key])
      // records (`role[role_matrix]`): keys matching a pattern take its value schema
      for (const [pattern, values] of Object.entries<any>(branch.patternProperties ?? {}))
        for (const key of Object.keys(data)) if (!branch.properties?.[key] && new RegExp(pattern, 'u').test(key)) data[key] = normaliseBooleans(values, data[key])
    }
  }
  return data
}

/** a lone value where the schema declares an array → a one-element array (forms and query strings) */
function scalarsToArrays(schema: any, data: any): any {
  if (!schema || data === null || data === undefined) return data
  if (typeof data !== 'object') return accepts(schema, 'array') && !acceptsScalar(schema, data) ? [data] : data
  if (Array.isArray(data)) {
    if (schema.items) for (let i = 0; i < data.length; i++) data[i] = scalarsToArrays(schema.items, data[i])
    return data
  }
  for (const branch of [schema, ...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) {
    for (const key of Object.keys(branch.properties ?? {})) if (key in data) data[key] = scalarsToArrays(branch.properties[key], data[key])
    for (const [pattern, values] of Object.entries<any>(branch.patternProperties ?? {}))
      for (const key of Object.keys(data)) if (!branch.properties?.[key] && new RegExp(pattern, 'u').test(key)) data[key] = scalarsToArrays(values, data[key])
  }
  return data
}

/** whether a form value could stand as it is (a union of a string and an array of strings keeps the string) */
const acceptsScalar = (schema: any, value: unknown) => ['string', 'number', 'integer', 'boolean'].some((t) => accepts(schema, t)) && typeof value === 'string'

const accepts = (schema: any, type: string): boolean =>
  schema.type === type ||
  (Array.isArray(schema.type) && schema.type.includes(type)) ||
  (schema.anyOf ?? []).some((s: any) => accepts(s, type))
