import type { AddressInfo } from 'node:net'

export interface CaughtMail {
  from: string
  to: string[]
  raw: string
}

export interface MailCatcher {
  /** point the server's SMTP settings here (host 127.0.0.1, no TLS) */
  port: number
  /** every message received, in order */
  messages: CaughtMail[]
  close(): Promise<void>
}

/**
 * A real local SMTP server (smtp-server, a development dependency: loaded only when a test asks for
 * it) that keeps what it receives and refuses mailboxes named nobody@.
 */
export async function startMailCatcher(): Promise<MailCatcher> {
  const { SMTPServer } = await import('smtp-server')
  const messages: CaughtMail[] = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onRcptTo(address, _session, callback) {
      callback(address.address.startsWith('nobody@') ? Object.assign(new Error('No such mailbox'), { responseCode: 550 }) : undefined)
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('end', () => {
        messages.push({ from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '', to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString('utf8') })
        callback()
      })
    },
  })
  const port = await new Promise<number>((resolve) => {
    const listening = server.listen(0, '127.0.0.1', () => resolve((listening.address() as AddressInfo).port))
  })
  return { port, messages, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** RFC 2047 encoded words (`=?UTF-8?Q?...?=`, `=?UTF-8?B?...?=`), as nodemailer writes a subject with quotes */
const decodeWords = (value: string) =>
  value.replace(/=\?UTF-8\?([QB])\?([^?]*)\?=\s*/gi, (_, enc: string, text: string) =>
    enc.toUpperCase() === 'B' ? Buffer.from(text, 'base64').toString('utf8') : Buffer.from(text.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_m, hex) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8'),
  )

/** headers and the text body of a raw message (quoted-printable, base64 or plain) */
export function parseMail(raw: string) {
  const [head, ...rest] = raw.split(/\r?\n\r?\n/)
  const headers: Record<string, string> = {}
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const i = line.indexOf(':')
    headers[line.slice(0, i).toLowerCase()] = decodeWords(line.slice(i + 1).trim())
  }
  let body = rest.join('\n\n')
  if (/quoted-printable/i.test(headers['content-transfer-encoding'] ?? ''))
    body = Buffer.from(body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8')
  else if (/base64/i.test(headers['content-transfer-encoding'] ?? '')) body = Buffer.from(body, 'base64').toString('utf8')
  return { headers, body: body.replace(/\r\n/g, '\n') }
}
