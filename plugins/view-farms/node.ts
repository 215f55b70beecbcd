import { hostname } from 'node:os'
import type { Logger } from 'pino'
import type { JobRunnerControl, Knex } from '../../core/index.js'
import { NODES } from './migrations.js'
import { CONTROL_TOPIC, FORGET_AFTER_MS, concurrencyOf, jsonColumn, type NodeRow } from './service.js'

const sameTypes = (a: string[] | null, b: string[] | null) => (a === null || b === null ? a === b : a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n'))

/**
 * This process as a node of the view farm. On the runner's own heartbeat tick (and at once when a
 * command's NOTIFY arrives) one statement writes the node's heartbeat, activity and running jobs
 * and reads back what the farm asks of it, which is then applied to the runner: claiming on or off,
 * concurrency, accepted job types, a drained restart. A row found gone means the node was revoked:
 * the runner stops claiming for good and hands back what it holds.
 */
export class FarmNode {
  private id?: number
  /** the restart generation this process has carried out (a higher one in the row asks for another) */
  private appliedGeneration = 0
  private round?: Promise<void>
  private again = false
  private restarting?: Promise<void>
  private revoked = false
  private failing = false
  private unsubscribe: Array<() => void> = []
  private readonly host = hostname().slice(0, 255)
  /** the process's own setting (config.jobs.concurrency), before the farm changed anything */
  private configuredConcurrency = 0

  constructor(
    private readonly knex: Knex,
    private readonly runner: JobRunnerControl,
    private readonly log: Logger,
    private readonly offlineAfterMs: () => number,
    private readonly active: () => boolean,
    /** the mamkit version this process runs */
    private readonly version: string,
  ) {}

  /**
   * Before the runner starts: it claims nothing until the node has registered and read what the farm
   * asks (a node stopped before this process restarted stays stopped). A registration that fails lets
   * the runner claim anyway: a farm that cannot be reached must not stop the jobs.
   */
  attach(): void {
    this.configuredConcurrency = this.runner.limits().concurrency
    this.runner.pause()
    this.unsubscribe.push(this.runner.onBeat(() => this.sync()))
    this.unsubscribe.push(this.runner.onControl((topic) => topic === CONTROL_TOPIC && this.sync()))
  }

  /** the node's id once registered */
  nodeId(): number | undefined {
    return this.id
  }

  /** one round at a time; a request meanwhile runs one more round after it */
  sync(): void {
    if (this.revoked) return
    if (this.round) {
      this.again = true
      return
    }
    this.round = this.beat()
      .then(() => {
        if (this.failing) this.log.info('view farm node reachable again')
        this.failing = false
      })
      .catch((err) => {
        if (!this.failing) this.log.warn({ err: { message: err?.message, code: err?.code } }, 'view farm node: heartbeat failed')
        this.failing = true
        // the farm could not be asked: the runner claims rather than waiting for it
        if (this.id === undefined) this.runner.resume()
      })
      .finally(() => {
        this.round = undefined
        if (this.again) {
          this.again = false
          this.sync()
        }
      })
  }

  private async beat() {
    // a switched-off farm steers nothing: the runner claims as configured
    if (!this.active()) return this.runner.resume()
    if (this.id === undefined) {
      this.apply(await this.register())
      this.again = true // report at once what the runner does now that it knows what the farm asks
      return
    }
    const now = new Date()
    const [row] = (await this.knex(NODES)
      .where({ id: this.id, worker_id: this.runner.workerId })
      .update({ heartbeat_at: now, activity: this.activity(), running_jobs: this.runningJobs(), updated_at: now })
      .returning('*')) as NodeRow[]
    if (!row) return this.detach()
    this.apply(row)
  }

  /**
   * Takes over the newest offline node of this host (its name, state, limits and accepted types
   * survive a restart of the process), else registers a new one. One statement each: two processes
   * starting at once on one host cannot take the same row (the WHERE is checked again on the locked
   * row on PostgreSQL; SQLite runs one writer at a time).
   */
  private async register(): Promise<NodeRow> {
    const now = new Date()
    const offline = (q: Knex.QueryBuilder) => q.where('heartbeat_at', '<', new Date(now.getTime() - this.offlineAfterMs())).orWhere('activity', 'exited')
    const identity = {
      worker_id: this.runner.workerId,
      pid: process.pid,
      process_started_at: new Date(Date.now() - process.uptime() * 1000),
      version: this.version.slice(0, 40),
      available_job_types: JSON.stringify(this.runner.jobTypes()),
      configured_concurrency: this.configuredConcurrency,
      activity: 'idle',
      running_jobs: '[]',
      heartbeat_at: now,
      restarted_at: null,
      updated_at: now,
    }
    await this.knex(NODES).where('heartbeat_at', '<', new Date(now.getTime() - FORGET_AFTER_MS)).delete()
    const newest = this.knex(NODES).select('id').where({ host_name: this.host }).where(offline).orderBy('heartbeat_at', 'desc').limit(1)
    let [row] = (await this.knex(NODES).whereIn('id', newest).where(offline).update(identity).returning('*')) as NodeRow[]
    if (row) this.log.info({ node: Number(row.id), name: row.name }, 'view farm: this process took over its host node')
    else {
      ;[row] = (await this.knex(NODES)
        .insert({ ...identity, name: this.host.slice(0, 100), host_name: this.host, job_types: null, concurrency: null, state: 'running', restart_generation: 0, created_at: now })
        .returning('*')) as NodeRow[]
      this.log.info({ node: Number(row.id) }, 'view farm: this process joined as a new node')
    }
    this.id = Number(row.id)
    this.appliedGeneration = Number(row.restart_generation)
    return row
  }

  /** what the farm asks, applied to the runner */
  private apply(row: NodeRow) {
    if (row.state === 'running') this.runner.resume()
    else this.runner.pause()
    const wanted = { concurrency: concurrencyOf(row), types: jsonColumn<string[] | null>(row.job_types) }
    const current = this.runner.limits()
    if (wanted.concurrency !== current.concurrency || !sameTypes(wanted.types, current.types)) {
      this.runner.configure(wanted)
      this.log.info({ node: this.id, ...wanted }, 'view farm: limits applied')
    }
    const generation = Number(row.restart_generation)
    if (generation > this.appliedGeneration && !this.restarting) {
      this.log.info({ node: this.id }, 'view farm: draining for a restart')
      this.restarting = this.runner
        .restart()
        .then(async () => {
          this.appliedGeneration = generation
          await this.knex(NODES).where({ id: this.id, worker_id: this.runner.workerId }).update({ restarted_at: new Date() })
          this.log.info({ node: this.id }, 'view farm: runner reloaded')
        })
        .catch((err) => this.log.error({ err }, 'view farm: restart failed'))
        .finally(() => {
          this.restarting = undefined
          this.sync() // reports the new activity, and a restart asked meanwhile
        })
    }
  }

  private activity(): string {
    if (this.restarting) return 'restarting'
    const state = this.runner.state()
    if (state.paused) return state.running ? 'draining' : 'idle'
    return 'claiming'
  }

  private runningJobs(): string {
    return JSON.stringify(this.runner.runningJobs().map((j) => ({ id: j.id, type: j.type, attempt: j.attempt, started_at: j.startedAt, progress: j.progress })))
  }

  private async detach() {
    this.revoked = true
    this.log.warn({ node: this.id }, 'view farm: this node was revoked; it claims no more jobs and hands back what it holds')
    await this.runner.detach()
  }

  /** at shutdown (after the runner handed its jobs back): the node shows offline at once */
  async close(): Promise<void> {
    for (const off of this.unsubscribe) off()
    this.revoked = true
    await this.round
    await this.restarting
    if (this.id === undefined) return
    const now = new Date()
    await this.knex(NODES)
      .where({ id: this.id, worker_id: this.runner.workerId })
      .update({ activity: 'exited', running_jobs: '[]', heartbeat_at: now, updated_at: now })
      .catch((err: Error) => this.log.warn({ err: { message: err.message } }, 'view farm: could not mark the node exited'))
  }
}
