import nodemailer, { type Transporter } from 'nodemailer'
import { MamError, type MamConfig } from '../../core/index.js'

export interface MailSettings {
  host?: string
  port: number
  /** true: TLS from the start (465); false: STARTTLS when offered */
  secure: boolean
  user?: string
  pass?: string
  from: string
  /** base URL put in links (invitations): https://mam.example.com */
  publicUrl: string
  /** accept self-signed certificates (test and lab servers) */
  allowInvalidCertificates: boolean
}

export function mailSettings(config: MamConfig, env = process.env): MailSettings {
  const own = (config.plugins.identity?.mail ?? {}) as Partial<MailSettings>
  return {
    host: own.host ?? env.MAMKIT_SMTP_HOST,
    port: own.port ?? Number(env.MAMKIT_SMTP_PORT ?? 587),
    secure: own.secure ?? env.MAMKIT_SMTP_SECURE === 'true',
    user: own.user ?? env.MAMKIT_SMTP_USER,
    pass: own.pass ?? env.MAMKIT_SMTP_PASSWORD,
    from: own.from ?? env.MAMKIT_SMTP_FROM ?? 'mamkit <mamkit@localhost>',
    publicUrl: (own.publicUrl ?? env.MAMKIT_PUBLIC_URL ?? `http://${config.host}:${config.port}`).replace(/\/+$/, ''),
    allowInvalidCertificates: own.allowInvalidCertificates ?? env.MAMKIT_SMTP_ALLOW_INVALID_CERTS === 'true',
  }
}

/** Sends mail through the configured SMTP server; 503 when none is configured. Resolved as `mailer`. */
export class Mailer {
  private transport?: Transporter
  constructor(readonly settings: MailSettings) {}

  /** 503 naming the missing setting, before a caller creates anything it would have to undo */
  assertConfigured(): void {
    if (!this.settings.host)
      throw new MamError('service_unavailable', 'No SMTP server is configured (set MAMKIT_SMTP_HOST or plugins.identity.mail.host)')
  }

  async send(message: { to: string; subject: string; text: string; html?: string }): Promise<void> {
    this.assertConfigured()
    this.transport ??= nodemailer.createTransport({
      host: this.settings.host,
      port: this.settings.port,
      secure: this.settings.secure,
      auth: this.settings.user ? { user: this.settings.user, pass: this.settings.pass } : undefined,
      tls: { rejectUnauthorized: !this.settings.allowInvalidCertificates },
    })
    try {
      await this.transport.sendMail({ from: this.settings.from, ...message })
    } catch (err) {
      throw new MamError('service_unavailable', `The SMTP server did not take the message: ${(err as Error).message}`)
    }
  }
}
