import { Cron } from 'croner'
import type { Static } from 'typebox'
import { RUNNABLE_KINDS, type RunnableKind, type StrategyService } from '../strategies/index.js'
import type { Selection, ScheduleFields } from './schemas.js'

import { MamError, column, conflict, invalid, isUniqueViolation, iso, notFound, type Knex, type ParamError, type StorageRegistry } from '../../core/index.js'

export type ScheduleSelection = Static<typeof Selection>
export type ScheduleInputFields = Static<typeof ScheduleFields>

/** the most projects one run takes (a selection evaluated against a large library stays bounded) */
export const MAX_PROJECTS_PER_RUN = 1000
const DAY_MS = 86_400_000

export interface ScheduleRow {
  id: number
  name: string
  cron: string
  time_zone: string
  strategy_type: RunnableKind
  strategy_id: number | null
  storage: string | null
  selection: ScheduleSelection
  enabled: boolean
  user_id: number | null
  /** as the driver gave it (the claim compares it unchanged) */
  next_run_at_raw: unknown
  next_run_at: Date | null
  last_run_at: Date | null
  last_status: string | null
  last_job_id: number | null
  last_error: string | null
  created_at: Date
  updated_at: Date
}

const fromDb = (r: any): ScheduleRow => ({
  id: Number(r.id),
  name: r.name,
  cron: r.cron,
  time_zone: r.time_zone,
  strategy_type: r.strategy_type,
  strategy_id: column.intOrNull(r.strategy_id),
  storage: r.storage ?? null,
  selection: column.json(r.selection, {}),
  enabled: column.bool(r.enabled),
  user_id: column.intOrNull(r.user_id),
  next_run_at_raw: r.next_run_at,
  next_run_at: column.date(r.next_run_at),
  last_run_at: column.date(r.last_run_at),
  last_status: r.last_status,
  last_job_id: column.intOrNull(r.last_job_id),
  last_error: r.last_error,
  created_at: column.date(r.created_at)!,
  updated_at: column.date(r.updated_at)!,
})

/** whether the runtime knows this IANA zone (croner would only fail later, when it computes a date) */
function knownTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone })
    return true
  } catch {
    return false
  }
}

/** the runs of `cron` in `zone` after `from`; a pattern croner refuses throws its message */
export function nextRuns(cron: string, zone: string, from: Date, count = 1): Date[] {
  const job = new Cron(cron, { timezone: zone, paused: true })
  try {
    return job.nextRuns(count, from)
  } finally {
    job.stop()
  }
}

/**
 * Schedules (§4.22): a cron expression read in a time zone, bound to a strategy of a kind and a
 * selection of projects evaluated when a run fires. Validation names the parameters as clients send
 * them (`schedule[cron]`); `next_run_at` is kept in the row, since that column is what processes
 * claim runs on (see Scheduler).
 */
export class ScheduleService {
  constructor(
    private readonly knex: Knex,
    private readonly strategies: StrategyService,
    private readonly storages: StorageRegistry,
  ) {}

  async list(): Promise<ScheduleRow[]> {
    return (await this.knex('schedules').orderBy('name')).map(fromDb)
  }

  async get(id: number): Promise<ScheduleRow> {
    const r = await this.knex('schedules').where({ id }).first()
    if (!r) throw notFound('schedule', id)
    return fromDb(r)
  }

  async create(fields: ScheduleInputFields, userId: number, now = new Date()): Promise<ScheduleRow> {
    const values = await this.validate(fields, null, now)
    try {
      const [row] = await this.knex('schedules').insert({ ...values, user_id: userId, created_at: now, updated_at: now }).returning('id')
      return this.get(Number(typeof row === 'object' ? row.id : row))
    } catch (err) {
      throw isUniqueViolation(err) ? nameTaken(values.name as string) : err
    }
  }

  async update(id: number, fields: ScheduleInputFields, now = new Date()): Promise<ScheduleRow> {
    const current = await this.get(id)
    const values = await this.validate(fields, current, now)
    try {
      const n = await this.knex('schedules').where({ id }).update({ ...values, updated_at: now })
      if (!n) throw notFound('schedule', id)
    } catch (err) {
      throw isUniqueViolation(err) ? nameTaken(values.name as string) : err
    }
    return this.get(id)
  }

