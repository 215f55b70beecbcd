import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Knex, EventBus, ObservedRequest } from '../../core/index.js'

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

interface RequestStats {
  labels: { method: string; route: string; status: string }
  count: number
  sum: number
  /** observations per bucket of LATENCY_BUCKETS (not cumulative; above the last one only in `count`) */
  buckets: number[]
}

/**
 * The request latency histogram as prom-client prints a `Histogram` (cumulative `_bucket` lines
 * with `le` first, then `+Inf`, `_sum`, `_count`), read from the counts `observe` keeps. A metric
 * for prom-client's registry is anything with a name, help, type and `get()`.
 */
class RequestLatency {
  readonly name = 'mamkit_http_request_duration_seconds'
  readonly help = 'time to the answer (a streamed body may take longer), by route pattern, method and status'
  readonly type = 'histogram'
  readonly aggregator = 'sum'

  constructor(private readonly stats: Map<string, RequestStats>) {}

  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = []
    const bucket = `${this.name}_bucket`
    for (const s of this.stats.values()) {
      let cumulative = 0
      for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
        cumulative += s.buckets[i]
        values.push({ labels: { le: LATENCY_BUCKETS[i], ...s.labels }, value: cumulative, metricName: bucket })
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: bucket })
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` })
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}

/**
 * Prometheus metrics of this process (GET /metrics): requests by route pattern, method and status
 * (count and latency), jobs (queue depth by type and state read at scrape time, durations and
 * outcomes by type as they settle: ingest analysis and proxy encodes among them), bytes served
 * by download, proxy and share routes, and the database pool. One registry per runtime.
 */
export class PlatformMetrics {
  readonly registry = new Registry()
  /** per method, route pattern and status: what the request counter and the latency histogram print */
  private readonly requestStats = new Map<string, RequestStats>()
  private readonly jobDuration: Histogram<'type' | 'state'>
  private readonly served: Counter<'kind'>
  private unsubscribe?: () => void

  constructor(
    private readonly knex: Knex,
    private readonly events: EventBus,
  ) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'mamkit_' })
    const stats = this.requestStats
    new Counter({
      name: 'mamkit_http_requests_total',
      help: 'HTTP requests answered, by route pattern, method and status',
      labelNames: ['method', 'route', 'status'],
      registers,
      collect() {
        // counted by `observe` without prom-client's per-call label hashing; handed over at scrape time
        this.reset()
        for (const s of stats.values()) this.inc(s.labels, s.count)
      },
    })
    this.registry.registerMetric(new RequestLatency(stats) as unknown as Histogram)
    this.jobDuration = new Histogram({
      name: 'mamkit_job_duration_seconds',
      help: 'run time of settled jobs (from start to end), by type and final state',
      labelNames: ['type', 'state'],
      buckets: [0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800, 7200],
      registers,
    })
    this.served = new Counter({ name: 'mamkit_served_bytes_total', help: 'bytes served by download, proxy and share routes by this process', labelNames: ['kind'], registers })
    const knexRef = this.knex
    new Gauge({
      name: 'mamkit_jobs',
      help: 'jobs queued or running, by type and state (all processes sharing the database)',
      labelNames: ['type', 'state'],
      registers,
      async collect() {
        this.reset()
        // one count per state: each reads only its partial index's rows (jobs_queued_index,
        // jobs_running_index, migration 0008); `state in (...)` implies neither and scans the table
        for (const state of ['queued', 'running'] as const) {
          const rows = await knexRef('jobs').where('state', state).groupBy('type').select('type').count({ n: '*' })
          for (const r of rows as Array<{ type: string; n: unknown }>) this.set({ type: r.type, state }, Number(r.n))
        }
      },
    })
    const pool = () => (knexRef.client as any).pool
    new Gauge({
      name: 'mamkit_db_pool_connections',
      help: 'database pool connections of this process, by state (used, free, pending acquires)',
      labelNames: ['state'],
      registers,
      collect() {
        const p = pool()
        if (!p) return
        this.set({ state: 'used' }, p.numUsed?.() ?? 0)
        this.set({ state: 'free' }, p.numFree?.() ?? 0)
        this.set({ state: 'pending' }, p.numPendingAcquires?.() ?? 0)
      },
    })
  }

  start(): void {
    this.unsubscribe = this.events.on('jobs.settled', ({ id }) => void this.jobSettled(id).catch(() => {}))
  }

  stop(): void {
    this.unsubscribe?.()
  }

  /**
   * Every answered request passes here (a `RequestObservers` listener): a map lookup and a few
   * additions. prom-client's `inc` and `observe` hash and validate their labels on every call,
   * which cost several µs of a ~50 µs request; the totals are handed to it when /metrics is read.
   */
  observe = (r: ObservedRequest): void => {
    const route = r.route ?? 'unmatched'
    const key = `${r.method} ${r.status} ${route}`
    let s = this.requestStats.get(key)
    if (s === undefined) {
      s = { labels: { method: r.method, route, status: String(r.status) }, count: 0, sum: 0, buckets: new Array<number>(LATENCY_BUCKETS.length).fill(0) }
      this.requestStats.set(key, s)
    }
    const seconds = r.ms / 1000
    s.count++
    s.sum += seconds
    for (let i = 0; i < LATENCY_BUCKETS.length; i++)
      if (seconds <= LATENCY_BUCKETS[i]) {
        s.buckets[i]++
        break
      }
  }

  servedBytes(kind: string, bytes: number): void {
    this.served.inc({ kind }, bytes)
  }

  private async jobSettled(id: number) {
    const job = await this.knex('jobs').where({ id }).first('type', 'state', 'started_at', 'finished_at')
    if (!job) return
    const seconds = job.started_at && job.finished_at ? (new Date(job.finished_at).getTime() - new Date(job.started_at).getTime()) / 1000 : 0
    this.jobDuration.observe({ type: job.type, state: job.state }, Math.max(0, seconds))
  }

  text(): Promise<string> {
    return this.registry.metrics()
  }
}
