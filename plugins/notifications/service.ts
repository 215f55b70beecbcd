import type { Logger } from 'pino'
import { column, iso, invalid, notFound, type Dialect, type Knex, type ParamError, type EventBus, type PublishedEvent, type JobService } from '../../core/index.js'
import type { Audience, BatchLookups } from './audience.js'
import { renderMail, titleOf, type MailItem } from './templates.js'

export const EMAIL_MODES = ['off', 'immediately', 'hourly', 'daily'] as const
export type EmailMode = (typeof EMAIL_MODES)[number]
export interface Channels {
  in_app: boolean
  email: EmailMode
}
/** a change sent by a client: channels (partly), `off` (nothing), or `default` (drop the override) */
export type ChannelChange = Partial<Channels> | 'off' | 'default'

export const SEND_EMAILS_JOB = 'notifications.send-emails'

export interface NotificationSettingsValues {
  /** channels of every event kind nobody configured */
  default_in_app: boolean
  default_email: EmailMode
  /** hour of the day (UTC) daily digests go out */
  daily_digest_hour: number
}

/** what the send job needs from the identity plugin's mailer */
export interface MailSender {
  settings: { publicUrl: string }
  assertConfigured(): void
  send(message: { to: string; subject: string; text: string; html?: string }): Promise<void>
}

const KIND_PARAM = (root: string, kind: string) => `${root}[${kind}]`

/**
 * Notifications (§4.18): the outbox consumer that writes them for the users an event concerns, the
 * current user's list, per-kind channel settings over administrator defaults, and the email sender
 * (one mail at once, or hourly/daily digests). Resolved as `notificationServices.service`.
 */