  async remove(id: number): Promise<ScheduleRow> {
    const row = await this.get(id)
    // a run being recorded meanwhile loses its rows with the schedule (cascade): nothing dangles
    const n = await this.knex('schedules').where({ id }).delete()
    if (!n) throw notFound('schedule', id)
    return row
  }

  /** checks every field (all errors at once) and answers the columns to write; `next_run_at` follows cron, zone and enabled */
  private async validate(f: ScheduleInputFields, current: ScheduleRow | null, now: Date): Promise<Record<string, unknown>> {
    const errors: ParamError[] = []
    const out: Record<string, unknown> = {}
    const need = (name: keyof ScheduleInputFields) => {
      if (!current && f[name] === undefined) errors.push({ param: `schedule[${name}]`, message: 'is required' })
    }
    ;(['name', 'cron', 'strategy_type', 'selection'] as const).forEach(need)

    if (f.name !== undefined) {
      const name = f.name.normalize('NFC').trim()
      if (!name) errors.push({ param: 'schedule[name]', message: 'must not be blank' })
      out.name = name
    }
    const zone = f.time_zone ?? current?.time_zone ?? 'UTC'
    const zoneOk = knownTimeZone(zone)
    if (!zoneOk) errors.push({ param: 'schedule[time_zone]', message: `"${zone.slice(0, 64)}" is not an IANA time zone this server knows (e.g. Europe/Berlin, America/New_York, UTC)` })
    if (f.time_zone !== undefined) out.time_zone = zone
    else if (!current) out.time_zone = 'UTC'
    const cron = f.cron?.trim() ?? current?.cron
    let next: Date | null | undefined
    if (cron !== undefined && zoneOk) {
      try {
        next = nextRuns(cron, zone, now)[0] ?? null
        if (next === null) errors.push({ param: 'schedule[cron]', message: 'never fires (no date matches it)' })
      } catch (err) {
        errors.push({ param: 'schedule[cron]', message: `is not a cron expression croner reads: ${(err as Error).message.replace(/^CronPattern: /, '')}` })
      }
    }
    if (f.cron !== undefined) out.cron = cron

    let kind = current?.strategy_type
    if (f.strategy_type !== undefined) {
      if ((RUNNABLE_KINDS as readonly string[]).includes(f.strategy_type)) kind = out.strategy_type = f.strategy_type as RunnableKind
      else {
        kind = undefined
        errors.push({ param: 'schedule[strategy_type]', message: `must be one of ${RUNNABLE_KINDS.join(', ')}` })
      }
    }
    if (kind === 'tier') {
      // a tier moves projects to a storage; it has no strategy
      const storage = f.storage ?? current?.storage ?? undefined
      if (f.strategy_id !== undefined) errors.push({ param: 'schedule[strategy_id]', message: 'a tier takes no strategy; name the storage (schedule[storage])' })
      if (storage === undefined) errors.push({ param: 'schedule[storage]', message: 'is required for a tier: the storage the projects move to' })
      else if (!this.storages.list().some((st) => st.name === storage)) errors.push({ param: 'schedule[storage]', message: `is not a configured storage (known: ${this.storages.list().map((st) => st.name).join(', ')})` })
      else out.storage = storage
      out.strategy_id = null
    } else if (kind) {
      const strategyId = f.strategy_id ?? current?.strategy_id ?? undefined
      if (f.storage !== undefined) errors.push({ param: 'schedule[storage]', message: 'is for tier schedules only' })
      if (strategyId === undefined) {
        if (!current || f.strategy_type !== undefined) errors.push({ param: 'schedule[strategy_id]', message: 'is required' })
      } else if (f.strategy_id !== undefined || f.strategy_type !== undefined) {
        const found = await this.strategies.get(kind, strategyId).catch((err) => {
          if (err instanceof MamError && err.code === 'not_found') return null
          throw err
        })
        if (!found) errors.push({ param: 'schedule[strategy_id]', message: `is not a known ${kind.replace(/_/g, ' ')} strategy` })
        else out.strategy_id = strategyId
      }
      out.storage = null
    } else if (!current && f.strategy_id === undefined && f.strategy_type === undefined) errors.push({ param: 'schedule[strategy_id]', message: 'is required' })

    if (f.selection !== undefined) {
      await this.checkSelection(f.selection, errors)
      out.selection = JSON.stringify(f.selection)
    }
    if (f.enabled !== undefined) out.enabled = f.enabled
    if (errors.length) throw invalid(errors)

    // the next run moves when what decides it changed (or when the schedule is switched back on)
    const enabled = f.enabled ?? current?.enabled ?? true
    if (!current || f.cron !== undefined || f.time_zone !== undefined || f.enabled !== undefined) out.next_run_at = enabled ? next : null
    return out
  }

