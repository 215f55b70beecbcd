import { execFile, execFileSync } from 'node:child_process'
import { chown, mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir, userInfo } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { existsSync } from 'node:fs'

const run = promisify(execFile)

/**
 * A private PostgreSQL cluster for fault tests that stop and start the database (issue 19): its own
 * data dir in a temp folder and its own loopback port, never the shared server. Debian's initdb and
 * pg_ctl; PostgreSQL refuses to run as root, so as root it runs as the `postgres` OS user.
 */
export interface PgCluster {
  url: string
  port: number
  stop(): Promise<void>
  start(): Promise<void>
  /** stops it and removes its files */
  destroy(): Promise<void>
}

/** clusters still running when the test process ends (a timed-out run skips its teardown) */
const running = new Set<() => void>()
process.on('exit', () => running.forEach((stop) => stop()))

const BIN = process.env.MAMKIT_PG_BIN ?? '/usr/lib/postgresql/15/bin'

/** why a private cluster cannot be made here, or undefined when it can */
export function clusterUnavailable(): string | undefined {
  if (!existsSync(path.join(BIN, 'initdb'))) return `no initdb in ${BIN} (set MAMKIT_PG_BIN)`
  return undefined
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

export async function startCluster(): Promise<PgCluster> {
  const root = await mkdtemp(path.join(tmpdir(), 'mamkit-pgcluster-'))
  const data = path.join(root, 'data')
  const asRoot = userInfo().uid === 0
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres'])
    const { stdout: gid } = await run('id', ['-g', 'postgres'])
    await chown(root, Number(stdout.trim()), Number(gid.trim()))
  }
  const pg = (tool: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', path.join(BIN, tool), ...args]) : run(path.join(BIN, tool), args))
  await pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
  const port = await freePort()
  const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`
  const ctl = (...args: string[]) => pg('pg_ctl', ['-D', data, '-w', '-t', '60', ...args])
  const start = async () => void (await ctl('-o', options, '-l', path.join(root, 'log'), 'start'))
  // fast: active sessions are ended (57P01 admin_shutdown), as in a restart for an upgrade
  const stop = async () => void (await ctl('-m', 'fast', 'stop'))
  await start()
  const stopNow = () => {
    try {
      const args = ['-D', data, '-m', 'immediate', 'stop']
      if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', path.join(BIN, 'pg_ctl'), ...args], { stdio: 'ignore' })
      else execFileSync(path.join(BIN, 'pg_ctl'), args, { stdio: 'ignore' })
    } catch {
      // stopped already
    }
  }
  running.add(stopNow)
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop,
    async destroy() {
      await stop().catch(() => {})
      running.delete(stopNow)
      await rm(root, { recursive: true, force: true })
    },
  }
}
