import nodemailer, { type Transporter } from 'nodemailer'
import { MamError, Type, type MamConfig, type Static } from '../../core/index.js'

/**
 * `plugins.identity.mail`: the SMTP server. Every member is optional: one left unset falls back to
 * its environment variable, then to the default (README, "Invitations"). The fallbacks are applied
 * when mail is sent, so the environment of the running process counts, not the one at import.
 */
export const MailSettingsSchema = Type.Object(
  {
    /** none (and no MAMKIT_SMTP_HOST): every mail answers 503 */
    host: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'SMTP server (env MAMKIT_SMTP_HOST); none: mail answers 503' })),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'env MAMKIT_SMTP_PORT; default 587' })),
    /** true: TLS from the start (465); false: STARTTLS when offered */
    secure: Type.Optional(Type.Boolean({ description: 'TLS from the start (env MAMKIT_SMTP_SECURE=true); default false: STARTTLS when offered' })),
    user: Type.Optional(Type.String({ maxLength: 320, description: 'env MAMKIT_SMTP_USER; none: no authentication' })),
    pass: Type.Optional(Type.String({ maxLength: 1024, writeOnly: true, description: 'env MAMKIT_SMTP_PASSWORD' })),
    from: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: 'env MAMKIT_SMTP_FROM; default "mamkit <mamkit@localhost>"' })),
    /** base URL put in links (invitations): https://mam.example.com */
    publicUrl: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$', maxLength: 2000, description: 'base URL of links in mail (env MAMKIT_PUBLIC_URL); default http://<host>:<port> of the server' })),
    /** accept self-signed certificates (test and lab servers) */
    allowInvalidCertificates: Type.Optional(Type.Boolean({ description: 'accept self-signed certificates (env MAMKIT_SMTP_ALLOW_INVALID_CERTS=true); default false' })),
  },
  { default: {}, additionalProperties: false },
)
export type ConfiguredMail = Static<typeof MailSettingsSchema>

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

/** the settings in force: each configured member, else its environment variable, else the default */
export function mailSettings(own: ConfiguredMail, config: Pick<MamConfig, 'host' | 'port'>, env = process.env): MailSettings {
  return {
    host: own.host ?? (env.MAMKIT_SMTP_HOST || undefined),
    port: own.port ?? Number(env.MAMKIT_SMTP_PORT || 587),
    secure: own.secure ?? env.MAMKIT_SMTP_SECURE === 'true',
    user: own.user ?? env.MAMKIT_SMTP_USER,
    pass: own.pass ?? env.MAMKIT_SMTP_PASSWORD,
    from: own.from ?? env.MAMKIT_SMTP_FROM ?? 'mamkit <mamkit@localhost>',
    publicUrl: (own.publicUrl ?? env.MAMKIT_PUBLIC_URL ?? `http://${config.host}:${config.port}`).replace(/\/+$/, ''),
    allowInvalidCertificates: own.allowInvalidCertificates ?? env.MAMKIT_SMTP_ALLOW_INVALID_CERTS === 'true',
  }
}

/**
 * Sends mail through the configured SMTP server; 503 when none is configured. The settings are read
 * on every use, so a change through PUT /settings applies to the next message.
 */
export class Mailer {
  private transport?: { key: string; transporter: Transporter }
  constructor(private readonly current: () => MailSettings) {}

  get settings(): MailSettings {
    return this.current()
  }

  /** 503 naming the missing setting, before a caller creates anything it would have to undo */
  assertConfigured(): void {
    if (!this.settings.host)
      throw new MamError('service_unavailable', 'No SMTP server is configured (set MAMKIT_SMTP_HOST or plugins.identity.mail.host)')
  }

  async send(message: { to: string; subject: string; text: string; html?: string }): Promise<void> {
    this.assertConfigured()
    const settings = this.settings
    const key = JSON.stringify([settings.host, settings.port, settings.secure, settings.user, settings.pass, settings.allowInvalidCertificates])
    if (this.transport?.key !== key) {
      this.transport?.transporter.close()
      this.transport = {
        key,
        transporter: nodemailer.createTransport({
          host: settings.host,
          port: settings.port,
          secure: settings.secure,
          auth: settings.user ? { user: settings.user, pass: settings.pass } : undefined,
          tls: { rejectUnauthorized: !settings.allowInvalidCertificates },
        }),
      }
    }
    try {
      await this.transport.transporter.sendMail({ from: settings.from, ...message })
    } catch (err) {
      throw new MamError('service_unavailable', `The SMTP server did not take the message: ${(err as Error).message}`)
    }
  }
}
