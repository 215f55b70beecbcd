import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { request } from '../../core/testing/index.js'
export { waitFor } from '../../core/testing/index.js'

/**
 * A real `mamkit serve` in a child process, for the fault tests of SECURITY.md (SIGKILL and
 * restart on the same data dir and database).
 */

const CLI = fileURLToPath(new URL('../../host/cli.js', import.meta.url))
export const ADMIN_PASSWORD = 'admin-password-123'

export interface ServerProcess {
  child: ChildProcess
  url: string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  output(): string
}

const children = new Set<ChildProcess>()
// even when the run times out and no teardown runs
process.on('exit', () => children.forEach((c) => c.exitCode === null && c.signalCode === null && c.kill('SIGKILL')))

/** `mamkit serve` on a free port with short leases; resolves once it logged that it listens */
export async function serveProcess(dataDir: string, databaseUrl?: string, extraArgs: string[] = [], extraEnv: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('MAMKIT_')) env[k] = v
  Object.assign(env, { MAMKIT_JOB_LEASE_MS: '1500', MAMKIT_JOB_POLL_MS: '200', MAMKIT_ADMIN_PASSWORD: ADMIN_PASSWORD, MAMKIT_LOG_LEVEL: 'info' }, extraEnv)
  const args = [CLI, 'serve', '--port', '0', '--data-dir', dataDir, ...(databaseUrl ? ['--database-url', databaseUrl] : []), ...extraArgs]
  const child = spawn(process.execPath, args, { cwd: dataDir, env, stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(child)
  let output = ''
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  const startup = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const url = await new Promise<string>((resolve, reject) => {
    let pending = ''
    child.stderr!.on('data', (d) => (output += d))
    child.stdout!.on('data', (d) => {
      output += d
      pending += d
      const parts = pending.split('\n')
      pending = parts.pop()!
      for (const line of parts) {
        try {
          const entry = JSON.parse(line)
          if (typeof entry.url === 'string' && /listening/.test(entry.msg)) resolve(entry.url)
        } catch {
          // not a log line
        }
      }
    })
    void exited.then(({ code, signal }) => reject(new Error(`mamkit serve ended (${code ?? signal}) before listening:\n${output}`)))
  })
  clearTimeout(startup)
  return { child, url, exited, output: () => output }
}

export async function killAll(): Promise<void> {
  const running = [...children].filter((c) => c.exitCode === null && c.signalCode === null)
  await Promise.all(running.map((c) => new Promise((resolve) => c.once('exit', resolve).kill('SIGKILL'))))
}

export async function login(url: string): Promise<string> {
  const reply = await request(url, 'POST', '/session', { json: { login: 'admin', password: ADMIN_PASSWORD } })
  if (reply.status !== 200) throw new Error(`login failed: ${reply.status} ${reply.text}`)
  return reply.body.authentication_token
}
