import { readdir, mkdtemp, rm } from 'node:fs/promises'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { createHttpServer, createMamServer } from '../../host/index.js'
import { createApiKey, createUser } from '../../core/auth/accounts.js'
import type { EntityManager } from '../../core/db/orm.js'
import { databaseKinds, scratchDatabase } from '../../core/testing/index.js'
import { echoPlugin } from '../fixtures/echo-plugin.js'

const TIMEOUTS = { headersTimeoutMs: 400, requestTimeoutMs: 600, keepAliveTimeoutMs: 1500 }
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** a raw connection: what the server sent so far, and when it closed */
function connect(port: number) {
  const socket = net.connect(port, '127.0.0.1')
  const state = { received: '', closedAt: 0 }
  socket.on('data', (d) => (state.received += d))
  socket.on('error', () => {})
  socket.on('close', () => (state.closedAt = Date.now()))
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  return { socket, state, closed, ready: new Promise((resolve) => socket.once('connect', resolve)) }
}

const within = (ms: number, work: Promise<unknown>) => Promise.race([work.then(() => true), sleep(ms).then(() => false)])

// transport behaviour, run on each database all the same: it is the server the CLI runs (createHttpServer)
for (const db of databaseKinds()) {
  t.test(`timeouts: headers, bodies, uploads that move and uploads that stall, keep-alive (issue 18 item 14) [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-timeouts-'))
    const scratch = await scratchDatabase(db)
    const mam = createMamServer({ config: { dataDir, databaseUrl: scratch.databaseUrl, logLevel: 'silent', http: TIMEOUTS }, extraPlugins: [echoPlugin], runJobs: false })
    const runtime = await mam.start()
    const server = createHttpServer(mam.handler, runtime.config.http)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as net.AddressInfo).port
    t.teardown(async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
      await mam.close()
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const em = runtime.container.resolve<EntityManager>('em').fork()
    const { secret: token } = await createApiKey(em, await createUser(em, { username: 'timer', password: 'a-long-password' }), 'test')
    const uploads = path.join(dataDir, 'tmp', 'uploads')
    const uploadsLeft = async () => (await readdir(uploads).catch(() => [])).length

    t.equal(server.headersTimeout, 400)
    t.equal(server.keepAliveTimeout, 1500)
    t.equal(server.requestTimeout, 0, "Node's own request timeout is off (it would cut uploads)")

    // headers that never end
    const slowHeaders = connect(port)
    await slowHeaders.ready
    slowHeaders.socket.write('GET /api/v1/version HTTP/1.1\r\nHost: x\r\n')
    t.ok(await within(3000, slowHeaders.closed), 'a client that never finishes its headers is cut off')
    t.match(slowHeaders.state.received, /^HTTP\/1\.1 408/)

    // a JSON body that stops half-way: 408 with a problem body, connection closed
    const slowBody = connect(port)
    await slowBody.ready
    const started = Date.now()
    slowBody.socket.write(`POST /api/v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"thing": `)
    t.ok(await within(4000, slowBody.closed), 'the connection is closed')
    const elapsed = slowBody.state.closedAt - started
    t.ok(elapsed >= 550, `not before the request timeout (${elapsed} ms)`)
    t.match(slowBody.state.received, /^HTTP\/1\.1 408 /)
    t.match(slowBody.state.received, /application\/problem\+json/)
    t.match(slowBody.state.received, /"code":"request_timeout"/)
    t.match(slowBody.state.received, /did not arrive within 0\.6 s/)

    // an error answered before the body was read (no such route): the rest of the body is not waited for
    const unread = connect(port)
    await unread.ready
    unread.socket.write(`POST /api/v1/no/such/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a": `)
    t.ok(await within(400, unread.closed), 'answered and closed at once, before any timeout')
    t.match(unread.state.received, /^HTTP\/1\.1 404 /)
    t.match(unread.state.received, /Connection: close/i)

    // an upload that takes longer than the request timeout but keeps moving
    const boundary = 'timeout-boundary'
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`
    const tail = `\r\n--${boundary}--\r\n`
    const chunks = 8
    const length = Buffer.byteLength(head) + chunks * 100 + Buffer.byteLength(tail)
    const moving = connect(port)
    await moving.ready
    moving.socket.write(`POST /api/v1/echo/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n${head}`)
    const movingStarted = Date.now()
    for (let i = 0; i < chunks; i++) {
      await sleep(200)
      moving.socket.write('x'.repeat(100))
    }
    moving.socket.write(tail)
    await within(4000, moving.closed)
    t.ok(Date.now() - movingStarted > 1500, 'the upload took longer than the request timeout')
    t.match(moving.state.received, /^HTTP\/1\.1 200 /, 'and was taken')
    t.match(moving.state.received, /"size":800/)

    // an upload that stalls: 408, and its temp file is removed
    const stalled = connect(port)
    await stalled.ready
    stalled.socket.write(`POST /api/v1/echo/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${length}\r\n\r\n${head}${'x'.repeat(100)}`)
    t.ok(await within(4000, stalled.closed), 'a stalled upload is cut off')
    t.match(stalled.state.received, /^HTTP\/1\.1 408 /)
    t.match(stalled.state.received, /upload stalled/)
    t.equal(await uploadsLeft(), 0, 'its temp file is gone')

    // keep-alive: an idle connection outlives the header timeout, and closes after keepAliveTimeout
    const idle = connect(port)
    await idle.ready
    const get = `GET /api/v1/version HTTP/1.1\r\nHost: x\r\n\r\n`
    idle.socket.write(get)
    await sleep(800)
    t.match(idle.state.received, /^HTTP\/1\.1 200 /)
    t.equal(idle.state.closedAt, 0, 'idle past the header timeout: still open')
    idle.state.received = ''
    idle.socket.write(get)
    await sleep(300)
    t.match(idle.state.received, /^HTTP\/1\.1 200 /, 'and serves the next request')
    const idleFrom = Date.now()
    t.ok(await within(4000, idle.closed), 'closed once idle for keepAliveTimeout')
    t.ok(idle.state.closedAt - idleFrom >= 1200, `after ${idle.state.closedAt - idleFrom} ms`)
  })
}
