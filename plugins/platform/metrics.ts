import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Knex, EventBus, ObservedRequest } from '../../core/index.js'

/**
 * Prometheus metrics of this process (GET /metrics): requests by route pattern, method and status
 * (count and latency), jobs (queue depth by type and state read at scrape time, durations and
 * outcomes by type as they settle: ingest analysis and proxy encodes among them), bytes served
 * by download, proxy and share routes, and the database pool. One registry per runtime.
 */
export class PlatformMetrics {
  readonly registry = new Registry()
  private readonly requests: Counter<'method' | 'route' | 'status'>
  private readonly latency: Histogram<'method' | 'route' | 'status'>
  private readonly jobDuration: Histogram<'type' | 'state'>
  private readonly served: Counter<'kind'>
  private unsubscribe?: () => void

  constructor(
    private readonly knex: Knex,
    private readonly events: EventBus,
  ) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'mamkit_' })
    this.requests = new Counter({ name: 'mamkit_http_requests_total', help: 'HTTP requests answered, by route pattern, method and status', labelNames: ['method', 'route', 'status'], registers })
    this.latency = new Histogram({
      name: 'mamkit_http_request_duration_seconds',
      help: 'time to the answer (a streamed body may take longer), by route pattern, method and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    })
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

  observe = (r: ObservedRequest): void => {
    const labels = { method: r.method, route: r.route ?? 'unmatched', status: String(r.status) }
    this.requests.inc(labels)
    this.latency.observe(labels, r.ms / 1000)
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
