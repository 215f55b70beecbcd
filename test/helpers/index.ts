import t from 'tap'
import { databaseKinds, startTestServer, type TestServer, type TestServerOptions } from './server.js'

export * from './server.js'

type Tap = typeof t
/** the assertions a top-level test and its subtests share */
export type Asserts = Pick<Tap, 'equal' | 'match' | 'type' | 'same' | 'ok'>

/**
 * Runs `fn` once per database (SQLite, and PostgreSQL when configured), each against its own
 * server, data dir and database, closed when the subtest ends.
 */
export function onEachDatabase(tap: Tap, name: string, fn: (t: Tap, server: TestServer) => Promise<void>, options: Omit<TestServerOptions, 'db'> = {}) {
  for (const db of databaseKinds()) {
    tap.test(`${name} [${db}]`, async (sub) => {
      const server = await startTestServer({ ...options, db })
      sub.teardown(() => server.close())
      await fn(sub as unknown as Tap, server)
    })
  }
}

/** asserts an RFC 9457 problem body with the given status, and, when given, the offending parameters */
export function assertProblem(tap: Asserts, reply: { status: number; headers: Headers; body: any }, status: number, params?: string[]) {
  tap.equal(reply.status, status, `status ${status}`)
  tap.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/, 'problem content type')
  tap.equal(reply.body?.status, status, 'problem status')
  tap.type(reply.body?.detail, 'string', 'problem detail')
  tap.type(reply.body?.request_id, 'string', 'problem request id')
  if (params) tap.same((reply.body.errors ?? []).map((e: { param: string }) => e.param).sort(), [...params].sort(), `offending parameters: ${params.join(', ')}`)
}
