import type { Word } from './engine.js'

/**
 * Sentences and words as stored: times in whole milliseconds from the start of the asset (never
 * floating seconds, so edits and subtitle cues compare exactly). A sentence's text is its words
 * joined by single spaces, and its start/end enclose its words; every edit keeps both true.
 */
export interface StoredWord {
  word: string
  start: number
  end: number
  confidence: number
}

export interface PlainSentence {
  start: number
  end: number
  text: string
  speaker: string
  words: StoredWord[]
}

export const DEFAULT_SPEAKER = 'Speaker 1'

export interface GroupingRules {
  /** a pause at least this long (ms) ends a sentence */
  pauseMs: number
  /** a sentence is cut before it grows longer than this (ms) … */
  maxMs: number
  /** … or has more words than this */
  maxWords: number
}

export const DEFAULT_GROUPING: GroupingRules = { pauseMs: 600, maxMs: 10_000, maxWords: 25 }

const toMs = (seconds: number) => Math.round(seconds * 1000)

/**
 * Groups an engine's words (seconds, possibly from several chunks) into sentences: at pauses, after
 * sentence punctuation (engines that write it), and before a sentence grows too long. Every
 * sentence gets the first speaker's label; there is no speaker separation in the engines here.
 */
export function groupSentences(words: Word[], rules: GroupingRules = DEFAULT_GROUPING): PlainSentence[] {
  const sorted = words
    .filter((w) => w.word.trim() !== '')
    .map((w) => ({ word: w.word.trim().replace(/\s+/g, ' '), start: toMs(w.start), end: toMs(w.end), confidence: Math.round(w.confidence * 10_000) / 10_000 }))
    .sort((a, b) => a.start - b.start || a.end - b.end)
  // monotonic: a word never starts before the previous one ended (chunk seams, engine rounding)
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].start < sorted[i - 1].end) sorted[i].start = sorted[i - 1].end
    if (sorted[i].end < sorted[i].start) sorted[i].end = sorted[i].start
  }
  const out: PlainSentence[] = []
  let current: StoredWord[] = []
  const close = () => {
    if (current.length) out.push(sentenceOf(current, DEFAULT_SPEAKER))
    current = []
  }
  for (const w of sorted) {
    const last = current[current.length - 1]
    if (last && (w.start - last.end >= rules.pauseMs || /[.?!]["')\]]?$/.test(last.word) || w.end - current[0].start > rules.maxMs || current.length >= rules.maxWords)) close()
    current.push(w)
  }
  close()
  return out
}

export function sentenceOf(words: StoredWord[], speaker: string): PlainSentence {
  return { start: words[0].start, end: words[words.length - 1].end, text: words.map((w) => w.word).join(' '), speaker, words }
}

const normal = (w: string) => w.toLowerCase().replace(/[^\p{L}\p{N}']+/gu, '')

/**
 * New text for a sentence, keeping word timings where words stayed: the longest common subsequence
 * of old and new words (case and punctuation ignored) keeps its timings; each run of new words
 * between two kept ones shares, by length, the time of the old words it replaces (or the gap
 * between its neighbours), so timings stay ordered and inside the sentence.
 */
export function retext(sentence: { start: number; end: number; words: StoredWord[] }, text: string): StoredWord[] {
  const tokens = text.trim().split(/\s+/).filter(Boolean)
  const old = sentence.words
  const a = old.map((w) => normal(w.word))
  const b = tokens.map(normal)
  // LCS table (sentences are short: at most a few hundred words)
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0))
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] && a[i] !== '' ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1])
  const pairs: Array<[number, number]> = []
  for (let i = 0, j = 0; i < a.length && j < b.length; ) {
    if (a[i] === b[j] && a[i] !== '') pairs.push([i++, j++])
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) i++
    else j++
  }
  const out: StoredWord[] = new Array(tokens.length)
  const anchors: Array<[number, number]> = [[-1, -1], ...pairs, [a.length, b.length]]
  for (let k = 0; k < anchors.length - 1; k++) {
    const [i0, j0] = anchors[k]
    const [i1, j1] = anchors[k + 1]
    if (j0 >= 0 && j0 < b.length) out[j0] = { ...old[i0], word: tokens[j0] }
    const fresh = tokens.slice(j0 + 1, j1)
    if (!fresh.length) continue
    const replaced = old.slice(i0 + 1, i1)
    const from = replaced.length ? replaced[0].start : i0 >= 0 ? old[i0].end : sentence.start
    const to = replaced.length ? replaced[replaced.length - 1].end : i1 < a.length ? old[i1].start : sentence.end
    spread(fresh, from, Math.max(from, to)).forEach((w, n) => (out[j0 + 1 + n] = w))
  }
  return out
}

/** words laid over [from, to] in proportion to their length; edited by a person, so fully confident */
function spread(tokens: string[], from: number, to: number): StoredWord[] {
  const total = tokens.reduce((n, t) => n + t.length, 0)
  let at = from
  let used = 0
  return tokens.map((word) => {
    used += word.length
    const end = Math.round(from + ((to - from) * used) / total)
    const w = { word, start: at, end, confidence: 1 }
    at = end
    return w
  })
}

