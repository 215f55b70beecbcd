import http from 'node:http'
import https from 'node:https'
import { createHmac, randomBytes, randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import { setMaxListeners } from 'node:events'
import type { Logger } from 'pino'
import { column, iso, deriveKey, unseal, seal, invalid, notFound, type Dialect, type Knex, type ParamError, type EventBus, type PublishedEvent, type JobService } from '../../core/index.js'
import { guardedLookup, isPrivateAddress, resolveAll } from './ssrf.js'

export const DELIVER_JOB = 'webhooks.deliver'
const SECRET_CONTEXT = 'webhooks/secret'
/** Standard Webhooks' schedule after the first attempt; a delivery stops once it is older than `max_age_hours` */
const RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]

export interface WebhookSettingsValues {
  allow_private_targets: boolean
  /** consecutive failed attempts after which a webhook switches itself off */
  disable_after_failures: number
  timeout_ms: number
  /** requests in flight at once per process */
  concurrency: number
  max_age_hours: number
  /** multiplies the retry schedule (tests shorten it) */
  retry_scale: number
}

export interface WebhookChanges {
  url?: string
  events?: string[]
  active?: boolean
}

/** `whsec_` + base64 of 24 random bytes; the HMAC key is the decoded bytes (Standard Webhooks) */
export const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`

/** `v1,<base64 HMAC-SHA256 over "<id>.<timestamp>.<body>">` */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

/**
 * Outgoing webhooks: admin-managed subscriptions, the outbox consumer that writes one delivery per
 * event and matching subscription, and the drain job that sends due deliveries (signed, with
 * retries on the Standard Webhooks schedule for up to a day, and automatic disabling after a run of
 * failures). Resolved as `webhookServices.service`.
 */
export class WebhookService {
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
  private readonly key: Buffer
  private agents?: { http: http.Agent; https: https.Agent }

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly bus: EventBus,
    private readonly jobs: JobService,
    secretKey: Buffer,
    private readonly settings: () => WebhookSettingsValues,
    private readonly log: Logger,
    /** added to a claim's lease beyond three request timeouts: the job lease, the time a dead process's work waits */
    private readonly leaseMarginMs = 30_000,
  ) {
    this.key = deriveKey(secretKey, 'webhooks')
  }

  // ---- subscriptions -----------------------------------------------------------------------------

  /** 422 naming `webhook[url]` / `webhook[events]`; the URL's host is resolved and refused on a private address */
  async check(changes: WebhookChanges, creating: boolean): Promise<void> {
    const errors: ParamError[] = []
    if (creating && changes.url === undefined) errors.push({ param: 'webhook[url]', message: 'is required' })
    if (creating && changes.events === undefined) errors.push({ param: 'webhook[events]', message: 'is required (event names, or ["*"])' })
    if (changes.url !== undefined) {
      let url: URL | undefined
      try {
        url = new URL(changes.url)
      } catch {
        errors.push({ param: 'webhook[url]', message: 'is not a URL' })
      }
      if (url && !['http:', 'https:'].includes(url.protocol)) errors.push({ param: 'webhook[url]', message: 'must be an http or https URL' })
      else if (url && !this.settings().allow_private_targets) {
        const addresses = await resolveAll(url.hostname).catch(() => null)
        if (!addresses) errors.push({ param: 'webhook[url]', message: `has a host name that does not resolve (${url.hostname})` })
        else if (addresses.some(isPrivateAddress))
          errors.push({ param: 'webhook[url]', message: 'targets a loopback or private address; an administrator can allow that with webhooks.allow_private_targets (MAMKIT_WEBHOOKS_ALLOW_PRIVATE=true)' })
      }
    }
    if (changes.events !== undefined) {
      const known = new Set(this.bus.catalogue().map((e) => e.name))
      if (!changes.events.length) errors.push({ param: 'webhook[events]', message: 'must name at least one event, or "*"' })
      changes.events.forEach((name, i) => {
        if (name !== '*' && !known.has(name)) errors.push({ param: `webhook[events][${i}]`, message: `"${name}" is not an event of the catalogue (mamkit events lists them)` })
      })
      if (changes.events.includes('*') && changes.events.length > 1) errors.push({ param: 'webhook[events]', message: '"*" stands alone' })
    }
    if (errors.length) throw invalid(errors)
  }

  async create(changes: Required<Pick<WebhookChanges, 'url' | 'events'>> & WebhookChanges, userId: number) {
    await this.check(changes, true)
    const secret = newSecret()
    const now = new Date()
    const [row] = await this.knex('webhooks')
      .insert({ url: changes.url, events: JSON.stringify([...new Set(changes.events)]), secret: seal(this.key, secret, SECRET_CONTEXT), active: changes.active ?? true, consecutive_failures: 0, created_by_id: userId, created_at: now, updated_at: now })
      .returning('*')
    return { row, secret }
  }

  async get(id: number) {
    const row = await this.knex('webhooks').where({ id }).first()
    if (!row) throw notFound('Webhook', id)
    return row
  }

  list() {
    return this.knex('webhooks').orderBy('id').limit(1000).select('*')
  }

  async update(id: number, changes: WebhookChanges) {
    await this.get(id)
    await this.check(changes, false)
    const patch: Record<string, unknown> = { updated_at: new Date() }
    if (changes.url !== undefined) patch.url = changes.url
    if (changes.events !== undefined) patch.events = JSON.stringify([...new Set(changes.events)])
    if (changes.active !== undefined) Object.assign(patch, { active: changes.active }, changes.active ? { consecutive_failures: 0, disabled_reason: null } : {})
    await this.knex('webhooks').where({ id }).update(patch)
    return this.get(id)
  }

  async remove(id: number) {
    const row = await this.get(id)
    await this.knex('webhooks').where({ id }).delete()
    return row
  }

  serialize(row: any, secret?: string) {
    return {
      id: Number(row.id),
      url: row.url,
      events: column.json<string[]>(row.events, []),
      active: column.bool(row.active),
      consecutive_failures: Number(row.consecutive_failures),
      disabled_reason: row.disabled_reason ?? null,
      created_by_id: column.intOrNull(row.created_by_id),
      ...(secret ? { secret } : {}),
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }

  // ---- deliveries --------------------------------------------------------------------------------

  deliveriesQuery(webhookId: number, state?: string): Knex.QueryBuilder {
    const q = this.knex('webhook_deliveries').where({ webhook_id: webhookId }).select('id', 'webhook_id', 'event_id', 'event_name', 'state', 'attempts', 'response_code', 'duration_ms', 'error', 'next_attempt_at', 'first_attempt_at', 'last_attempt_at', 'redelivery_of', 'created_at', 'updated_at')
    if (state) q.where({ state })
    return q
  }

  serializeDelivery(row: any) {
    return {
      id: Number(row.id),
      webhook_id: Number(row.webhook_id),
      event_id: row.event_id,
      event_name: row.event_name,
      state: row.state,
      attempts: Number(row.attempts),
      response_code: column.intOrNull(row.response_code),
      duration_ms: column.intOrNull(row.duration_ms),
      error: row.error ?? null,
      next_attempt_at: iso(column.date(row.next_attempt_at)),
      first_attempt_at: iso(column.date(row.first_attempt_at)),
      last_attempt_at: iso(column.date(row.last_attempt_at)),
      redelivery_of: column.intOrNull(row.redelivery_of),
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }

  /** a new delivery of the same event (same webhook-id: receivers that deduplicate see a repeat) */
  async redeliver(webhookId: number, deliveryId: number) {
    const original = await this.knex('webhook_deliveries').where({ id: deliveryId, webhook_id: webhookId }).first()
    if (!original) throw notFound('Delivery', deliveryId)
    const now = new Date()
    const id = await this.knex.transaction(async (trx) => {
      const [row] = await trx('webhook_deliveries')
        .insert({ webhook_id: webhookId, event_id: original.event_id, dedup_key: `${original.event_id}:${randomUUID()}`.slice(0, 80), event_name: original.event_name, body: original.body, state: 'pending', attempts: 0, next_attempt_at: now, redelivery_of: Number(original.id), created_at: now, updated_at: now })
        .returning('id')
      await this.jobs.ensureQueued(trx, DELIVER_JOB, {})
      return Number(typeof row === 'object' ? row.id : row)
    })
    return this.knex('webhook_deliveries').where({ id }).first()
  }

  /** the outbox consumer: one delivery per event and active subscription that wants it, idempotent by event id */
  async deliver(events: PublishedEvent[]): Promise<number> {
    const hooks = (await this.knex('webhooks').where({ active: true }).select('id', 'events')).map((h: any) => ({ id: Number(h.id), events: new Set(column.json<string[]>(h.events, [])) }))
    if (!hooks.length) return 0
    const now = new Date()
    const rows: Record<string, unknown>[] = []
    for (const event of events) {
      const body = JSON.stringify({ id: event.id, name: event.name, time: event.time, subject: event.subject, actor_id: event.actor_id, payload: event.payload })
      for (const h of hooks)
        if (h.events.has('*') || h.events.has(event.name))
          rows.push({ webhook_id: h.id, event_id: event.id, dedup_key: event.id, event_name: event.name, body, state: 'pending', attempts: 0, next_attempt_at: now, created_at: now, updated_at: now })
    }
    if (!rows.length) return 0
    await this.knex.transaction(async (trx) => {
      for (let i = 0; i < rows.length; i += 500) await trx('webhook_deliveries').insert(rows.slice(i, i + 500)).onConflict(['webhook_id', 'dedup_key']).ignore()
      await this.jobs.ensureQueued(trx, DELIVER_JOB, {})
    })
    return rows.length
  }

  private agentsOf() {
    const s = this.settings()
    this.agents ??= {
      http: new http.Agent({ keepAlive: true, maxSockets: s.concurrency, lookup: guardedLookup(s.allow_private_targets) as any }),
      https: new https.Agent({ keepAlive: true, maxSockets: s.concurrency, lookup: guardedLookup(s.allow_private_targets) as any }),
    }
    return this.agents
  }

  close() {
    this.agents?.http.destroy()
    this.agents?.https.destroy()
  }

  /** one POST; resolves with the status code, or rejects (refused target, timeout, connection error) */
  private post(url: string, body: string, headers: Record<string, string>, signal?: AbortSignal): Promise<number> {
    const target = new URL(url)
    const s = this.settings()
    const lib = target.protocol === 'https:' ? https : http
    const agent = target.protocol === 'https:' ? this.agentsOf().https : this.agentsOf().http
    return new Promise((resolve, reject) => {
      const req = lib.request(target, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'mamkit-webhooks/1', ...headers }, timeout: s.timeout_ms, signal }, (res) => {
        res.resume() // the answer's body is not kept
        res.on('end', () => resolve(res.statusCode ?? 0))
        res.on('error', reject)
      })
      req.on('timeout', () => req.destroy(new Error(`no answer within ${s.timeout_ms} ms`)))
      req.on('error', reject)
      req.end(body)
    })
  }

  /**
   * Sends due deliveries until none is due: claimed under a lease (several processes share the
   * work), `concurrency` at once. Then queues itself for the next retry.
   */
  async sendDue(signal?: AbortSignal): Promise<{ sent: number; failed: number }> {
    let sent = 0
    let failed = 0
    const s = this.settings()
    // every request in flight listens to the job's signal
    if (signal) setMaxListeners(s.concurrency + 16, signal)
    for (;;) {
      if (signal?.aborted) break
      const claimed = await this.claim(Math.max(s.concurrency * 4, 50))
      if (!claimed.length) break
      let next = 0
      const worker = async () => {
        while (next < claimed.length) {
          const d = claimed[next++]
          ;(await this.attempt(d, signal)) ? sent++ : failed++
        }
      }
      await Promise.all(Array.from({ length: Math.min(s.concurrency, claimed.length) }, worker))
    }
    const [row] = await this.knex('webhook_deliveries').where({ state: 'pending' }).whereNotNull('next_attempt_at').min({ at: 'next_attempt_at' })
    const at = column.date((row as { at: unknown }).at)
    if (at) await this.jobs.ensureQueued(this.knex, DELIVER_JOB, {}, { runAt: at })
    return { sent, failed }
  }

  private async claim(limit: number): Promise<any[]> {
    const now = new Date()
    const lock = this.dialect === 'postgresql' ? 'for update skip locked' : ''
    const result = await this.knex.raw(
      `update webhook_deliveries set locked_by = ?, lease_until = ?
        where id in (select id from webhook_deliveries
                      where state = 'pending' and next_attempt_at <= ? and (lease_until is null or lease_until < ?)
                      order by next_attempt_at, id limit ? ${lock})
       returning id, webhook_id, event_id, body, attempts, first_attempt_at`,
      [this.owner, new Date(now.getTime() + this.settings().timeout_ms * 3 + this.leaseMarginMs), now, now, limit],
    )
    const rows: any[] = this.dialect === 'postgresql' ? result.rows : result
    if (!rows.length) return []
    const hooks = new Map<number, any>()
    for (const h of await this.knex('webhooks').whereIn('id', [...new Set(rows.map((r) => Number(r.webhook_id)))]).select('id', 'url', 'secret', 'active', 'consecutive_failures')) hooks.set(Number(h.id), h)
    return rows.map((r) => ({ ...r, hook: hooks.get(Number(r.webhook_id)) }))
  }

  /** one attempt of one claimed delivery; true when the target took it (2xx) */
  private async attempt(d: any, signal?: AbortSignal): Promise<boolean> {
    const s = this.settings()
    const id = Number(d.id)
    const now = new Date()
    const fence = () => this.knex('webhook_deliveries').where({ id, locked_by: this.owner })
    if (!d.hook || !column.bool(d.hook.active)) {
      await fence().update({ state: 'cancelled', error: 'the webhook is switched off', next_attempt_at: null, locked_by: null, lease_until: null, updated_at: now })
      return false
    }
    const timestamp = Math.floor(Date.now() / 1000)
    const started = performance.now()
    let code: number | null = null
    let error: string | null = null
    try {
      const secret = unseal(this.key, d.hook.secret, SECRET_CONTEXT)
      code = await this.post(d.hook.url, d.body, { 'webhook-id': d.event_id, 'webhook-timestamp': String(timestamp), 'webhook-signature': sign(secret, d.event_id, timestamp, d.body) }, signal)
      if (code < 200 || code > 299) error = `the target answered ${code}`
    } catch (err) {
      error = (err as Error).message.slice(0, 1000)
    }
    const duration = Math.round(performance.now() - started)
    const attempts = Number(d.attempts) + 1
    const first = column.date(d.first_attempt_at) ?? now
    if (!error) {
      await fence().update({ state: 'succeeded', attempts, response_code: code, duration_ms: duration, error: null, next_attempt_at: null, first_attempt_at: first, last_attempt_at: now, locked_by: null, lease_until: null, updated_at: now })
      if (Number(d.hook.consecutive_failures ?? 1) !== 0) await this.knex('webhooks').where({ id: Number(d.webhook_id) }).where('consecutive_failures', '>', 0).update({ consecutive_failures: 0 })
      return true
    }
    const delay = RETRY_SCHEDULE_MS[Math.min(attempts - 1, RETRY_SCHEDULE_MS.length - 1)] * s.retry_scale
    const retryAt = new Date(Date.now() + delay)
    const giveUp = retryAt.getTime() - first.getTime() > s.max_age_hours * 3600_000 || attempts > RETRY_SCHEDULE_MS.length
    await fence().update({ state: giveUp ? 'failed' : 'pending', attempts, response_code: code, duration_ms: duration, error, next_attempt_at: giveUp ? null : retryAt, first_attempt_at: first, last_attempt_at: now, locked_by: null, lease_until: null, updated_at: now })
    // a run of failures switches the webhook off (an administrator switches it on again with active=true)
    const [hook] = await this.knex('webhooks').where({ id: Number(d.webhook_id) }).increment('consecutive_failures', 1).returning(['consecutive_failures', 'active'])
    if (hook && Number(hook.consecutive_failures) >= s.disable_after_failures && column.bool(hook.active)) {
      await this.knex('webhooks').where({ id: Number(d.webhook_id), active: true }).update({ active: false, disabled_reason: `switched off after ${hook.consecutive_failures} failed deliveries in a row (last: ${error})`.slice(0, 500), updated_at: new Date() })
      this.log.warn({ webhook: Number(d.webhook_id) }, 'webhook switched off after a run of failures')
    }
    return false
  }
}
