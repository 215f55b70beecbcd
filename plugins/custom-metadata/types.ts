/**
 * Field types and how a value of each is checked and stored. Stored values are canonical JSON
 * (`value`) beside their words (`text_value`: option names, user names) for search and project names.
 */
export const FIELD_TYPES = ['text', 'long_text', 'number', 'date', 'datetime', 'boolean', 'select', 'multi_select', 'user', 'generator'] as const
export type FieldType = (typeof FIELD_TYPES)[number]
export const APPLIES_TO = ['project', 'asset', 'both'] as const
export type AppliesTo = (typeof APPLIES_TO)[number]
export type OwnerType = 'project' | 'asset' | 'gallery'

export const TEXT_MAX = 255
export const LONG_TEXT_MAX = 65_535
/** a regex pattern longer than this is refused (patterns run on every write of the field) */
export const PATTERN_MAX = 500

export interface FieldRow {
  id: number
  setId: number
  name: string
  type: FieldType
  mandatory: boolean
  maxlen: number | null
  pattern: string | null
  min: number | null
  max: number | null
  integer: boolean
  position: number
  useInProjectName: boolean
  counter: number
  createdAt: Date | null
  updatedAt: Date | null
}

export interface OptionRow {
  id: number
  fieldId: number
  name: string
  position: number
  subSetId: number | null
  safeSearch: boolean
  createdAt: Date | null
  updatedAt: Date | null
}

export interface Stored {
  value: string
  text: string
  uniqueKey: string | null
}

/** a value that does not fit its field: the message for the 422 */
export class ValueError extends Error {}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/

function validDate(text: string): boolean {
  const m = DATE.exec(text)
  if (!m) return false
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])))
  return d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3])
}

/** a pattern as a RegExp anchored to the whole value; null when it does not compile */
export function compilePattern(pattern: string): RegExp | null {
  try {
    return new RegExp(`^(?:${pattern})$`, 'u')
  } catch {
    return null
  }
}

// ---- generator templates: `EP-{counter:4}`, `{yyyy}{mm}{dd}-{counter}` -------------------------------

const TOKEN = /\{([a-z]+)(?::(\d+))?\}/g
const DATE_TOKENS: Record<string, { width: number; of: (d: Date) => string }> = {
  yyyy: { width: 4, of: (d) => String(d.getUTCFullYear()).padStart(4, '0') },
  yy: { width: 2, of: (d) => String(d.getUTCFullYear() % 100).padStart(2, '0') },
  mm: { width: 2, of: (d) => String(d.getUTCMonth() + 1).padStart(2, '0') },
  dd: { width: 2, of: (d) => String(d.getUTCDate()).padStart(2, '0') },
}

/** why a generator template is unusable, or null when it is fine */
export function templateProblem(template: string): string | null {
  let counters = 0
  for (const m of template.matchAll(TOKEN)) {
    if (m[1] === 'counter') {
      counters++
      if (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 12)) return 'pads {counter:N} to 1 … 12 digits'
    } else if (!(m[1] in DATE_TOKENS) || m[2] !== undefined) return `has an unknown part {${m[1]}${m[2] ? `:${m[2]}` : ''}} (known: {counter}, {counter:N}, {yyyy}, {yy}, {mm}, {dd})`
  }
  if (counters !== 1) return 'must contain {counter} (or {counter:N}) exactly once'
  if (/[{}]/.test(template.replace(TOKEN, ''))) return 'has a brace that is not part of {counter}, {yyyy}, {yy}, {mm} or {dd}'
  if (template.replace(TOKEN, '').length > 200) return 'is longer than 200 characters'
  return null
}

export function renderTemplate(template: string, counter: number, now = new Date()): string {
  return template.replace(TOKEN, (_, name: string, width?: string) => (name === 'counter' ? String(counter).padStart(Number(width ?? 1), '0') : DATE_TOKENS[name].of(now)))
}

