/**
 * A flag a worker-thread task reads between two reads or writes (`Atomics.load(flag, 0) === 1`: stop),
 * set when `signal` aborts. For tasks that must not be ended from outside (their thread terminated
 * while the caller closes the descriptors they use, `runWorker(…, { cooperative: true })`): they stop
 * themselves and settle once no I/O of theirs is in flight. One flag, and one listener, per signal,
 * whatever the number of tasks that watch it.
 */
export function stopFlagOf(signal: AbortSignal): Int32Array {
  let flag = flags.get(signal)
  if (flag) return flag
  flag = new Int32Array(new SharedArrayBuffer(4))
  const set = flag
  if (signal.aborted) Atomics.store(set, 0, 1)
  else signal.addEventListener('abort', () => Atomics.store(set, 0, 1), { once: true })
  flags.set(signal, set)
  return set
}

const flags = new WeakMap<AbortSignal, Int32Array>()
