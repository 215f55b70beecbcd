/**
 * The `%` language of substitution patterns (spec §2, SubstitutionPattern.pattern). Pure functions:
 * templates validate patterns with `patternErrors` when they are saved, projects expand them with
 * `expandPattern` / `applySubstitutions` when a project is created from a template.
 */

export interface SubstitutionContext {
  /** %n */
  projectName: string
  /** %u */
  userName: string
  /** %Y %m %d %H %M %S, in the server's local time */
  date: Date
}

export interface SubstitutionPattern {
  token: string
  pattern: string
}

const pad = (n: number) => String(n).padStart(2, '0')

const SEQUENCES: Record<string, (c: SubstitutionContext) => string> = {
  n: (c) => c.projectName,
  u: (c) => c.userName,
  Y: (c) => String(c.date.getFullYear()),
  m: (c) => pad(c.date.getMonth() + 1),
  d: (c) => pad(c.date.getDate()),
  H: (c) => pad(c.date.getHours()),
  M: (c) => pad(c.date.getMinutes()),
  S: (c) => pad(c.date.getSeconds()),
  '%': () => '%',
}

export const KNOWN_SEQUENCES = Object.keys(SEQUENCES).map((k) => `%${k}`)

/** Problems with a pattern, as messages; empty when the pattern is valid. */
export function patternErrors(pattern: string): string[] {
  const errors: string[] = []
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== '%') continue
    const next = pattern[i + 1]
    if (next === undefined) errors.push('ends with a lone %; write %% for a literal percent sign')
    else if (!(next in SEQUENCES)) errors.push(`contains the unknown sequence %${next} (known: ${KNOWN_SEQUENCES.join(' ')})`)
    i++
  }
  return errors
}

/** `"%Y-%n"` → `"2026-Trailer"`. Throws on an invalid pattern (they are checked when saved). */
export function expandPattern(pattern: string, context: SubstitutionContext): string {
  return pattern.replace(/%(.?)/gs, (whole, seq: string) => {
    const fn = SEQUENCES[seq]
    if (!fn) throw new Error(`invalid substitution pattern "${pattern}": ${patternErrors(pattern)[0]}`)
    return fn(context)
  })
}

/**
 * Replaces every token in `text` by its expanded pattern, all tokens in one pass, so a replacement
 * that happens to contain another token is not substituted again. Longer tokens win over their prefixes.
 */
export function applySubstitutions(text: string, patterns: SubstitutionPattern[], context: SubstitutionContext): string {
  const active = patterns.filter((p) => p.token.length > 0)
  if (active.length === 0) return text
  const replacements = new Map(active.map((p) => [p.token, expandPattern(p.pattern, context)]))
  const alternation = [...replacements.keys()]
    .sort((a, b) => b.length - a.length)
    .map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|')
  return text.replace(new RegExp(alternation, 'g'), (token) => replacements.get(token)!)
}
