import { invalidParam } from '../../core/index.js'
export const TERM_MAX = 500
export const WORD_MAX = 100
export const PARTS_MAX = 32

/** a parsed search term: what every document must contain, what it must not, and field filters */
export interface ParsedTerm {
  /** words matched as prefixes (`inter` finds `interview`) */
  words: string[]
  /** quoted phrases, each as its words in order (matched exactly) */
  phrases: string[][]
  /** `-word` / `-"a phrase"`: documents containing them are left out */
  excluded: string[][]
  /** `field:value` / `field:"two words"`: a custom field or whitelisted property whose value starts with `value` */
  fields: Array<{ field: string; value: string }>
}

/** lower case, split at everything that is not a letter or digit: the index's own word rule */
export const wordsOf = (text: string): string[] => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean)

/**
 * Reads `interview "red car" -draft client:acme reel:"A 001"`. Errors name `term`: too long, an
 * unbalanced quote, a word over 100 characters, more than 32 parts, nothing to look for.
 */
export function parseTerm(term: string): ParsedTerm {
  if ([...term].length > TERM_MAX) throw invalidParam('term', `is longer than ${TERM_MAX} characters`)
  if ((term.match(/"/g) ?? []).length % 2) throw invalidParam('term', 'has an unbalanced quote (")')
  const out: ParsedTerm = { words: [], phrases: [], excluded: [], fields: [] }
  const re = /(-?)(?:([\p{L}\p{N}_.-]+):)?(?:"([^"]*)"|(\S+))/gu
  let parts = 0
  for (const m of term.matchAll(re)) {
    const [, minus, field, quoted, bare] = m
    const text = quoted ?? bare ?? ''
    if (++parts > PARTS_MAX) throw invalidParam('term', `has more than ${PARTS_MAX} parts`)
    if ([...text].length > WORD_MAX) throw invalidParam('term', `has a part longer than ${WORD_MAX} characters`)
    if (field) {
      if (minus) throw invalidParam('term', `cannot exclude a field (-${field}:…)`)
      if (!text.trim()) throw invalidParam('term', `gives ${field}: no value`)
      out.fields.push({ field, value: text.trim() })
      continue
    }
    const words = wordsOf(text)
    if (!words.length) continue
    if (minus) out.excluded.push(words)
    else if (quoted !== undefined || words.length > 1) out.phrases.push(words)
    else out.words.push(words[0])
  }
  if (!out.words.length && !out.phrases.length && !out.fields.length) throw invalidParam('term', 'has nothing to look for (a word, a "phrase" or field:value)')
  return out
}

/**
 * A field filter resolved: a custom field (by name) or a whitelisted property, with the words the index
 * holds for it. It holds where a value of that field starts with the value's words, the last a prefix
 * (on both databases: PostgreSQL's field lexemes, `fields`, 0005; SQLite's field texts, 0006).
 */
export type FieldFilter = ({ kind: 'custom'; name: string } | { kind: 'property'; key: string }) & {
  value: string
  words: string[]
  /** PostgreSQL: tested through `fields`' GIN index (narrow), else the field's words in the words' index find the candidates and `fields` rechecks them (service.ts, narrowLexeme; tsqueryFieldCandidates) */
  indexed?: boolean
}

// ---- PostgreSQL tsquery ------------------------------------------------------------------------

const lexeme = (w: string) => `'${w.replace(/'/g, "''")}'`
/** a lexeme of any characters in tsquery's own syntax (quoted; quotes and backslashes escaped) */
export const tsLexeme = (w: string) => `'${w.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`

/** a field lexeme prefix held by at most this many documents (planner's estimate) is tested on `fields`; a broader one keeps the phrase */
export const FIELD_LEXEME_ROWS = 50_000

/** the longest field lexeme the index holds (mamkit_field_lexeme, migration 0005: a lexeme takes at most 2,047 bytes) */
export const FIELD_LEXEME_MAX = 480

/**
 * The field lexeme a `field:value` filter is a prefix of (PostgreSQL's `fields` column, migration 0005):
 * `B:client=acme corp` for a custom field, `C:reel name=a001` for a property: the part, the field's
 * words, `=`, the value's words, as mamkit_field_lexeme writes them, cut where it cuts them (480
 * characters: a field name is at most 255 and a value part 100, so a real filter is never cut).
 */
export function fieldLexeme(f: FieldFilter): string {
  const text = `${f.kind === 'custom' ? 'B' : 'C'}:${wordsOf(f.kind === 'custom' ? f.name : f.key).join(' ')}=${wordsOf(f.value).join(' ')}`
  return [...text].slice(0, FIELD_LEXEME_MAX).join('')
}

/** a word prefix held by at most this many lexemes of the lexicon is searched as them (service.ts, prefixLexemes); a broader one stays a prefix */
export const PREFIX_LEXEMES = 64

/**
 * `'inter':* & 'red' <-> 'car'`: words as prefixes, phrases exact; null when there is nothing. A word given
 * its lexemes (`lexemesOf`: the lexicon's words that start with it) is those exact lexemes instead,
 * `('interview' | 'internal')`: the same documents, which GIN finds without a bitmap of the prefix.
 */
export function tsquery(words: string[], phrases: string[][], lexemesOf?: ReadonlyMap<string, string[]>): string | null {
  const word = (w: string) => {
    const known = lexemesOf?.get(w)
    return known ? `(${known.map(lexeme).join(' | ')})` : `${lexeme(w)}:*`
  }
  const parts = [...words.map(word), ...phrases.map((p) => (p.length === 1 ? lexeme(p[0]) : `(${p.map(lexeme).join(' <-> ')})`))]
  return parts.length ? parts.join(' & ') : null
}

/** any of these phrases (for exclusion) */
export const tsqueryAny = (phrases: string[][]): string | null => (phrases.length ? phrases.map((p) => `(${p.map(lexeme).join(' <-> ')})`).join(' | ') : null)

// ---- SQLite FTS5 -------------------------------------------------------------------------------

const quoteFts = (w: string) => `"${w.replace(/"/g, '""')}"`

/** `"inter"* AND "red car"`: the same meaning in FTS5's syntax */
export function ftsQuery(words: string[], phrases: string[][]): string | null {
  const parts = [...words.map((w) => `${quoteFts(w)}*`), ...phrases.map((p) => quoteFts(p.join(' ')))]
  return parts.length ? parts.join(' AND ') : null
}

export const ftsAny = (phrases: string[][]): string | null => (phrases.length ? phrases.map((p) => quoteFts(p.join(' '))).join(' OR ') : null)

// ---- field:value, matched in the index: the field's words followed by the value's words ----------

/** PostgreSQL: `('client':B <-> 'acme':*B)`, in the weight of the field's part of the document */
export function tsqueryField(words: string[], weight: 'B' | 'C'): string {
  return `(${words.map((w, i) => `${lexeme(w)}:${i === words.length - 1 ? '*' : ''}${weight}`).join(' <-> ')})`
}

/**
 * PostgreSQL, a broad filter's candidates in the words' index (service.ts, matching): the field's words and
 * the value's words but the last, as exact lexemes of any weight (`'client' & 'acme'` for `client:"acme co"`).
 * Every document with such a value holds them, so `fields` rechecking these candidates gives the filter's
 * answer. Exact lexemes without weights cost GIN neither a bitmap nor a recheck: the last word's prefix (in
 * more than FIELD_LEXEME_ROWS documents, since the filter is broad) was a partial match, which GIN turns into
 * a bitmap of every document holding it (`'client':*` at a million assets: 333,000 entries, ~20 ms), and
 * weights or a phrase made it reread each candidate's tsvector. The phrase stays when there is nothing else.
 */
export function tsqueryFieldCandidates(f: FieldFilter): string {
  const exact = f.words.slice(0, -1)
  return exact.length ? exact.map(lexeme).join(' & ') : tsqueryField(f.words, f.kind === 'custom' ? 'B' : 'C')
}

/**
 * FTS5, the field texts (search_fields_fts, migration 0006): `"=b= client = acme co" *`, a value of the
 * field `client` that starts with `acme co…` (the markers are tokens no word can be)
 */
export const ftsFieldText = (f: FieldFilter): string =>
  `${quoteFts(`${f.kind === 'custom' ? '=b=' : '=c='} ${wordsOf(f.kind === 'custom' ? f.name : f.key).join(' ')} = ${wordsOf(f.value).join(' ')}`)} *`

/** FTS5: `custom : "client acme" *`, in the column of the field's part of the document */
export const ftsField = (words: string[], col: 'custom' | 'props'): string => `${col} : ${quoteFts(words.join(' '))} *`

// ---- PostgreSQL tags (migration 0009): an id's bucket and a project, in every document's tsv -----

/** a document's bucket tag is `~b<object_id >> TAG_BUCKET_BITS>`: 65,536 ids a bucket */
export const TAG_BUCKET_BITS = 16

/** the most tags one test ORs (a key of more would cost GIN a stream per tag for every candidate) */
export const TAGS_MAX = 64

/** `'~b15' | '~b14'`: the buckets of the ids in [lo, hi), newest first; null when they are more than TAGS_MAX */
export function tsqueryBuckets(lo: number, hi: number): string | null {
  const [from, to] = [Math.max(0, lo) >> TAG_BUCKET_BITS, Math.max(0, hi - 1) >> TAG_BUCKET_BITS]
  if (hi <= lo || to - from + 1 > TAGS_MAX) return null
  return Array.from({ length: to - from + 1 }, (_, i) => `'~b${to - i}'`).join(' | ')
}

/** `'~p3' | '~p17'`: documents of these projects; null when there are none or more than TAGS_MAX */
export const tsqueryProjects = (ids: number[]): string | null => (ids.length && ids.length <= TAGS_MAX ? ids.map((id) => `'~p${Number(id)}'`).join(' | ') : null)
