import { checkParams as check, type ParamError } from '../../core/index.js'
import { PatternElement } from './schemas.js'
import { patternErrors, type SubstitutionPattern } from './substitution.js'

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

const asList = (v: unknown): unknown[] => (Array.isArray(v) ? v : [v])
/** `{token: [a, c], pattern: [b, d]}` → `[{token: a, pattern: b}, {token: c, pattern: d}]` */
const unzip = (el: Record<string, unknown>) =>
  Array.from({ length: Math.max(...Object.values(el).map((v) => asList(v).length)) }, (_, i) =>
    Object.fromEntries(Object.entries(el).flatMap(([k, v]) => (asList(v)[i] === undefined ? [] : [[k, asList(v)[i]]]))),
  )
const merged = (v: unknown): v is Record<string, unknown> => isObject(v) && Object.values(v).some((x) => Array.isArray(x) && x.length > 1)

/**
 * Forms send a list of hashes as repeated `substitution_patterns[][substitution_pattern][token]=…`
 * (Rails starts a new element when a key repeats); qs merges the repeats into one element holding
 * lists, which this splits again.
 */
function unmerge(el: unknown): unknown[] {
  if (isObject(el) && Object.keys(el).length === 1 && merged(el.substitution_pattern)) return unzip(el.substitution_pattern).map((p) => ({ substitution_pattern: p }))
  return merged(el) ? unzip(el) : [el]
}

/**
 * Reads `substitution_patterns` in any shape clients send and validates every element, naming each
 * offending parameter as sent (`substitution_patterns[substitution_pattern][token]`,
 * `substitution_patterns[0][pattern]` …). `undefined` means "not given": keep what is stored.
 */
export function readPatterns(raw: unknown, base: string, typed: boolean, errors: ParamError[]): SubstitutionPattern[] | undefined {
  if (raw === undefined) return undefined
  if (raw === null || raw === '') return []
  const elements: Array<[string, unknown]> = []
  const addList = (list: unknown[], prefix: string) =>
    list.flatMap((el) => (typed ? [el] : unmerge(el))).forEach((el, i) => {
      if (isObject(el) && 'substitution_pattern' in el && Object.keys(el).length === 1) elements.push([`${prefix}[${i}][substitution_pattern]`, el.substitution_pattern])
      else elements.push([`${prefix}[${i}]`, el])
    })
  if (Array.isArray(raw)) addList(raw, base)
  else if (isObject(raw) && 'substitution_pattern' in raw && Object.keys(raw).length === 1) {
    const inner = raw.substitution_pattern
    if (Array.isArray(inner)) addList(inner, `${base}[substitution_pattern]`)
    else elements.push([`${base}[substitution_pattern]`, inner])
  } else if (isObject(raw) && Object.keys(raw).every((k) => /^\d+$/.test(k))) {
    // qs turns large indices into object keys
    addList(Object.keys(raw).sort((a, b) => +a - +b).map((k) => raw[k]), base)
  } else {
    errors.push({ param: base, message: 'must be a list of elements with token and pattern' })
    return undefined
  }

  const patterns: SubstitutionPattern[] = []
  const seen = new Set<string>()
  for (const [name, el] of elements) {
    if (!isObject(el)) {
      errors.push({ param: name, message: 'must be a hash with token and pattern' })
      continue
    }
    const found = check(PatternElement, el, typed, name)
    if (found.length) {
      errors.push(...found)
      continue
    }
    const { token, pattern } = el as unknown as SubstitutionPattern
    for (const message of patternErrors(pattern)) errors.push({ param: `${name}[pattern]`, message })
    if (seen.has(token)) errors.push({ param: `${name}[token]`, message: `repeats the token "${token}"` })
    seen.add(token)
    patterns.push({ token, pattern })
  }
  return patterns
}