/** a RegExp that matches every value the template can produce */
export function templateRegExp(template: string): RegExp {
  let out = ''
  let last = 0
  for (const m of template.matchAll(TOKEN)) {
    out += escapeRegExp(template.slice(last, m.index))
    out += m[1] === 'counter' ? `\\d{${Number(m[2] ?? 1)},}` : `\\d{${DATE_TOKENS[m[1]].width}}`
    last = m.index! + m[0].length
  }
  out += escapeRegExp(template.slice(last))
  return new RegExp(`^${out}$`)
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

// ---- values ---------------------------------------------------------------------------------------

export interface Lookups {
  options(fieldId: number): Promise<OptionRow[]>
  user(key: string | number): Promise<{ id: number; username: string } | null>
}

const asText = (raw: unknown): string => {
  if (typeof raw === 'string') return raw
  if (typeof raw === 'number' || typeof raw === 'boolean') return String(raw)
  throw new ValueError('must be text')
}

/** checks `raw` against the field and answers what to store; a misfit throws ValueError */
export async function normalize(field: FieldRow, raw: unknown, lookups: Lookups): Promise<Stored> {
  switch (field.type) {
    case 'text':
    case 'long_text': {
      const text = asText(raw)
      const max = field.maxlen ?? (field.type === 'text' ? TEXT_MAX : LONG_TEXT_MAX)
      if ([...text].length > max) throw new ValueError(`is longer than ${max} characters`)
      if (text.includes('\u0000')) throw new ValueError('must not contain NUL characters')
      if (field.type === 'text' && /[\r\n]/.test(text)) throw new ValueError('must be one line (use a long text field for several)')
      if (field.type === 'text' && field.pattern) {
        const re = compilePattern(field.pattern)
        if (re && !re.test(text)) throw new ValueError(`does not match the pattern ${field.pattern}`)
      }
      return { value: JSON.stringify(text), text, uniqueKey: null }
    }
    case 'number': {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$/.test(raw) ? Number(raw) : NaN
      if (!Number.isFinite(n)) throw new ValueError('is not a number')
      if (field.integer && !Number.isInteger(n)) throw new ValueError('must be a whole number')
      if (field.min !== null && n < field.min) throw new ValueError(`must be at least ${field.min}`)
      if (field.max !== null && n > field.max) throw new ValueError(`must be at most ${field.max}`)
      return { value: JSON.stringify(n), text: String(n), uniqueKey: null }
    }
    case 'date': {
      const text = asText(raw).trim()
      if (!validDate(text)) throw new ValueError('is not a date (YYYY-MM-DD)')
      return { value: JSON.stringify(text), text, uniqueKey: null }
    }
    case 'datetime': {
      const text = asText(raw).trim()
      const ms = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/.test(text) && validDate(text.slice(0, 10)) ? Date.parse(text.replace(' ', 'T')) : NaN
      if (!Number.isFinite(ms)) throw new ValueError('is not a date and time (ISO 8601, e.g. 2026-03-01T14:30:00Z)')
      const iso = new Date(ms).toISOString()
      return { value: JSON.stringify(iso), text: iso, uniqueKey: null }
    }
    case 'boolean': {
      const b = raw === true || raw === 'true' || raw === '1' || raw === 1 ? true : raw === false || raw === 'false' || raw === '0' || raw === 0 ? false : undefined
      if (b === undefined) throw new ValueError('is not true or false')
      return { value: JSON.stringify(b), text: String(b), uniqueKey: null }
    }
    case 'select':
    case 'multi_select': {
      const options = await lookups.options(field.id)
      const find = (key: unknown) => {
        const byId = typeof key === 'number' || (typeof key === 'string' && /^\d+$/.test(key)) ? options.find((o) => o.id === Number(key)) : undefined
        const found = byId ?? (typeof key === 'string' ? options.find((o) => o.name === key) : undefined)
        if (!found) throw new ValueError(`${typeof key === 'string' || typeof key === 'number' ? `"${String(key).slice(0, 100)}"` : 'the value'} is not one of the options (${options.map((o) => o.name).join(', ') || 'none yet'})`)
        return found
      }
      if (field.type === 'select') {
        if (Array.isArray(raw)) throw new ValueError('takes one option, not a list')
        const o = find(raw)
        return { value: JSON.stringify(o.id), text: o.name, uniqueKey: null }
      }
      const list = Array.isArray(raw) ? raw : [raw]
      if (list.length > 1000) throw new ValueError('has more than 1000 options')
      const chosen = [...new Map(list.map((k) => find(k)).map((o) => [o.id, o])).values()].sort((a, b) => a.id - b.id)
      if (chosen.length === 0) throw new ValueError('needs at least one option (null clears the field)')
      return { value: JSON.stringify(chosen.map((o) => o.id)), text: chosen.map((o) => o.name).join('\n'), uniqueKey: null }
    }
    case 'user': {
      if (typeof raw !== 'number' && typeof raw !== 'string') throw new ValueError('is not a user id or user name')
      const u = await lookups.user(raw)
      if (!u) throw new ValueError('is not a known user')
      return { value: JSON.stringify(u.id), text: u.username, uniqueKey: null }
    }
    case 'generator': {
      const text = asText(raw).trim()
      if (!field.pattern || !templateRegExp(field.pattern).test(text)) throw new ValueError(`does not fit the template ${field.pattern}`)
      return { value: JSON.stringify(text), text, uniqueKey: text }
    }
  }
}

/** the stored JSON as clients see it: option names for selects, the rest as stored */
export function present(type: FieldType, value: string, text: string): unknown {
  const v = JSON.parse(value)
  if (type === 'select') return text
  if (type === 'multi_select') return text === '' ? [] : text.split('\n')
  return v
}
