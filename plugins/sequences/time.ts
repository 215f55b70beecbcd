import { canDrop, formatTimecode, nominal, parseTimecode, rateString, rateValue, toRate, type Rate } from '../markers/index.js'

/**
 * Time on a sequence. Everything is stored and computed in whole frames at the sequence's rate
 * (NLE-FORMATS.md §1.1); the formats' own notations (timecode, FCPXML rational seconds, OTIO
 * RationalTime, xmeml timebase + ntsc) are converted here and nowhere else. Timecode labels come from
 * the markers plugin's timecode module, so both plugins count drop-frame the same way.
 */

export { canDrop, nominal, rateString, rateValue, toRate, type Rate }

/** frames since midnight → `HH:MM:SS:FF` (`;` before the frames when counting drop-frame) */
export const timecode = (frames: number, rate: Rate, dropFrame: boolean) => formatTimecode(frames, rate, dropFrame)

/** a timecode label → frames since midnight; `;` marks drop-frame unless `dropFrame` says otherwise; null when it is none */
export const framesOfTimecode = (text: string, rate: Rate, dropFrame?: boolean) => parseTimecode(text, rate, dropFrame)

/** a duration in frames as `HH:MM:SS:FF` (non-drop: durations are counts, not clock labels) */
export const durationTimecode = (frames: number, rate: Rate) => formatTimecode(frames, rate, false)

/** an exact rational number */
export interface Rational {
  num: number
  den: number
}

const gcd = (a: number, b: number): number => (b === 0 ? Math.abs(a) : gcd(b, a % b))

/** `1001/30000s`, `3600s`, `3.5s` (FCPXML time) → an exact rational; null when it is none */
export function parseSeconds(text: string | undefined | null): Rational | null {
  if (text === undefined || text === null) return null
  const m = /^\s*(-?\d+)(?:\.(\d+))?(?:\/(\d+))?s\s*$/.exec(String(text))
  if (!m) return null
  if (m[2] !== undefined && m[3] !== undefined) return null
  const scale = m[2] ? 10 ** m[2].length : 1
  const num = Number(m[1]) * scale + (m[2] ? Math.sign(Number(m[1]) || 1) * Number(m[2]) : 0)
  const den = (m[3] ? Number(m[3]) : 1) * scale
  if (!den || !Number.isSafeInteger(num)) return null
  const g = gcd(num, den) || 1
  return { num: num / g, den: den / g }
}

/** seconds → frames at `rate`, rounded to the nearest frame (FCPXML times off the frame grid snap) */
export const framesOfSeconds = (s: Rational, rate: Rate) => Math.round((s.num * rate.num) / (s.den * rate.den))

/** frames → FCPXML rational seconds: `1001/30000s`, `3s`, `0s` */
export function secondsOfFrames(frames: number, rate: Rate): string {
  const num = frames * rate.den
  const den = rate.num
  if (num === 0) return '0s'
  const g = gcd(num, den)
  return den / g === 1 ? `${num / g}s` : `${num / g}/${den / g}s`
}

/** xmeml `<rate><timebase>30</timebase><ntsc>TRUE</ntsc>` → 30000/1001 */
export function rateOfTimebase(timebase: unknown, ntsc: unknown): Rate | null {
  const base = Number(timebase)
  if (!Number.isInteger(base) || base <= 0 || base > 1000) return null
  return String(ntsc).toUpperCase() === 'TRUE' ? { num: base * 1000, den: 1001 } : { num: base, den: 1 }
}

/** frames counted at one rate → the nearest frame at another (xmeml clips may carry their own timebase) */
export const convertFrames = (frames: number, from: Rate, to: Rate) => (from.num === to.num && from.den === to.den ? frames : Math.round((frames * from.den * to.num) / (from.num * to.den)))

/** an OTIO RationalTime (`value` units at `rate` per second, often a float such as 29.97) → frames at `to` */
export function framesOfRationalTime(value: number, rate: number, to: Rate): number {
  const from = toRate(rate)
  return from ? convertFrames(value, from, to) : Math.round((value / rate) * rateValue(to))
}