/** a sentence moved or stretched to [start, end]: its words are mapped linearly into the new span */
export function retime(sentence: { start: number; end: number; words: StoredWord[] }, start: number, end: number): StoredWord[] {
  const span = sentence.end - sentence.start
  const map = (t: number, i: number, edge: 'start' | 'end') =>
    span > 0 ? Math.round(start + ((t - sentence.start) * (end - start)) / span) : Math.round(start + ((end - start) * (i + (edge === 'end' ? 1 : 0))) / sentence.words.length)
  let previous = start
  return sentence.words.map((w, i) => {
    const s = Math.min(end, Math.max(previous, map(w.start, i, 'start')))
    const e = Math.min(end, Math.max(s, map(w.end, i, 'end')))
    previous = e
    return { ...w, start: s, end: e }
  })
}

// ----- subtitles -----

export interface Cue {
  start: number
  end: number
  lines: string[]
  speaker: string
}

const MAX_LINE = 42
const MAX_CUE_CHARS = 2 * MAX_LINE

/** two lines at most, broken at the space nearest the middle */
function lines(text: string): string[] {
  if (text.length <= MAX_LINE) return [text]
  const middle = text.length / 2
  let best = -1
  for (let i = text.indexOf(' '); i >= 0; i = text.indexOf(' ', i + 1)) if (best < 0 || Math.abs(i - middle) < Math.abs(best - middle)) best = i
  return best < 0 ? [text] : [text.slice(0, best), text.slice(best + 1)]
}

/**
 * Subtitle cues of sentences in time order: a sentence longer than two lines is split at word
 * boundaries using its word timings; cues never overlap (a cue ends where the next begins at the
 * latest) and last at least one millisecond. Speakers are named when there are several.
 */
export function cuesOf(sentences: PlainSentence[]): Cue[] {
  const sorted = [...sentences].filter((s) => s.text.trim() !== '').sort((a, b) => a.start - b.start || a.end - b.end)
  const raw: Cue[] = []
  for (const s of sorted) {
    const words = s.words.length ? s.words : [{ word: s.text, start: s.start, end: s.end, confidence: 1 }]
    let group: StoredWord[] = []
    const flush = () => {
      if (!group.length) return
      const text = group.map((w) => w.word).join(' ')
      raw.push({ start: group[0].start, end: group[group.length - 1].end, lines: lines(text), speaker: s.speaker })
      group = []
    }
    for (const w of words) {
      const length = group.reduce((n, g) => n + g.word.length + 1, 0) + w.word.length
      if (group.length && length > MAX_CUE_CHARS) flush()
      group.push(w)
    }
    flush()
  }
  const cues: Cue[] = []
  let floor = 0
  for (const [i, c] of raw.entries()) {
    const start = Math.max(c.start, floor)
    const next = raw[i + 1]?.start ?? Infinity
    let end = Math.min(Math.max(c.end, start + 1), Math.max(next, start + 1))
    if (end <= start) end = start + 1
    cues.push({ ...c, start, end })
    floor = end
  }
  return cues
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0')
export function clock(ms: number, separator: ',' | '.'): string {
  const h = Math.floor(ms / 3_600_000)
  const m = Math.floor((ms % 3_600_000) / 60_000)
  const s = Math.floor((ms % 60_000) / 1000)
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`
}

/** text that cannot end a cue early or be read as a timing line */
const safe = (line: string) => line.replace(/-->/g, '->').replace(/[\r\n]+/g, ' ')

/** SubRip: numbered cues from 1, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, a blank line after each, CRLF-free UTF-8 */
export function toSrt(sentences: PlainSentence[]): string {
  const cues = cuesOf(sentences)
  const named = new Set(cues.map((c) => c.speaker)).size > 1
  return cues
    .map((c, i) => {
      const text = c.lines.map(safe)
      if (named) text[0] = `${c.speaker}: ${text[0]}`
      return `${i + 1}\n${clock(c.start, ',')} --> ${clock(c.end, ',')}\n${text.join('\n')}\n`
    })
    .join('\n')
}

const escapeVtt = (line: string) => safe(line).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** WebVTT: the `WEBVTT` header, numbered cue identifiers, `HH:MM:SS.mmm`, speakers as voice spans */
export function toVtt(sentences: PlainSentence[], title?: string): string {
  const cues = cuesOf(sentences)
  const named = new Set(cues.map((c) => c.speaker)).size > 1
  const head = `WEBVTT${title ? ` - ${safe(title).replace(/-->/g, '')}` : ''}\n`
  const body = cues.map((c, i) => {
    const text = c.lines.map(escapeVtt)
    if (named) text[0] = `<v ${escapeVtt(c.speaker)}>${text[0]}`
    return `${i + 1}\n${clock(c.start, '.')} --> ${clock(c.end, '.')}\n${text.join('\n')}\n`
  })
  return [head, ...body].join('\n')
}
