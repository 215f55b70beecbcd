import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const SCRIPT = fileURLToPath(new URL('../../../test/fixtures/start-rgw.sh', import.meta.url))
/** mon mkfs, OSD mkfs and RGW's first answer take 10-20 s on a quiet machine; a loaded CI runner gets more */
const START_TIMEOUT_MS = 150_000
/** the script's own stop waits at most 8 s for its daemons; then the whole group gets SIGKILL */
const STOP_TIMEOUT_MS = 10_000
const ATTEMPTS = 3

export interface Rgw {
  endpoint: string
  accessKeyId: string
  secretAccessKey: string
  stop(): Promise<void>
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** signal the whole process group (the script and every daemon it started); gone already is fine */
const signalGroup = (child: ChildProcess, signal: NodeJS.Signals) => {
  try {
    process.kill(-child.pid!, signal)
  } catch {
    // ESRCH: nothing left in the group
  }
}

const within = (promise: Promise<unknown>, ms: number) => {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([promise.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]).finally(() => clearTimeout(timer))
}

/**
 * Stops the script and its daemons: SIGTERM to the script (it stops radosgw, then the OSD and the
 * monitor, in that order, with bounded waits, and exits), then SIGKILL to whatever is left of the
 * group. Never takes more than ~12 s.
 */
async function stopGroup(child: ChildProcess): Promise<void> {
  const gone = exited(child) ? Promise.resolve() : once(child, 'exit')
  if (!exited(child)) child.kill('SIGTERM')
  if (!(await within(gone, STOP_TIMEOUT_MS))) signalGroup(child, 'SIGKILL')
  // the script may have exited before a daemon it was told to stop: make sure the group is empty
  signalGroup(child, 'SIGKILL')
  await within(gone, 2_000)
}

/** One start: resolves with the endpoint line once RGW answers, or rejects with the script's reason. */
async function startOnce(dir: string, rgwPort: number, monPort: number): Promise<{ child: ChildProcess; line: string }> {
  // detached: the script leads a process group of its own that holds every daemon, so one kill
  // reaches them all, and tap's or the terminal's signals do not reach them by accident
  const child = spawn('bash', [SCRIPT, dir, String(rgwPort), String(monPort)], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)))
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS)
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        stdout += d
        if (stdout.includes('\n')) {
          clearTimeout(timer)
          resolve(stdout.split('\n')[0].trim())
        }
      })
      child.on('error', (err) => {
        clearTimeout(timer)
        reject(err)
      })
      child.on('exit', (code, signal) => {
        clearTimeout(timer)
        // give the stderr pipe a moment to deliver the script's last words
        setTimeout(() => reject(new Error(`start-rgw.sh exited (${signal ?? code}): ${stderr.trim()}`)), 50)
      })
    })
    // the supervisor keeps running; its pipes must not keep the test process alive on their own
    child.stdout!.destroy()
    child.stderr!.destroy()
    child.unref()
    return { child, line }
  } catch (err) {
    await stopGroup(child)
    throw err
  }
}

/**
 * A real single-node Ceph RGW (mon, one memstore OSD, radosgw) in a temp dir on free ports, or the
 * reason it is not there (a string: the caller skips with it): the Debian packages (radosgw,
 * ceph-mon, ceph-osd) are not installed, or it did not start in three attempts.
 */
export async function startRgw(): Promise<Rgw | string> {
  try {
    await run('sh', ['-c', 'command -v radosgw && command -v ceph-mon && command -v ceph-osd'])
  } catch {
    return 'radosgw, ceph-mon or ceph-osd is not installed (apt-get install --no-install-recommends radosgw ceph-mon ceph-osd)'
  }
  const errors: string[] = []
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-rgw-'))
    // the script refuses ports in use; a new random pair per attempt
    const rgwPort = 20000 + Math.floor(Math.random() * 20000)
    try {
      const { child, line } = await startOnce(path.join(dir, 'c'), rgwPort, rgwPort + 1)
      const [endpoint, accessKeyId, secretAccessKey] = line.split(/\s+/)
      let stopping: Promise<void> | undefined
      return {
        endpoint,
        accessKeyId,
        secretAccessKey,
        stop() {
          stopping ??= stopGroup(child).finally(() => rm(dir, { recursive: true, force: true }))
          return stopping
        },
      }
    } catch (err) {
      errors.push(`attempt ${attempt + 1}: ${(err as Error).message}`)
      await rm(dir, { recursive: true, force: true })
    }
  }
  return `Ceph RGW did not start: ${errors.join('; ')}`
}
