import { conflict, invalidParam, notFound, type JobService, type Knex } from '../../core/index.js'
import { NODES } from './migrations.js'

/** what the farm asks of a node */
export type NodeState = 'running' | 'paused' | 'stopped'
/** the control topic every node listens to (JobService.notifyControl): "read your row now" */
export const CONTROL_TOPIC = 'view-farms'
/** nodes of processes gone this long are forgotten when another process registers */
export const FORGET_AFTER_MS = 7 * 24 * 3600_000

/** a node row as the drivers return it */
export interface NodeRow {
  id: number | string
  name: string
  host_name: string
  worker_id: string
  pid: number | string
  process_started_at: Date | number | string
  version: string
  available_job_types: unknown
  job_types: unknown
  concurrency: number | string | null
  configured_concurrency: number | string
  state: NodeState
  restart_generation: number | string
  activity: string
  running_jobs: unknown
  heartbeat_at: Date | number | string
  restarted_at: Date | number | string | null
  created_at: Date | number | string
  updated_at: Date | number | string
}

export interface NodeChange {
  name?: string
  concurrency?: number | null
  job_types?: string[] | null
}

/** JSON columns come back as text on SQLite and as values on PostgreSQL */
/** jobs at once: as the farm set it, else the process's own setting */
export const concurrencyOf = (row: NodeRow) => Number(row.concurrency ?? row.configured_concurrency)
export const jsonColumn = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T
const time = (value: Date | number | string) => (value instanceof Date ? value.getTime() : new Date(value).getTime())

/**
 * The farm as the API sees it: every node's row, and the commands that change what a node is asked
 * to do. Nodes read their own row on every heartbeat (and at once on a control NOTIFY), so a
 * command is one write here and is applied by the process it concerns (node.ts).
 */
export class ViewFarmService {
  constructor(
    private readonly knex: Knex,
    private readonly jobs: JobService,
    /** a node whose heartbeat is older than this is offline */
    readonly offlineAfterMs: () => number,
  ) {}

  /** whether the node's process is alive: it beats, and it did not exit */
  isOnline(row: NodeRow, now = Date.now()): boolean {
    return row.activity !== 'exited' && now - time(row.heartbeat_at) <= this.offlineAfterMs()
  }

  listQuery(): Knex.QueryBuilder {
    return this.knex(NODES).select('*')
  }

  async get(id: number): Promise<NodeRow> {
    const row = await this.knex(NODES).where({ id }).first()
    if (!row) throw notFound('view farm node', id)
    return row
  }

  /** name, concurrency, accepted job types: the process applies them at its next heartbeat or NOTIFY */
  async update(id: number, change: NodeChange): Promise<NodeRow> {
    const row = await this.get(id)
    const set: Record<string, unknown> = { updated_at: new Date() }
    if (change.name !== undefined) set.name = change.name
    if (change.concurrency !== undefined) set.concurrency = change.concurrency
    if (change.job_types !== undefined) {
      if (change.job_types !== null) {
        const known = new Set(jsonColumn<string[]>(row.available_job_types))
        const unknown = change.job_types.filter((type) => !known.has(type))
        if (unknown.length) throw invalidParam('viewfarmnode[job_types]', `the node runs no job of type ${unknown.map((u) => `"${u}"`).join(', ')}`)
      }
      set.job_types = change.job_types === null ? null : JSON.stringify([...new Set(change.job_types)])
    }
    return this.changed(id, await this.knex(NODES).where({ id }).update(set).returning('*'))
  }

  /** start (running), stop (stopped): running jobs of a stopped node finish, nothing new is claimed */
  async setState(id: number, state: NodeState): Promise<NodeRow> {
    return this.changed(id, await this.knex(NODES).where({ id }).update({ state, updated_at: new Date() }).returning('*'))
  }

  /** the node drains, reloads its runner (a new worker pool) and claims again; nothing is handed back */
  async restart(id: number): Promise<NodeRow> {
    const row = await this.get(id)
    if (!this.isOnline(row)) throw conflict(`View farm node ${id} is offline; there is no process to restart`, { state: 'offline' })
    const rows = await this.knex(NODES)
      .where({ id })
      .update({ restart_generation: this.knex.raw('restart_generation + 1'), updated_at: new Date() })
      .returning('*')
    return this.changed(id, rows)
  }

  /** pause_all (running → paused) and unpause_all (paused → running); stopped nodes stay stopped */
  async moveAll(from: NodeState, to: NodeState): Promise<NodeRow[]> {
    const rows: NodeRow[] = await this.knex(NODES).where({ state: from }).update({ state: to, updated_at: new Date() }).returning('*')
    if (rows.length) await this.jobs.notifyControl(CONTROL_TOPIC)
    return rows.sort((a, b) => Number(a.id) - Number(b.id))
  }

  /**
   * Detaches a node: its row goes, the jobs its process holds are handed back for other nodes to
   * retry (attempt not counted), and the process, finding its row gone, stops claiming for good and
   * hands back whatever it claimed meanwhile.
   */
  async revoke(id: number): Promise<{ node: NodeRow; released: number[] }> {
    const node = await this.get(id)
    // of two revokes at once, the one whose delete found the row detaches the node
    if (!(await this.knex(NODES).where({ id }).delete())) throw notFound('view farm node', id)
    const released = await this.jobs.releaseWorker(node.worker_id)
    await this.jobs.notifyControl(CONTROL_TOPIC)
    return { node, released }
  }

  /** a write of one node: 404 when it was revoked meanwhile, else every node is told to look */
  private async changed(id: number, rows: NodeRow[]): Promise<NodeRow> {
    if (!rows.length) throw notFound('view farm node', id)
    await this.jobs.notifyControl(CONTROL_TOPIC)
    return rows[0]
  }
}