  private async checkSelection(sel: ScheduleSelection, errors: ParamError[]) {
    const given = Object.entries(sel).filter(([, v]) => v !== undefined)
    if (!given.length) {
      errors.push({ param: 'schedule[selection]', message: 'needs at least one of status_flag_id, older_than_days, project_ids, library, parent_id (a schedule never takes every project by default)' })
      return
    }
    if (sel.status_flag_id !== undefined && !(await this.knex('status_flags').where({ id: sel.status_flag_id }).first('id')))
      errors.push({ param: 'schedule[selection][status_flag_id]', message: 'is not a known status flag' })
    if (sel.parent_id !== undefined && !(await this.knex('projects').where({ id: sel.parent_id, deleted: false }).first('id')))
      errors.push({ param: 'schedule[selection][parent_id]', message: 'is not a known project' })
  }

  /** the projects the selection takes now (not deleted), by id, at most MAX_PROJECTS_PER_RUN */
  async selectProjects(sel: ScheduleSelection, now = new Date()): Promise<number[]> {
    const q = this.knex('projects as p').where('p.deleted', false).orderBy('p.id').limit(MAX_PROJECTS_PER_RUN)
    if (sel.project_ids) q.whereIn('p.id', sel.project_ids)
    if (sel.library !== undefined) q.where('p.is_library_project', sel.library)
    if (sel.parent_id !== undefined) q.where('p.parent_id', sel.parent_id)
    if (sel.status_flag_id !== undefined) q.whereExists(this.knex('project_status_flags as f').whereRaw('f.project_id = p.id').andWhere('f.status_flag_id', sel.status_flag_id).select(this.knex.raw('1')))
    if (sel.older_than_days !== undefined) {
      const before = new Date(now.getTime() - sel.older_than_days * DAY_MS)
      q.where('p.created_at', '<', before).andWhere((w) => w.whereNull('p.last_used_at').orWhere('p.last_used_at', '<', before))
    }
    return (await q.pluck('p.id')).map(Number)
  }

  async recentRuns(scheduleId: number, limit = 10) {
    const rows = await this.knex('schedule_runs').where({ schedule_id: scheduleId }).orderBy('id', 'desc').limit(limit)
    return rows.map((r: any) => ({
      id: Number(r.id),
      due_at: iso(column.date(r.due_at)),
      started_at: iso(column.date(r.started_at)),
      finished_at: iso(column.date(r.finished_at)),
      status: r.status,
      projects: Number(r.projects),
      queued: Number(r.queued),
      skipped: Number(r.skipped),
      outcomes: column.json(r.outcomes, []),
      error: r.error,
    }))
  }

  /** the wire shape (root key `schedule`, list `schedules`), with the next few run times */
  serialize(s: ScheduleRow, now = new Date()) {
    let upcoming: Date[] = []
    if (s.enabled) {
      try {
        upcoming = nextRuns(s.cron, s.time_zone, now, 3)
      } catch {
        // a zone this runtime no longer knows (an older tz database); the row's next_run_at still shows
      }
    }
    return {
      id: s.id,
      name: s.name,
      cron: s.cron,
      time_zone: s.time_zone,
      strategy_type: s.strategy_type,
      strategy_id: s.strategy_id,
      storage: s.storage,
      selection: s.selection,
      enabled: s.enabled,
      user_id: s.user_id,
      next_run_at: iso(s.next_run_at),
      next_runs: upcoming.map((d) => d.toISOString()),
      last_run_at: iso(s.last_run_at),
      last_status: s.last_status,
      last_job_id: s.last_job_id,
      last_error: s.last_error,
      created_at: iso(s.created_at),
      updated_at: iso(s.updated_at),
    }
  }
}

const nameTaken = (name: string) => conflict(`A schedule named "${name}" exists`, { errors: [{ param: 'schedule[name]', message: 'is taken' }] })
