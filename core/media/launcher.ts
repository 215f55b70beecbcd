import { fork, type ChildProcess } from 'node:child_process'

export interface LaunchResult {
  stdout: string
  stderr: string
}

/** whether the helper (its process handle and its IPC channel) keeps the server's event loop alive */
function holdOpen(child: ChildProcess, hold: boolean) {
  if (hold) {
    child.ref()
    child.channel?.ref()
  } else {
    child.unref()
    child.channel?.unref()
  }
}

interface Pending {
  resolve(result: LaunchResult): void
  reject(err: Error): void
  /** the helper the request went to */
  child: ChildProcess
  timer: NodeJS.Timeout
}

/** how long past a program's own timeout the server waits for the helper's answer */
const ANSWER_GRACE_MS = 5_000

/**
 * Runs short-lived programs (ffprobe, once per file during an ingest) from a small helper process.
 * fork() from the server itself cost 5-6 ms of its main thread per program, and afterwards every page
 * of its heap took a copy-on-write fault: during an ingest of small clips the main thread spent more
 * time on that than on the database. The helper is started on first use and restarted if it dies;
 * arguments are an array, never a shell.
 */
export class Launcher {
  private child?: ChildProcess
  /** resolved once the helper listens: a message sent before that is lost (an ES module child evaluates asynchronously) */
  private ready?: Promise<void>
  private nextId = 1
  private readonly pending = new Map<number, Pending>()

  run(file: string, args: string[], options: { timeoutMs?: number; maxBuffer?: number } = {}): Promise<LaunchResult> {
    const child = this.helper()
    const ready = this.ready!
    const id = this.nextId++
    const timeoutMs = options.timeoutMs ?? 60_000
    return new Promise<LaunchResult>((resolve, reject) => {
      // the helper kills a program that overruns; this catches a helper that never answers at all
      const timer = setTimeout(() => {
        this.settle(id, Object.assign(new Error(`the launcher process did not answer within ${timeoutMs + ANSWER_GRACE_MS} ms`), { launcher: true }))
        // SIGKILL: a helper that does not answer may not act on a SIGTERM either (a stopped process keeps it pending)
        child.kill('SIGKILL')
        if (this.child === child) this.child = undefined
      }, timeoutMs + ANSWER_GRACE_MS)
      timer.unref()
      this.pending.set(id, { resolve, reject, child, timer })
      holdOpen(child, true)
      void ready.then(() =>
        child.send({ id, file, args, timeoutMs, maxBuffer: options.maxBuffer ?? 16 << 20 }, (err) => {
          if (err) this.settle(id, Object.assign(err, { launcher: true }))
        }),
      )
    })
  }

  private helper(): ChildProcess {
    if (this.child?.connected) return this.child
    const child = fork(new URL('./launcher-process.js', import.meta.url), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: ['--max-old-space-size=64'] })
    let listening: () => void
    this.ready = new Promise<void>((resolve) => (listening = resolve))
    child.on('message', (msg: { ready?: true; id: number; stdout: string; stderr: string; error: { message: string; code: string | null } | null }) => {
      if (msg.ready) return listening()
      this.settle(msg.id, msg.error ? Object.assign(new Error(msg.error.message), { code: msg.error.code, stderr: msg.stderr }) : null, { stdout: msg.stdout, stderr: msg.stderr })
    })
    // a dead helper fails what it held; the next call starts a new one
    child.on('exit', () => {
      if (this.child === child) this.child = undefined
      listening() // requests still waiting to be sent fail on the closed channel
      for (const [id, p] of [...this.pending]) if (p.child === child) this.settle(id, Object.assign(new Error('the launcher process exited'), { launcher: true }))
    })
    child.on('error', () => {})
    holdOpen(child, false)
    this.child = child
    return child
  }

  private settle(id: number, err: Error | null, result?: LaunchResult) {
    const p = this.pending.get(id)
    if (!p) return
    clearTimeout(p.timer)
    this.pending.delete(id)
    // an idle helper must not keep the server's process alive
    if (!this.pending.size && this.child) holdOpen(this.child, false)
    if (err) p.reject(err)
    else p.resolve(result!)
  }

  /** the helper's process id while it runs */
  get pid(): number | undefined {
    return this.child?.pid
  }

  close(): void {
    this.child?.kill()
    this.child = undefined
  }
}
