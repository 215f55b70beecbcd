import { execFile } from 'node:child_process'

/**
 * The helper process of `Launcher` (launcher.ts): starts the programs it is asked to and answers
 * with their output. It is small, so its fork() is cheap, and the server never forks itself.
 */

interface Request {
  id: number
  file: string
  args: string[]
  timeoutMs: number
  maxBuffer: number
}

process.on('message', (req: Request) => {
  execFile(req.file, req.args, { timeout: req.timeoutMs, maxBuffer: req.maxBuffer, encoding: 'utf8' }, (err, stdout, stderr) => {
    process.send!({ id: req.id, stdout, stderr, error: err ? { message: err.message, code: (err as NodeJS.ErrnoException).code ?? null } : null })
  })
})
// the server went away: so does the helper
process.on('disconnect', () => process.exit(0))
// messages that arrive before the listener above exists are dropped: the server sends none until this
process.send!({ ready: true })
