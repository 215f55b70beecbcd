import type { TestServer } from './server.js'

/**
 * Waiting in tests: one poller, one job waiter, one "no jobs left" waiter, all with the same
 * default timeout. It is generous on purpose: test machines are busy and nothing here measures
 * time (speed belongs in bench/). Change it for a run with MAMKIT_TEST_TIMEOUT_MS, or in code
 * with `testTimeouts.waitMs = …`; every call also takes its own `timeoutMs`.
 */
export const testTimeouts = {
  waitMs: Number(process.env.MAMKIT_TEST_TIMEOUT_MS) > 0 ? Number(process.env.MAMKIT_TEST_TIMEOUT_MS) : 120_000,
  pollMs: 50,
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** polls `check` until it returns something truthy, and returns that; throws naming `what` on timeout */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = testTimeouts.waitMs): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(testTimeouts.pollMs)
  }
}

export interface WaitForJobOptions {
  /** the status route to poll: /status (the default) shows jobs of every kind, /asset_status and /copy_to_status only theirs */
  route?: string
  timeoutMs?: number
}

/**
 * Polls the job's status route as `token` until the job has ended (finished, failed or
 * cancelled) and returns the job as that route shows it. Going through HTTP checks that the
 * caller may see the job, as a client would.
 */
export async function waitForJob(s: TestServer, token: string, id: number, options: WaitForJobOptions = {}): Promise<any> {
  const route = options.route ?? '/status'
  let last: { status: number; state?: string } = { status: 0 }
  try {
    return await waitFor(
      `job ${id}`,
      async () => {
        const reply = await s.request('GET', `${route}/${id}`, { token })
        last = { status: reply.status, state: reply.body?.job?.state }
        return ['finished', 'failed', 'cancelled'].includes(reply.body?.job?.state) ? reply.body.job : undefined
      },
      options.timeoutMs,
    )
  } catch (err) {
    throw new Error(`job ${id} still ${last.state ?? `answered ${last.status} on ${route}`}: ${(err as Error).message}`)
  }
}

/**
 * Waits until no job of the given types (any type when omitted) is running or queued to run within a
 * minute (retries in backoff included). Jobs queued for later than that (recurring housekeeping such
 * as the download expiry) are not waited for: they would keep a test waiting until their time.
 */
export async function waitForJobs(s: TestServer, options: { types?: string[]; timeoutMs?: number } = {}): Promise<void> {
  let pending = 0
  await waitFor(
    `jobs to end${options.types ? ` (${options.types.join(', ')})` : ''}`,
    async () => {
      const q = s.runtime.db
        .knex('jobs')
        .where((w) => w.where('state', 'running').orWhere((queued) => queued.where('state', 'queued').where('run_at', '<=', new Date(Date.now() + 60_000))))
      if (options.types) q.whereIn('type', options.types)
      const [{ n }] = await q.count({ n: '*' })
      pending = Number(n)
      return pending === 0
    },
    options.timeoutMs,
  ).catch((err: Error) => {
    throw new Error(`${pending} jobs still pending: ${err.message}`)
  })
}
