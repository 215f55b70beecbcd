import { createHash } from 'node:crypto'
import canonicalize from 'canonicalize'
import { HLC_PATTERN } from './hlc.js'

/**
 * The record kernel, a "causal map" (FEDERATION.md §3): a record is a map of multi-value registers
 * sharing one causal context (`cc`, the highest counter seen per replica). A write replaces a
 * field's entries by one entry with a fresh dot (replica, counter); a merge keeps an entry unless the
 * other side has seen its dot and no longer holds it. That is a join (commutative, associative,
 * idempotent: test/plugins/federation/kernel.test.ts checks it on reachable states), and it decides
 * "who had seen what" by dots alone, so clocks only rank values that really are concurrent.
 */
export type Scalar = string | number | boolean | null
export type Value = Scalar | Scalar[] | { [key: string]: Scalar }
/** [value, replica, counter, hlc] */
export type Entry = [Value, string, number, string]
export interface RecordState {
  v: number
  cc: Record<string, number>
  f: Record<string, Entry[]>
}

export const KERNEL_LIMITS = {
  /** canonical bytes of one record */
  stateBytes: 256 * 1024,
  fields: 10_000,
  fieldName: 200,
  entriesPerField: 64,
  replicas: 1_000,
  stringBytes: 64 * 1024,
  arrayItems: 1_000,
}

/** `<6 hex of the site>.<incarnation>`: the writer of an entry is readable without a lookup */
export const REPLICA_PATTERN = /^[0-9a-f]{6}\.[1-9][0-9]{0,5}$/

export const emptyState = (v = 1): RecordState => ({ v, cc: {}, f: {} })

const entryOrder = (a: Entry, b: Entry) => (a[3] < b[3] ? -1 : a[3] > b[3] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[2] - b[2])
const sameDot = (a: Entry, b: Entry) => a[1] === b[1] && a[2] === b[2]
const covers = (cc: Record<string, number>, e: Entry) => (cc[e[1]] ?? 0) >= e[2]

/**
 * A local write of several fields with one fresh dot: the writer has seen every current entry of
 * those fields, so all of them are superseded. `undefined` removes the field (an element of an
 * add-wins set): no tombstone, `cc` remembers the dot so a merge does not bring it back.
 */
export function write(state: RecordState, replica: string, hlc: string, changes: Record<string, Value | undefined>): RecordState {
  const counter = (state.cc[replica] ?? 0) + 1
  const f = { ...state.f }
  for (const [field, value] of Object.entries(changes)) {
    if (value === undefined) delete f[field]
    else f[field] = [[normalise(value), replica, counter, hlc]]
  }
  return { v: state.v, cc: { ...state.cc, [replica]: counter }, f }
}

/** the join of two states */
export function merge(x: RecordState, y: RecordState): RecordState {
  const cc: Record<string, number> = { ...x.cc }
  for (const [r, n] of Object.entries(y.cc)) if ((cc[r] ?? 0) < n) cc[r] = n
  const f: Record<string, Entry[]> = {}
  const fields = new Set([...Object.keys(x.f), ...Object.keys(y.f)])
  for (const field of fields) {
    const xs = x.f[field] ?? []
    const ys = y.f[field] ?? []
    const kept: Entry[] = []
    for (const e of xs) if (ys.some((o) => sameDot(o, e)) || !covers(y.cc, e)) kept.push(e)
    for (const e of ys) if (!kept.some((o) => sameDot(o, e)) && (xs.some((o) => sameDot(o, e)) || !covers(x.cc, e))) kept.push(e)
    if (kept.length) f[field] = kept.sort(entryOrder)
  }
  return { v: Math.max(x.v, y.v), cc, f }
}

/** fields with more than one entry: concurrent writes a later local write would settle */
export function conflicts(state: RecordState): string[] {
  return Object.keys(state.f)
    .filter((k) => state.f[k].length > 1)
    .sort()
}

// ---------------------------------------------------------------- resolvers

