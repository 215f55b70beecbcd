import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const RECEIVER = fileURLToPath(new URL('../fixtures/webhook-receiver.js', import.meta.url))

export interface Received {
  id: string
  timestamp: number
  valid: boolean
  name: string
  body: any
  at: number
}

/** the receiver of test/fixtures/webhook-receiver.ts in a child process */
export async function startReceiver() {
  const child = spawn(process.execPath, [RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))
    child.once('exit', (code) => reject(new Error(`receiver exited ${code}`)))
  })
  const base = `http://127.0.0.1:${port}`
  return {
    url: `${base}/hook`,
    setSecret: (secret: string) => fetch(`${base}/_secret`, { method: 'POST', body: secret }).then((r) => r.text()),
    failNext: (n: number) => fetch(`${base}/_fail`, { method: 'POST', body: String(n) }).then((r) => r.text()),
    received: (): Promise<Received[]> => fetch(`${base}/_received`).then((r) => r.json() as Promise<Received[]>),
    close: () => new Promise<void>((resolve) => {
      child.once('exit', () => resolve())
      child.kill('SIGTERM')
    }),
  }
}
