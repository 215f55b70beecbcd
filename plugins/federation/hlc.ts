/**
 * Hybrid logical clock (Kulkarni et al., Buffalo TR 2014-04), used ONLY to rank values that are truly
 * concurrent; causality is decided by the dots of the record kernel, never by a clock
 * (FEDERATION.md §2.4–2.5). A stamp is 48 bits of milliseconds and a 16-bit counter as 16 hex
 * characters, so stamps compare as strings.
 */
export const HLC_PATTERN = /^[0-9a-f]{16}$/
const MAX_MS = 2 ** 48 - 1
const MAX_COUNTER = 0xffff

export interface HlcOptions {
  /** the physical clock; tests skew a whole site through it */
  now?: () => number
  /** a received stamp moves this clock forward at most this far beyond the physical clock */
  maxDriftMs?: number
}

export function encodeHlc(ms: number, counter: number): string {
  return Math.min(ms, MAX_MS).toString(16).padStart(12, '0') + counter.toString(16).padStart(4, '0')
}

export function decodeHlc(stamp: string): { ms: number; counter: number } {
  return { ms: parseInt(stamp.slice(0, 12), 16), counter: parseInt(stamp.slice(12), 16) }
}

export class Hlc {
  private ms = 0
  private counter = 0
  private readonly now: () => number
  readonly maxDriftMs: number

  constructor(options: HlcOptions = {}) {
    this.now = options.now ?? Date.now
    this.maxDriftMs = options.maxDriftMs ?? 5 * 60_000
  }

  /** a stamp for a local write: never below the last one, even when the physical clock jumps back */
  tick(): string {
    const physical = Math.max(0, Math.floor(this.now()))
    if (physical > this.ms) {
      this.ms = physical
      this.counter = 0
    } else if (this.counter >= MAX_COUNTER) {
      // counter overflow borrows a millisecond: still monotonic
      this.ms += 1
      this.counter = 0
    } else {
      this.counter += 1
    }
    return encodeHlc(this.ms, this.counter)
  }

  /**
   * Observes a peer's stamp: the clock moves up to it, but never further than `maxDriftMs` ahead of
   * the physical clock, so one site with a fast clock cannot drag every site forward (HLC poisoning).
   * Returns the observed offset (peer − physical) in ms, for GET /sites.
   */
  recv(stamp: string): number {
    if (!HLC_PATTERN.test(stamp)) return 0
    const physical = Math.floor(this.now())
    const seen = decodeHlc(stamp)
    const capped = Math.min(seen.ms, physical + this.maxDriftMs)
    if (capped > this.ms) {
      this.ms = capped
      this.counter = capped === seen.ms ? seen.counter : 0
    } else if (capped === this.ms && capped === seen.ms && seen.counter > this.counter) {
      this.counter = seen.counter
    }
    return seen.ms - physical
  }

  /** at boot: continue after the highest own stamp stored, so a restart never reissues a stamp */
  restore(stamp: string | undefined): void {
    if (!stamp || !HLC_PATTERN.test(stamp)) return
    const seen = decodeHlc(stamp)
    if (seen.ms > this.ms || (seen.ms === this.ms && seen.counter > this.counter)) {
      this.ms = seen.ms
      this.counter = seen.counter
    }
  }

  peek(): string {
    return encodeHlc(this.ms, this.counter)
  }
}