/** picks a field's value from its concurrent entries; a pure function of the entry list */
export type Resolver = (entries: Entry[]) => Value | undefined

/** the highest (hlc, replica, counter): "latest wins" when clocks are sane, deterministic when not */
export const latestWins: Resolver = (entries) => (entries.length ? [...entries].sort(entryOrder)[entries.length - 1][0] : undefined)

/** the first value of `order` present among the entries wins (revoke wins, left wins …); otherwise latest */
export const priorityWins =
  (order: Value[]): Resolver =>
  (entries) => {
    for (const wanted of order) if (entries.some((e) => e[0] === wanted)) return wanted
    return latestWins(entries)
  }

export const trueWins = priorityWins([true])
export const falseWins = priorityWins([false])

/**
 * Resolved values of a record: one resolver per field name or prefix (`matrix/` for every
 * capability), `latestWins` otherwise. Origin-only fields count only the entries written by the
 * record's origin site (§3.4), so a login stays unique per origin.
 */
export interface TypeRules {
  resolvers?: Record<string, Resolver>
  originOnly?: string[]
}

export function resolverOf(rules: TypeRules, field: string): Resolver {
  const r = rules.resolvers
  if (!r) return latestWins
  if (r[field]) return r[field]
  const slash = field.indexOf('/')
  if (slash > 0 && r[field.slice(0, slash + 1)]) return r[field.slice(0, slash + 1)]
  return latestWins
}

export function resolve(state: RecordState, rules: TypeRules, originShort?: string): Record<string, Value> {
  const out: Record<string, Value> = {}
  for (const [field, all] of Object.entries(state.f)) {
    const entries = originShort && rules.originOnly?.includes(field) ? all.filter((e) => e[1].startsWith(`${originShort}.`)) : all
    const value = resolverOf(rules, field)(entries)
    if (value !== undefined) out[field] = value
  }
  return out
}

// ---------------------------------------------------------------- canonical form, checksums

export function canonical(state: RecordState): string {
  return canonicalize(state) as string
}

/** first 8 bytes of SHA-256(type ‖ 0 ‖ uuid ‖ 0 ‖ canonical), as 16 hex characters (§3.3) */
export function checksumOf(type: string, uuid: string, canonicalState: string): string {
  return createHash('sha256').update(`${type}\0${uuid}\0${canonicalState}`).digest('hex').slice(0, 16)
}

/** first 3 bytes of SHA-256(uuid): fixed for the life of the record */
export function bucketOf(uuid: string): number {
  return createHash('sha256').update(uuid).digest().readUIntBE(0, 3)
}

/** XOR of 16-hex checksums: the roll-up of a bucket (order-free, so incrementally maintainable) */
export function xorChecksums(checksums: Iterable<string>): string {
  let hi = 0
  let lo = 0
  for (const c of checksums) {
    hi = (hi ^ parseInt(c.slice(0, 8), 16)) >>> 0
    lo = (lo ^ parseInt(c.slice(8, 16), 16)) >>> 0
  }
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0')
}

// ---------------------------------------------------------------- values and validation

function normalise(value: Value): Value {
  if (typeof value === 'string') return value.normalize('NFC')
  if (Array.isArray(value)) return value.map((v) => (typeof v === 'string' ? v.normalize('NFC') : v))
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typeof v === 'string' ? v.normalize('NFC') : v]))
  return value
}

/** what is wrong with a scalar; integers only and NFC strings, so canonical forms agree on every site and database */
function scalarProblem(v: unknown): string | undefined {
  if (v === null || typeof v === 'boolean') return undefined
  if (typeof v === 'number') return Number.isSafeInteger(v) && !Object.is(v, -0) ? undefined : 'numbers must be safe integers'
  if (typeof v === 'string') {
    if (Buffer.byteLength(v) > KERNEL_LIMITS.stringBytes) return 'a string is too long'
    return v === v.normalize('NFC') ? undefined : 'strings must be NFC-normalised'
  }
  return 'values must be strings, integers, booleans or null'
}

