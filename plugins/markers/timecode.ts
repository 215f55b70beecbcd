/**
 * Frames ↔ SMPTE timecode. Markers are stored as frame counts on the asset's own timeline plus its
 * rate (NLE-FORMATS.md §1.1); timecode is only ever computed for display and exchange. Drop-frame
 * (29.97 and 59.94 written with `;`) skips frame numbers 0–1 (0–3 at 59.94) at the start of every
 * minute except each tenth minute, so a label matches the wall clock.
 */

export interface Rate {
  /** frames per second as a fraction: 30000/1001 for 29.97 */
  num: number
  den: number
}

const NTSC: Array<[number, number]> = [
  [23.976, 24000],
  [29.97, 30000],
  [47.952, 48000],
  [59.94, 60000],
  [119.88, 120000],
]

/** a probed rate (25, 29.97002997 …) or a string (`25`, `30000/1001`, `29.97`) as an exact fraction; null when it is none */
export function toRate(value: unknown): Rate | null {
  if (typeof value === 'string') {
    const m = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(value)
    if (m) {
      const num = Number(m[1])
      const den = Number(m[2])
      if (!num || !den || num / den > 1000) return null
      const g = gcd(num, den)
      return { num: num / g, den: den / g }
    }
    if (!/^\s*\d+(\.\d+)?\s*$/.test(value)) return null
    value = Number(value)
  }
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 1000) return null
  for (const [fps, num] of NTSC) if (Math.abs(value - fps) < 0.01) return { num, den: 1001 }
  if (Math.abs(value - Math.round(value)) < 0.01) return { num: Math.round(value), den: 1 }
  // an odd rate: kept to a thousandth
  const num = Math.round(value * 1000)
  const g = gcd(num, 1000)
  return { num: num / g, den: 1000 / g }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

export const rateString = (r: Rate) => (r.den === 1 ? String(r.num) : `${r.num}/${r.den}`)
export const rateValue = (r: Rate) => r.num / r.den
export const sameRate = (a: Rate, b: Rate) => a.num * b.den === b.num * a.den
/** frames per timecode second: 30 for 29.97 */
export const nominal = (r: Rate) => Math.round(r.num / r.den)
/** drop-frame counting exists for 29.97 and 59.94 only */
export const canDrop = (r: Rate) => r.den === 1001 && (r.num === 30000 || r.num === 60000)

export interface TimecodeBase {
  rate: Rate
  dropFrame: boolean
  /** frame count of the asset's first frame (its start timecode) */
  start: number
}

const TC = /^(\d{2}):([0-5]\d):([0-5]\d)([:;.,])(\d{2,3})$/

/** `01:00:00:00` (or `;` for drop-frame) → frames since midnight; null when malformed or impossible at this rate */
export function parseTimecode(text: string, rate: Rate, dropFrame?: boolean): number | null {
  const m = TC.exec(text.trim())
  if (!m) return null
  const fps = nominal(rate)
  const [h, min, s, f] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[5])]
  if (f >= fps) return null
  const drop = dropFrame ?? ((m[4] === ';' || m[4] === ',') && canDrop(rate))
  let frames = ((h * 60 + min) * 60 + s) * fps + f
  if (drop && canDrop(rate)) {
    const dropped = fps / 15 // 2 at 29.97, 4 at 59.94
    if (s === 0 && min % 10 !== 0 && f < dropped) return null // these labels do not exist
    const minutes = h * 60 + min
    frames -= dropped * (minutes - Math.floor(minutes / 10))
  }
  return frames
}

/** frames since midnight → `HH:MM:SS:FF` (`HH:MM:SS;FF` drop-frame); wraps at 24 hours */
export function formatTimecode(frames: number, rate: Rate, dropFrame: boolean): string {
  const fps = nominal(rate)
  const drop = dropFrame && canDrop(rate)
  const perDay = drop ? Math.round(rateValue(rate) * 86400) : fps * 86400
  let n = ((Math.round(frames) % perDay) + perDay) % perDay
  if (drop) {
    const dropped = fps / 15
    const per10 = fps * 600 - dropped * 9
    const perMinute = fps * 60 - dropped
    const tens = Math.floor(n / per10)
    const rest = n % per10
    n += dropped * 9 * tens + (rest > dropped ? dropped * Math.floor((rest - dropped) / perMinute) : 0)
  }
  const f = n % fps
  const s = Math.floor(n / fps) % 60
  const m = Math.floor(n / (fps * 60)) % 60
  const h = Math.floor(n / (fps * 3600))
  const p = (v: number) => String(v).padStart(2, '0')
  return `${p(h)}:${p(m)}:${p(s)}${drop ? ';' : ':'}${p(f)}`
}

/** the timecode base of an asset: its rate, whether it counts drop-frame, and its start timecode in frames */
export function timecodeBase(rate: Rate, startTimecode: unknown): TimecodeBase {
  const text = typeof startTimecode === 'string' ? startTimecode.trim() : ''
  const m = TC.exec(text)
  // a 29.97 asset without a start timecode counts drop-frame, as cameras and NLEs do by default
  const dropFrame = canDrop(rate) && (m ? m[4] === ';' || m[4] === ',' : true)
  const start = m ? (parseTimecode(text, rate, dropFrame) ?? 0) : 0
  return { rate, dropFrame, start }
}

/** a frame offset on the asset's timeline → its timecode label */
export const tcOf = (base: TimecodeBase, frame: number) => formatTimecode(base.start + frame, base.rate, base.dropFrame)

/** a timecode label in the asset's start timecode → its frame offset (may be negative: before the start) */
export function frameOf(base: TimecodeBase, text: string): number | null {
  const abs = parseTimecode(text, base.rate, TC.exec(text.trim())?.[4] === ':' ? false : base.dropFrame)
  return abs === null ? null : abs - base.start
}

/** frames → seconds as an exact rational string for FCPXML: `1001/30000s`, `3s` */
export function rationalSeconds(frames: number, rate: Rate): string {
  const num = frames * rate.den
  const den = rate.num
  if (num === 0) return '0s'
  const g = gcd(Math.abs(num), den)
  return den / g === 1 ? `${num / g}s` : `${num / g}/${den / g}s`
}

/** `1001/30000s`, `3s`, `3.5s` → seconds */
export function parseRationalSeconds(text: string | undefined): number | null {
  if (!text) return null
  const m = /^(-?\d+(?:\.\d+)?)(?:\/(\d+))?s$/.exec(text.trim())
  if (!m) return null
  return Number(m[1]) / (m[2] ? Number(m[2]) : 1)
}
