import { MamError } from '../errors.js'

interface Failures {
  count: number
  /** no attempt is heard before this time (ms) */
  blockedUntil: number
  lastAt: number
}

const FREE_ATTEMPTS = 5
const WINDOW_MS = 15 * 60_000
const MAX_DELAY_MS = 15 * 60_000

/**
 * Slows down password guessing: after a few failures for one username, or from one address, each
 * further attempt must wait twice as long as the last (429 with Retry-After). In memory, per
 * process: enough against online guessing through one server, and it forgets after a quiet window.
 */
export class LoginThrottle {
  private readonly failures = new Map<string, Failures>()

  /** throws 429 while `keys` (e.g. `user:alice`, `ip:10.0.0.1`) are blocked */
  check(keys: string[], now = Date.now()): void {
    let wait = 0
    for (const key of keys) {
      const f = this.current(key, now)
      if (f && f.blockedUntil > now) wait = Math.max(wait, f.blockedUntil - now)
    }
    if (wait > 0) {
      const seconds = Math.ceil(wait / 1000)
      throw new MamError('rate_limited', `Too many failed logins; try again in ${seconds} s`, { headers: { 'Retry-After': String(seconds) } })
    }
  }

  fail(keys: string[], now = Date.now()): void {
    for (const key of keys) {
      const f = this.current(key, now) ?? { count: 0, blockedUntil: 0, lastAt: now }
      f.count++
      f.lastAt = now
      if (f.count >= FREE_ATTEMPTS) f.blockedUntil = now + Math.min(1000 * 2 ** (f.count - FREE_ATTEMPTS), MAX_DELAY_MS)
      this.failures.set(key, f)
    }
    if (this.failures.size > 100_000) this.prune(now)
  }

  succeed(keys: string[]): void {
    for (const key of keys) this.failures.delete(key)
  }

  private current(key: string, now: number): Failures | undefined {
    const f = this.failures.get(key)
    if (f && now - f.lastAt > WINDOW_MS && f.blockedUntil <= now) {
      this.failures.delete(key)
      return undefined
    }
    return f
  }

  private prune(now: number) {
    for (const key of [...this.failures.keys()]) this.current(key, now)
  }
}
