import type { Logger } from 'pino'
import type { Knex, ObservedRequest } from '../../core/index.js'

export type TrafficKind = 'download' | 'proxy' | 'share'

/** which routes serve media: by their pattern (the route table's, never the request path) */
export function trafficKindOf(route: string | undefined): TrafficKind | undefined {
  if (!route) return undefined
  if (route.startsWith('/api/v1/asset_shares/')) return 'share'
  if (/\/proxies\/:/.test(route)) return 'proxy'
  if (/\/download[^/]*$/.test(route)) return 'download'
  return undefined
}

export const monthOf = (d: Date) => d.toISOString().slice(0, 7)

const FLUSH_MS = 2000

/**
 * Bytes actually served by download, proxy and share routes, per instance and calendar month (UTC):
 * what the response wrote to its connection, measured when the response ends (a client that breaks
 * off counts what it got). Added up in memory and written every few seconds with an atomic
 * increment, so several processes count into the same rows.
 */
export class TrafficCounter {
  private readonly pending = new Map<string, number>()
  private timer?: NodeJS.Timeout
  private flushing?: Promise<void>

  constructor(
    private readonly knex: Knex,
    private readonly instance: () => string,
    private readonly log: Logger,
    private readonly onServed?: (kind: TrafficKind, bytes: number) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS)
    this.timer.unref()
  }

  async stop(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }

  /** route pattern → its kind: the patterns are few, and this runs for every request */
  private readonly kinds = new Map<string | undefined, TrafficKind | undefined>()

  observe = (request: ObservedRequest): void => {
    let kind = this.kinds.get(request.route)
    if (kind === undefined && !this.kinds.has(request.route)) this.kinds.set(request.route, (kind = trafficKindOf(request.route)))
    if (!kind || request.status >= 400) return
    const { res } = request.ctx
    const socket = request.ctx.req.socket
    // the headers and body are written after this: the socket's count so far belongs to earlier responses
    const before = socket.bytesWritten
    let counted = false
    const count = () => {
      if (counted) return
      counted = true
      const bytes = Math.max(0, socket.bytesWritten - before)
      const key = `${this.instance()}\u0000${monthOf(new Date())}\u0000${kind}`
      this.pending.set(key, (this.pending.get(key) ?? 0) + bytes)
      this.onServed?.(kind, bytes)
    }
    res.once('finish', count)
    res.once('close', count)
  }

  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush())
    if (this.pending.size === 0) return Promise.resolve()
    const batch = [...this.pending]
    this.pending.clear()
    this.flushing = (async () => {
      for (const [key, bytes] of batch) {
        const [instance, month, kind] = key.split('\u0000')
        try {
          await this.knex('platform_traffic')
            .insert({ instance, month, kind, bytes, updated_at: new Date() })
            .onConflict(['instance', 'month', 'kind'])
            .merge({ bytes: this.knex.raw('platform_traffic.bytes + ?', [bytes]), updated_at: new Date() })
        } catch (err) {
          // kept for the next flush
          this.pending.set(key, (this.pending.get(key) ?? 0) + bytes)
          this.log.warn({ err }, 'traffic counts not written; retried')
        }
      }
    })().finally(() => (this.flushing = undefined))
    return this.flushing
  }

  /** bytes served this month (or `month`) by an instance, by kind */
  async month(instance: string, month = monthOf(new Date())): Promise<Record<TrafficKind, number>> {
    await this.flush()
    const rows = await this.knex('platform_traffic').where({ instance, month }).select('kind', 'bytes')
    const out: Record<TrafficKind, number> = { download: 0, proxy: 0, share: 0 }
    for (const r of rows) out[r.kind as TrafficKind] = Number(r.bytes)
    return out
  }
}