export class NotificationService {
  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly bus: EventBus,
    private readonly jobs: JobService,
    private readonly audience: Audience,
    private readonly settings: () => NotificationSettingsValues,
    private readonly log: Logger,
  ) {}

  /** the event kinds users can configure: the whole catalogue */
  kinds(): Array<{ name: string; description: string; subject: string }> {
    return this.bus.catalogue().map((e) => ({ name: e.name, description: e.description, subject: e.subject }))
  }

  // ---- fan-out ---------------------------------------------------------------------------------

  /** the outbox consumer: idempotent by (user, event id) */
  async deliver(events: PublishedEvent[]): Promise<number> {
    const batch: BatchLookups = { readers: new Map() }
    const wanted: Array<{ event: PublishedEvent; userId: number }> = []
    for (const event of events) {
      const type = this.bus.declaredEvent(event.name)
      const audience = type?.audience?.(event.payload)
      if (!audience) continue
      for (const userId of await this.audience.recipients(event, audience, batch)) wanted.push({ event, userId })
    }
    if (!wanted.length) return 0
    const channels = await this.channelsFor([...new Set(wanted.map((w) => w.userId))], [...new Set(wanted.map((w) => w.event.name))])
    const now = new Date()
    const rows: Record<string, unknown>[] = []
    let firstDue: Date | undefined
    for (const { event, userId } of wanted) {
      const c = channels.get(`${userId} ${event.name}`)!
      if (!c.in_app && c.email === 'off') continue
      const due = c.email === 'off' ? null : this.dueAt(c.email, now)
      if (due && (!firstDue || due < firstDue)) firstDue = due
      rows.push({
        user_id: userId,
        event_id: event.id,
        kind: event.name,
        subject_type: event.subject.type,
        subject_id: event.subject.id,
        actor_id: event.actor_id,
        title: titleOf(event, this.bus.declaredEvent(event.name)),
        payload: JSON.stringify(event.payload ?? null),
        in_app: c.in_app,
        read: false,
        email: c.email === 'off' ? null : c.email,
        email_due_at: due,
        created_at: new Date(event.time),
        updated_at: now,
      })
    }
    if (!rows.length) return 0
    await this.knex.transaction(async (trx) => {
      for (let i = 0; i < rows.length; i += 500) {
        await trx('notifications').insert(rows.slice(i, i + 500)).onConflict(['user_id', 'event_id']).ignore()
        // SQLite runs each statement synchronously: a batch of 50,000 rows would hold the event loop for
        // seconds, and answers that arrived meanwhile (webhook posts) would be read after their timeout fired
        await new Promise((resolve) => setImmediate(resolve))
      }
      if (firstDue) await this.jobs.ensureQueued(trx, SEND_EMAILS_JOB, {}, { runAt: firstDue })
    })
    return rows.length
  }

  /** immediately: now; hourly: the next full hour; daily: the next configured hour of the day (UTC) */
  dueAt(mode: Exclude<EmailMode, 'off'>, now: Date): Date {
    if (mode === 'immediately') return now
    const d = new Date(now)
    d.setUTCMinutes(0, 0, 0)
    if (mode === 'hourly') return new Date(d.getTime() + 3600_000)
    d.setUTCHours(this.settings().daily_digest_hour)
    return d <= now ? new Date(d.getTime() + 86_400_000) : d
  }

  // ---- settings ---------------------------------------------------------------------------------

  private builtIn(): Channels {
    const s = this.settings()
    return { in_app: s.default_in_app, email: s.default_email }
  }

  /** effective channels per `${userId} ${kind}` */
  async channelsFor(userIds: number[], kinds: string[]): Promise<Map<string, Channels>> {
    const defaults = new Map<string, Channels>()
    for (const r of await this.knex('notification_defaults').whereIn('kind', kinds).select('kind', 'in_app', 'email')) defaults.set(r.kind, { in_app: column.bool(r.in_app), email: r.email })
    const own = new Map<string, Channels>()
    for (let i = 0; i < userIds.length; i += 500)
      for (const r of await this.knex('notification_settings').whereIn('user_id', userIds.slice(i, i + 500)).whereIn('kind', kinds).select('user_id', 'kind', 'in_app', 'email'))
        own.set(`${Number(r.user_id)} ${r.kind}`, { in_app: column.bool(r.in_app), email: r.email })
    const out = new Map<string, Channels>()
    for (const u of userIds) for (const k of kinds) out.set(`${u} ${k}`, own.get(`${u} ${k}`) ?? defaults.get(k) ?? this.builtIn())
    return out
  }

  /** every kind with its channels and where they come from; `userId` null: the defaults */
  async settingsOf(userId: number | null) {
    const defaults = new Map<string, Channels>()
    for (const r of await this.knex('notification_defaults').select('kind', 'in_app', 'email')) defaults.set(r.kind, { in_app: column.bool(r.in_app), email: r.email })
    const own = new Map<string, Channels>()
    if (userId !== null)
      for (const r of await this.knex('notification_settings').where({ user_id: userId }).select('kind', 'in_app', 'email')) own.set(r.kind, { in_app: column.bool(r.in_app), email: r.email })
    const out: Record<string, Channels & { source: 'user' | 'default' | 'built-in'; description: string; subject: string }> = {}
    for (const k of this.kinds()) {
      const [c, source] = own.has(k.name) ? [own.get(k.name)!, 'user' as const] : defaults.has(k.name) ? [defaults.get(k.name)!, 'default' as const] : [this.builtIn(), 'built-in' as const]
      out[k.name] = { in_app: c.in_app, email: c.email, source, description: k.description, subject: k.subject }
    }
    return out
  }

  /**
   * Applies changes per kind (`userId` null: the administrators' defaults). Unknown kinds are a 422
   * naming them; nothing is written unless every change is valid.
   */
  async updateSettings(userId: number | null, changes: Record<string, ChannelChange>, root: string): Promise<void> {
    const known = new Set(this.kinds().map((k) => k.name))
    const errors: ParamError[] = []
    for (const kind of Object.keys(changes)) if (!known.has(kind)) errors.push({ param: KIND_PARAM(root, kind), message: 'is not an event kind (GET /notification_settings lists them)' })
    if (errors.length) throw invalid(errors)
    const current = await this.settingsOf(userId)
    const table = userId === null ? 'notification_defaults' : 'notification_settings'
    const key = userId === null ? {} : { user_id: userId }
    const now = new Date()
    await this.knex.transaction(async (trx) => {
      for (const [kind, change] of Object.entries(changes)) {
        if (change === 'default') {
          await trx(table).where({ ...key, kind }).delete()
          continue
        }
        const next: Channels = change === 'off' ? { in_app: false, email: 'off' } : { in_app: change.in_app ?? current[kind].in_app, email: change.email ?? current[kind].email }
        await trx(table)
          .insert({ ...key, kind, in_app: next.in_app, email: next.email, created_at: now, updated_at: now })
          .onConflict(userId === null ? ['kind'] : ['user_id', 'kind'])
          .merge(['in_app', 'email', 'updated_at'])
      }
    })
  }

  // ---- the list ---------------------------------------------------------------------------------

  /** the user's notifications for `paginate` (newest first by id) */
  listQuery(userId: number, unread: boolean | undefined): Knex.QueryBuilder {
    const q = this.knex('notifications').where({ user_id: userId, in_app: true }).select('*')
    if (unread === true) q.where({ read: false })
    else if (unread === false) q.where({ read: true })
    return q
  }

  async get(userId: number, id: number) {
    const row = await this.knex('notifications').where({ id, user_id: userId, in_app: true }).first()
    if (!row) throw notFound('Notification', id)
    return row
  }

  /** flips read in one statement: two toggles at once leave it as it was */
  async toggleRead(userId: number, id: number) {
    const n = await this.knex('notifications')
      .where({ id, user_id: userId, in_app: true })
      .update({ read: this.knex.raw('not ??', ['read']), read_at: this.knex.raw(`case when ?? then null else ?${this.dialect === 'postgresql' ? '::timestamptz' : ''} end`, ['read', new Date()]), updated_at: new Date() })
    if (!n) throw notFound('Notification', id)
    return this.get(userId, id)
  }

  async markAllRead(userId: number): Promise<number> {
    const now = new Date()
    return this.knex('notifications').where({ user_id: userId, in_app: true, read: false }).update({ read: true, read_at: now, updated_at: now })
  }

  async unreadCount(userId: number): Promise<number> {
    const [row] = await this.knex('notifications').where({ user_id: userId, in_app: true, read: false }).count({ n: '*' })
    return Number((row as { n: unknown }).n)
  }

  serialize(row: any) {
    return {
      id: Number(row.id),
      kind: row.kind,
      event_id: row.event_id,
      title: row.title,
      subject_type: row.subject_type,
      subject_id: Number(row.subject_id),
      actor_id: column.intOrNull(row.actor_id),
      payload: column.json(row.payload, null),
      read: column.bool(row.read),
      read_at: iso(column.date(row.read_at)),
      email: row.email ?? null,
      emailed_at: iso(column.date(row.emailed_at)),
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }

  // ---- email ------------------------------------------------------------------------------------

  /**
   * Sends what is due: each `immediately` notification as its own mail, due digest entries as one mail
   * per user and mode. A failed SMTP delivery throws (the job is retried with backoff); what went out
   * is marked first, so a retry does not send it again. Then queues itself for the next due digest.
   */
  async sendDue(mailer: MailSender, signal?: AbortSignal): Promise<{ mails: number; notifications: number }> {
    let mails = 0
    let notifications = 0
    try {
      mailer.assertConfigured()
    } catch (err) {
      // nothing can go out: the due emails are dropped (the in-app notifications stay)
      const n = await this.knex('notifications').where('email_due_at', '<=', new Date()).update({ email_due_at: null })
      if (n) this.log.warn({ dropped: n }, `notification emails dropped: ${(err as Error).message}`)
      return { mails, notifications }
    }
    for (;;) {
      if (signal?.aborted) break
      const due = await this.knex('notifications as n')
        .join('users as u', 'u.id', 'n.user_id')
        .where('n.email_due_at', '<=', new Date())
        .orderBy([{ column: 'n.user_id' }, { column: 'n.id' }])
        .limit(500)
        .select('n.id', 'n.user_id', 'n.kind', 'n.title', 'n.subject_type', 'n.subject_id', 'n.email', 'n.created_at', 'u.email as address', 'u.username', 'u.firstname')
      if (!due.length) break
      const groups = new Map<string, any[]>()
      for (const r of due) {
        const key = r.email === 'immediately' ? `${r.user_id} ${r.id}` : `${r.user_id} ${r.email}`
        groups.set(key, [...(groups.get(key) ?? []), r])
      }
      for (const rows of groups.values()) {
        const first = rows[0]
        const ids = rows.map((r) => Number(r.id))
        if (first.address) {
          const items: MailItem[] = rows.map((r) => ({ id: Number(r.id), title: r.title, kind: r.kind, subject: { type: r.subject_type, id: Number(r.subject_id) }, createdAt: column.date(r.created_at)! }))
          const mail = renderMail(first.firstname || first.username, items, mailer.settings.publicUrl, first.email === 'immediately' ? null : first.email)
          await mailer.send({ to: first.address, ...mail })
          mails++
          notifications += ids.length
        }
        await this.knex('notifications').whereIn('id', ids).update({ email_due_at: null, emailed_at: first.address ? new Date() : null })
      }
    }
    const next = await this.knex('notifications').whereNotNull('email_due_at').min({ at: 'email_due_at' })
    const at = column.date((next[0] as { at: unknown }).at)
    if (at) await this.jobs.ensureQueued(this.knex, SEND_EMAILS_JOB, {}, { runAt: at })
    return { mails, notifications }
  }
}
