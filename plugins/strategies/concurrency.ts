import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Runs `fn` on every item, at most `limit` at once, in order of the items. The first error stops
 * new items from starting; the ones running are waited for (nothing of theirs is left in flight)
 * and then the error is thrown.
 */
export async function eachLimit<T>(items: Iterable<T>, limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  const list = [...items]
  let next = 0
  let failure: { error: unknown } | null = null
  const worker = async () => {
    while (!failure && next < list.length) {
      const i = next++
      try {
        await fn(list[i], i)
      } catch (error) {
        failure ??= { error }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, list.length) }, worker))
  if (failure) throw (failure as { error: unknown }).error
}

/** an error a target marks as passing (S3 5xx, throttling, a reset connection): worth another try */
export const isTransient = (err: unknown): boolean => (err as { transient?: boolean })?.transient === true

export interface RetryOptions {
  signal?: AbortSignal
  /** tries in all, the first included */
  attempts?: number
  /** the wait before the second try; doubled each time, with jitter, up to `maxDelayMs` */
  delayMs?: number
  maxDelayMs?: number
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void
}

/** how a job retries a transient target error before it fails the file: about 0.5 + 1 + 2 + 4 + 8 s */
export const TARGET_RETRY = { attempts: 6, delayMs: 500, maxDelayMs: 8_000 }

/**
 * `fn` again after a bounded backoff while it fails with a transient error (the SDK has retried the
 * request itself a few times by then: this covers an outage of seconds, a restarting gateway). Any
 * other error, the last attempt's error, or an abort ends it at once.
 */
export async function retryTransient<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const { signal, attempts = TARGET_RETRY.attempts, delayMs = TARGET_RETRY.delayMs, maxDelayMs = TARGET_RETRY.maxDelayMs } = options
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      if (!isTransient(err) || attempt >= attempts || signal?.aborted) throw err
      const wait = Math.min(maxDelayMs, delayMs * 2 ** (attempt - 1)) * (0.75 + Math.random() * 0.5)
      options.onRetry?.(err, attempt, wait)
      await sleep(wait, undefined, { signal })
    }
  }
}
