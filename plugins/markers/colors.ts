/**
 * Marker colours: the MAM's names and how each editing suite spells them (NLE-FORMATS.md §1.3).
 * Every table maps both ways; reading picks the first MAM colour that a suite's value maps to.
 */

export const COLORS = ['red', 'green', 'blue', 'cyan', 'magenta', 'yellow', 'white', 'black', 'orange', 'pink', 'violet', 'purple', 'grey', 'gold', 'forest', 'denim'] as const
export type MarkerColor = (typeof COLORS)[number]
export const DEFAULT_COLOR: MarkerColor = 'red'

/** Avid's eight legacy names (`_ATN_CRM_COLOR`, the text list's 4th column, EDL `* LOC:` lines) */
const AVID_LEGACY = new Set<MarkerColor>(['red', 'green', 'blue', 'cyan', 'magenta', 'yellow', 'white', 'black'])
/** what an older Media Composer shows for an extended colour (2024.6+ writes the extended name beside it) */
const AVID_FALLBACK: Record<string, MarkerColor> = { orange: 'yellow', pink: 'magenta', violet: 'magenta', purple: 'magenta', grey: 'white', gold: 'yellow', forest: 'green', denim: 'blue' }

const title = (c: string) => c[0].toUpperCase() + c.slice(1)

export const isColor = (value: string): value is MarkerColor => (COLORS as readonly string[]).includes(value)

/** a colour as a client or a file names it (any case, a few synonyms) */
export function normalizeColor(value: string): MarkerColor | null {
  const v = value.trim().toLowerCase()
  const synonyms: Record<string, MarkerColor> = { gray: 'grey', teal: 'cyan', rose: 'pink', lavender: 'violet', fuchsia: 'purple' }
  return isColor(v) ? v : (synonyms[v] ?? null)
}

export const avid = {
  /** `_ATN_CRM_COLOR` value (legacy name) */
  legacy: (c: MarkerColor) => title(AVID_LEGACY.has(c) ? c : AVID_FALLBACK[c]),
  /** `_ATN_CRM_COLOR_EXTENDED` value, for the colours older versions do not know */
  extended: (c: MarkerColor) => (AVID_LEGACY.has(c) ? null : title(c)),
  /** the extended name wins when both are there */
  read: (legacy: string | undefined, extended: string | undefined): MarkerColor | null =>
    (extended ? normalizeColor(extended) : null) ?? (legacy ? normalizeColor(legacy) : null),
}

const RESOLVE: Array<[MarkerColor, string]> = [
  ['red', 'Red'],
  ['green', 'Green'],
  ['blue', 'Blue'],
  ['cyan', 'Cyan'],
  ['magenta', 'Purple'],
  ['yellow', 'Yellow'],
  ['white', 'Cream'],
  ['orange', 'Sand'],
  ['pink', 'Pink'],
  ['violet', 'Lavender'],
  ['purple', 'Fuchsia'],
  ['grey', 'Cocoa'],
  ['gold', 'Lemon'],
  ['forest', 'Mint'],
  ['denim', 'Sky'],
  ['black', 'Chocolate'],
]
export const resolve = {
  /** `ResolveColorBlue` */
  write: (c: MarkerColor) => `ResolveColor${RESOLVE.find(([m]) => m === c)![1]}`,
  read: (value: string): MarkerColor | null => RESOLVE.find(([, r]) => `resolvecolor${r.toLowerCase()}` === value.trim().toLowerCase())?.[0] ?? null,
}

/** Premiere's `<pproColor>` in xmeml: 32-bit ABGR (green is Premiere's default and written as no tag) */
const PREMIERE: Array<[MarkerColor, number | null]> = [
  ['green', null],
  ['red', 4281740498],
  ['magenta', 4289825711],
  ['orange', 4280578025],
  ['yellow', 4281049552],
  ['white', 4294967295],
  ['blue', 4294741314],
  ['cyan', 4292277273],
]
const PREMIERE_FALLBACK: Record<string, MarkerColor> = { black: 'white', pink: 'magenta', violet: 'magenta', purple: 'magenta', grey: 'white', gold: 'yellow', forest: 'green', denim: 'blue' }
export const premiere = {
  write: (c: MarkerColor): number | null => PREMIERE.find(([m]) => m === (PREMIERE_FALLBACK[c] ?? c))![1],
  read: (value: number | null): MarkerColor => PREMIERE.find(([, p]) => p === value)?.[0] ?? 'green',
}

/**
 * FCPXML has no marker colour: Final Cut shows the kind. A to-do marker is red, a completed one green,
 * a chapter marker orange, a standard marker blue; other colours are written as standard markers.
 */
export const fcpx = {
  kind: (c: MarkerColor): 'todo' | 'done' | 'chapter' | 'standard' => (c === 'red' ? 'todo' : c === 'green' ? 'done' : c === 'orange' ? 'chapter' : 'standard'),
  read: (element: 'marker' | 'chapter-marker', completed: string | undefined): MarkerColor =>
    element === 'chapter-marker' ? 'orange' : completed === '0' ? 'red' : completed === '1' ? 'green' : 'blue',
}
