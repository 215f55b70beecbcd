/**
 * "Shutdown always ends" (issue 19), with real `mamkit serve` processes: a server whose parent went
 * away (its stdout and stderr pipes closed) still stops on SIGTERM, and a job that ignores its abort
 * signal cannot hold a shutdown past its deadline.
 */
import t from 'tap'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from '../../core/testing/index.js'
import { killAll, login, serveProcess, waitFor } from '../helpers/process.js'

const PLUGIN = fileURLToPath(new URL('../fixtures/jobs-plugin.js', import.meta.url))

/** how the process ended, or 'still running' after `ms` */
const endedWithin = (exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>, ms: number) =>
  Promise.race([exited, new Promise<'still running'>((r) => setTimeout(() => r('still running'), ms))])

t.teardown(killAll)

t.test('a server whose log pipes broke still ends on SIGTERM', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-shutdown-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  // without tap's NODE_OPTIONS hooks, which write to the broken pipes themselves
  const server = await serveProcess(dataDir, undefined, ['--plugin', PLUGIN], { NODE_OPTIONS: '' })
  const token = await login(server.url)
  // the parent stops reading: every later log line meets a closed pipe (EPIPE)
  server.child.stdout!.destroy()
  server.child.stderr!.destroy()
  // work that logs after the pipes broke
  for (let i = 0; i < 5; i++) t.equal((await request(server.url, 'POST', '/jobs_test/quick', { token, json: { value: String(i) } })).status, 200)
  t.equal((await request(server.url, 'GET', '/templates', { token })).status, 200, 'requests are still served')
  server.child.kill('SIGTERM')
  t.same(await endedWithin(server.exited, 20_000), { code: 0, signal: null }, 'exits 0 instead of retrying the log write forever')
})

t.test('a job that ignores its abort signal cannot hold the shutdown past its deadline', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-shutdown-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const marker = path.join(dataDir, 'marker')
  const server = await serveProcess(dataDir, undefined, ['--plugin', PLUGIN], { MAMKIT_SHUTDOWN_TIMEOUT_MS: '1500' })
  const token = await login(server.url)
  t.equal((await request(server.url, 'POST', '/jobs_test/stubborn', { token, json: { ms: 10_000, marker } })).status, 200)
  await waitFor('the job to start', async () => (await readFile(marker, 'utf8').catch(() => '')).includes('start'))
  const sent = Date.now()
  server.child.kill('SIGTERM')
  t.same(await endedWithin(server.exited, 8_000), { code: 1, signal: null }, 'exits non-zero at the deadline')
  t.ok(Date.now() - sent < 8_000, 'well before the job would have ended')
  t.match(server.output(), /shutdown took longer than 1500 ms; still open: running jobs/, 'the last line says what was still open')
})
