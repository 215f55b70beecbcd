import type { Logger } from 'pino'
import type { ProjectRun, StrategyRuns } from '../strategies/index.js'
import { nextRuns, type ScheduleRow, type ScheduleService } from './service.js'

import { type FeatureService, type Knex } from '../../core/index.js'

/** due schedules one tick takes at most (the rest wait for the next tick) */
const BATCH = 20

export interface TickResult {
  /** ids of the schedules this tick claimed and ran */
  ran: number[]
}

/**
 * Fires due schedules. Every process runs a timer (`tickMs`); a tick reads the schedules whose
 * `next_run_at` has passed and claims each with one conditional update that moves `next_run_at`
 * on from the value it read: of two processes (or two ticks) that read the same row, one update
 * matches and the other changes nothing, so a run is fired once. The next slot is computed from
 * now, not from the missed one: after downtime a schedule runs once, then keeps its rhythm.
 */
export class Scheduler {
  private timer?: NodeJS.Timeout
  private ticking?: Promise<TickResult>
  private stopped = false

  constructor(
    private readonly knex: Knex,
    private readonly schedules: ScheduleService,
    private readonly runs: () => StrategyRuns,
    private readonly features: FeatureService,
    private readonly log: Logger,
    private readonly tickMs: () => number,
  ) {}

  /** the first tick at once (runs missed while no process was up), then every `tickMs`; 0 turns this process's timer off */
  start(): void {
    if (this.stopped || this.timer || this.tickMs() <= 0) return
    const loop = () => {
      this.timer = setTimeout(async () => {
        await this.tickOnce().catch((err) => this.log.error({ err }, 'schedules: tick failed'))
        if (!this.stopped) loop()
      }, this.timer ? this.tickMs() : 0)
      this.timer.unref()
    }
    loop()
  }

  /** stops the timer and waits for a tick in flight (runtime close) */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.ticking?.catch(() => {})
  }

  /** one tick; a tick of this process still running is joined rather than doubled */
  tickOnce(now?: Date): Promise<TickResult> {
    this.ticking ??= this.tick(now).finally(() => (this.ticking = undefined))
    return this.ticking
  }

  /** reads due schedules and fires those this call claims; public so two ticks can be raced in tests */
  async tick(now = new Date()): Promise<TickResult> {
    if (!this.features.isActive('schedules')) return { ran: [] }
    const due = await this.knex('schedules').where({ enabled: true }).andWhere('next_run_at', '<=', now).orderBy('next_run_at').limit(BATCH)
    const ran: number[] = []
    for (const row of due) {
      const s = (await this.schedules.get(Number(row.id)).catch(() => null)) as ScheduleRow | null
      if (!s || !(await this.claim(s, row.next_run_at, now))) continue
      ran.push(s.id)
      // one schedule's failure (deleted while it fired, the database away) must not hold up the others
      await this.fire(s, now).catch((err) => this.log.error({ err, schedule: s.id }, 'schedules: a run could not be recorded'))
    }
    return { ran }
  }

  /** moves next_run_at on from the value read; true when this call did it */
  private async claim(s: ScheduleRow, seen: unknown, now: Date): Promise<boolean> {
    let next: Date | null = null
    try {
      next = nextRuns(s.cron, s.time_zone, now)[0] ?? null
    } catch (err) {
      // stored expressions were validated; a zone the runtime no longer knows stops the schedule, saying why
      this.log.warn({ err, schedule: s.id }, 'schedules: next run not computable')
    }
    const n = await this.knex('schedules')
      .where({ id: s.id, enabled: true, next_run_at: seen })
      .update({ next_run_at: next, last_run_at: now, last_status: 'running', last_error: null, updated_at: now })
    return n === 1
  }

  /** one run: the selection now, the strategy's job for each project (or why not), recorded */
  private async fire(s: ScheduleRow, now: Date): Promise<void> {
    const [run] = await this.knex('schedule_runs')
      .insert({ schedule_id: s.id, due_at: s.next_run_at ?? now, started_at: now, status: 'running', outcomes: '[]', created_at: now, updated_at: now })
      .returning('id')
    const runId = Number(typeof run === 'object' ? run.id : run)
    let outcomes: ProjectRun[] = []
    let error: string | null = null
    try {
      if (s.strategy_type !== 'tier' && s.strategy_id === null) throw new Error(`the ${s.strategy_type.replace(/_/g, ' ')} strategy of this schedule was deleted`)
      const projects = await this.schedules.selectProjects(s.selection, now)
      const target = s.strategy_type === 'tier' ? { storage: s.storage ?? '' } : { strategyId: s.strategy_id! }
      outcomes = await this.runs().runOn(s.strategy_type, target, projects, s.user_id)
    } catch (err) {
      error = (err as Error).message
      this.log.warn({ err, schedule: s.id }, 'schedules: run failed')
    }
    const queued = outcomes.filter((o): o is { project_id: number; job_id: number } => 'job_id' in o)
    const skipped = outcomes.length - queued.length
    const status = error ? 'failed' : !outcomes.length || !queued.length ? 'skipped' : skipped ? 'partial' : 'queued'
    const finished = new Date()
    await this.knex.transaction(async (trx) => {
      await trx('schedule_runs')
        .where({ id: runId })
        .update({ status, projects: outcomes.length, queued: queued.length, skipped, outcomes: JSON.stringify(outcomes), error, finished_at: finished, updated_at: finished })
      await trx('schedules')
        .where({ id: s.id })
        .update({ last_status: status, last_error: error ?? (skipped ? `${skipped} of ${outcomes.length} project(s) skipped; see the run's outcomes` : null), last_job_id: queued.at(-1)?.job_id ?? null, updated_at: finished })
    })
  }
}