function valueProblem(v: unknown): string | undefined {
  if (Array.isArray(v)) {
    if (v.length > KERNEL_LIMITS.arrayItems) return 'an array value is too long'
    for (const x of v) {
      const p = scalarProblem(x)
      if (p) return p
    }
    return undefined
  }
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) {
      const p = scalarProblem(x)
      if (p) return p
    }
    return undefined
  }
  return scalarProblem(v)
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * Structural, version-independent validation of a state a peer sent (§6.5): kernel shape, sizes,
 * value kinds, and the dot rule (no entry beyond its own causal context). Field semantics are not
 * checked: a newer site's field is stored and merged, not refused. Returns the state, or a reason.
 */
export function parseState(text: unknown): { state: RecordState } | { problem: string } {
  if (typeof text !== 'string') return { problem: 'state must be a JSON string' }
  if (Buffer.byteLength(text) > KERNEL_LIMITS.stateBytes) return { problem: `state exceeds ${KERNEL_LIMITS.stateBytes} bytes` }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    return { problem: 'state is not valid JSON' }
  }
  if (!isPlainObject(raw)) return { problem: 'state must be an object' }
  const keys = Object.keys(raw)
  if (keys.some((k) => k !== 'v' && k !== 'cc' && k !== 'f')) return { problem: 'state has keys other than v, cc and f' }
  const { v, cc, f } = raw as Record<string, unknown>
  if (!Number.isSafeInteger(v) || (v as number) < 1) return { problem: 'v must be a positive integer' }
  if (!isPlainObject(cc)) return { problem: 'cc must be an object' }
  if (Object.keys(cc).length > KERNEL_LIMITS.replicas) return { problem: 'cc names too many replicas' }
  for (const [r, n] of Object.entries(cc)) {
    if (!REPLICA_PATTERN.test(r)) return { problem: `cc names an invalid replica "${r.slice(0, 40)}"` }
    if (!Number.isSafeInteger(n) || (n as number) < 1) return { problem: `cc[${r}] must be a positive integer` }
  }
  if (!isPlainObject(f)) return { problem: 'f must be an object' }
  const fields = Object.entries(f)
  if (fields.length > KERNEL_LIMITS.fields) return { problem: 'too many fields' }
  for (const [name, entries] of fields) {
    if (!name || name.length > KERNEL_LIMITS.fieldName) return { problem: 'a field name is empty or too long' }
    if (!Array.isArray(entries) || entries.length === 0 || entries.length > KERNEL_LIMITS.entriesPerField) return { problem: `field "${name}" must have 1 to ${KERNEL_LIMITS.entriesPerField} entries` }
    for (const e of entries) {
      if (!Array.isArray(e) || e.length !== 4) return { problem: `field "${name}": an entry must be [value, replica, counter, hlc]` }
      const p = valueProblem(e[0])
      if (p) return { problem: `field "${name}": ${p}` }
      if (typeof e[1] !== 'string' || !REPLICA_PATTERN.test(e[1])) return { problem: `field "${name}": invalid replica` }
      if (!Number.isSafeInteger(e[2]) || e[2] < 1) return { problem: `field "${name}": invalid counter` }
      if (typeof e[3] !== 'string' || !HLC_PATTERN.test(e[3])) return { problem: `field "${name}": invalid hlc stamp` }
      // the dot rule: an entry the writer's own context does not cover is forged or corrupt
      if (((cc as Record<string, number>)[e[1]] ?? 0) < e[2]) return { problem: `field "${name}": an entry's dot is beyond the causal context` }
    }
    const dots = new Set(entries.map((e: Entry) => `${e[1]}:${e[2]}`))
    if (dots.size !== entries.length) return { problem: `field "${name}": one dot holds two values` }
  }
  const state = { v: v as number, cc: cc as Record<string, number>, f: Object.fromEntries(fields.map(([k, es]) => [k, [...(es as Entry[])].sort(entryOrder)])) }
  return { state }
}
