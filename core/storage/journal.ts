import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { Dialect, Knex } from '../db/orm.js'
import { MamError } from '../errors.js'

const TABLE = 'storage_journal'
/** entries of `hold`: nothing to repair, a dead holder's entry just ends */
const HOLD_KIND = 'storage.hold'

export interface JournalEntry<P = unknown> {
  id: number
  kind: string
  scope: string | null
  payload: P
  createdAt: Date
}

/**
 * Makes the database follow what a cut-short operation left on disk, and ends the entry with
 * `journal.end(trx, entry)` in the transaction that writes the rows. Runs after a crash (the entry's
 * lease lapsed) and at once when the operation itself failed, so it must decide everything from
 * the disk and the entry, and be idempotent.
 */
export type JournalRepair<P> = (entry: JournalEntry<P>) => Promise<void>

export interface RunOptions {
  /** entries with the same scope wait for each other when either is exclusive (`project:12`) */
  scope?: string
  exclusive?: boolean
}

/**
 * Write-ahead intents for file operations whose rows must change with the files (a folder move and
 * the asset rows below it, an upload and its row). An entry is committed before the file system
 * changes and removed in the transaction that writes the rows; a crash in between leaves the entry,
 * and whoever finds it once its lease lapsed (the next start, or the periodic sweep of any process
 * sharing the database) runs the kind's repair. Leases are renewed while the operation runs and
 * every write is fenced by `owner`, like job leases. Resolved as `storageJournal`.
 */
export class StorageJournal {
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
  private readonly repairs = new Map<string, JournalRepair<any>>()
  private sweeper?: NodeJS.Timeout
  private sweeping?: Promise<number>
  /**
   * This process's operations and repairs still running (their leases are renewed). An entry of this process
   * that is not among them was left behind by an operation that finished without ending it (an
   * upload whose rows committed while the full disk refused the entry's deletion): it is repaired
   * like a dead process's, instead of waiting for a restart while it holds its scope.
   */
  private readonly live = new Set<number>()

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly leaseMs: number,
    private readonly log: Logger,
    /** how long an operation waits for a conflicting one in its scope before answering 409 */
    private readonly waitMs = 10_000,
  ) {
    this.define(HOLD_KIND, (entry) => this.end(this.knex, entry))
  }

  define<P>(kind: string, repair: JournalRepair<P>): void {
    this.repairs.set(kind, repair)
  }

  /**
   * Runs `work` holding `scope` (shared unless `exclusive`), for work that leaves nothing to repair
   * but must not run beside an exclusive operation of the scope (a walk of a tree that is being
   * moved, a folder made in it).
   */
  hold<T>(scope: string, options: { exclusive?: boolean }, work: () => Promise<T>): Promise<T> {
    return this.run(HOLD_KIND, {}, { scope, exclusive: options.exclusive }, async (entry) => {
      try {
        return await work()
      } finally {
        await this.end(this.knex, entry).catch(() => {})
      }
    })
  }

  /**
   * Runs `work` under a new entry, which `work` must end (`end`) in the transaction that writes its
   * rows. When `work` throws, the entry is repaired at once and the error rethrown.
   */
  async run<P, T>(kind: string, payload: P, options: RunOptions, work: (entry: JournalEntry<P>) => Promise<T>): Promise<T> {
    const entry = await this.begin(kind, payload, options)
    const stop = this.keepAlive(entry.id)
    this.live.add(entry.id)
    try {
      return await work(entry)
    } catch (err) {
      await this.repairNow(entry)
      throw err
    } finally {
      this.live.delete(entry.id)
      stop()
    }
  }

  /** ends the entry inside the transaction that writes the rows; throws (rolling it back) when another process took the entry over */
  async end(trx: Knex, entry: JournalEntry<unknown>): Promise<void> {
    const n = await trx(TABLE).where({ id: entry.id, owner: this.owner }).delete()
    if (n !== 1) throw new MamError('conflict', 'The operation was taken over by a repair after its lease lapsed; nothing was changed by this request')
  }

  /** records progress (what a repair needs to know) in the entry, in `trx` when it must commit with rows */
  async update<P>(entry: JournalEntry<P>, payload: P, trx: Knex = this.knex): Promise<void> {
    const n = await trx(TABLE).where({ id: entry.id, owner: this.owner }).update({ payload: JSON.stringify(payload), updated_at: new Date() })
    if (n !== 1) throw new MamError('conflict', 'The operation was taken over by a repair after its lease lapsed')
    entry.payload = payload
  }

  /** repairs every entry whose lease lapsed (processes that died); returns how many */
  reconcile(): Promise<number> {
    // one sweep at a time per process: the start-up call and the timer may meet
    this.sweeping ??= this.sweep().finally(() => (this.sweeping = undefined))
    return this.sweeping
  }

  /** sweeps every lease period, so entries of a process that died are repaired without waiting for a restart */
  startSweeping(): void {
    if (this.sweeper) return
    this.sweeper = setInterval(() => {
      this.reconcile().catch((err) => this.log.warn({ err }, 'storage journal sweep failed'))
    }, this.leaseMs)
    this.sweeper.unref()
  }

  close(): void {
    clearInterval(this.sweeper)
    this.sweeper = undefined
  }

  private async sweep(): Promise<number> {
    // this process's running operations are alive while it is (a stalled event loop can let their leases lapse)
    const lapsed = await this.knex(TABLE).where('lease_until', '<', new Date()).whereIn('kind', [...this.repairs.keys()]).orderBy('id').limit(100)
    let repaired = 0
    for (const row of lapsed) if (this.leftBehind(row) && (await this.takeOverAndRepair(row))) repaired++
    return repaired
  }

  /** an entry of another process, or one of this process's that no running operation holds */
  private leftBehind(row: Record<string, any>): boolean {
    return row.owner !== this.owner || !this.live.has(Number(row.id))
  }

  /** repairs an entry whose lease lapsed, unless another process takes it over first; true when repaired here */
  private async takeOverAndRepair(row: Record<string, any>): Promise<boolean> {
    const repair = this.repairs.get(row.kind)
    if (!repair || !this.leftBehind(row)) return false
    const taken = await this.knex(TABLE)
      .where({ id: row.id, owner: row.owner }) // fenced: another process that took it over first changed the owner
      .where('lease_until', '<', new Date())
      .update({ owner: this.owner, lease_until: this.leaseEnd(), updated_at: new Date() })
    if (taken !== 1) return false
    const entry = toEntry(row)
    this.log.warn({ kind: entry.kind, id: entry.id, scope: entry.scope }, 'repairing a file operation that a crash cut short')
    const stop = this.keepAlive(entry.id)
    this.live.add(entry.id) // a repair running here is a running operation too
    try {
      await repair(entry)
      return true
    } catch (err) {
      // the entry stays; its lease lapses and the next sweep tries again
      this.log.error({ err, kind: entry.kind, id: entry.id }, 'repairing a file operation failed')
      return false
    } finally {
      this.live.delete(entry.id)
      stop()
    }
  }

  private async repairNow(entry: JournalEntry<unknown>): Promise<void> {
    const repair = this.repairs.get(entry.kind)
    try {
      // the work may have ended its entry before it failed
      const mine = await this.knex(TABLE).where({ id: entry.id, owner: this.owner }).first('id')
      if (repair && mine) await repair(entry)
    } catch (err) {
      this.log.error({ err, kind: entry.kind, id: entry.id }, 'repairing a failed file operation failed; the sweep tries again')
    }
  }

  /**
   * Inserts the entry unless a conflicting live entry holds the scope, else waits and tries again
   * (409 with Retry-After after `waitMs`). Check and insert are one transaction that no other
   * check of the scope can interleave with: SQLite runs one writer at a time (the insert comes
   * first, so the transaction holds the write lock while it checks), PostgreSQL takes an advisory
   * lock on the scope for the transaction. An entry whose lease lapsed (its process died) is
   * repaired first, before this operation touches the same tree.
   */
  private async begin<P>(kind: string, payload: P, options: RunOptions): Promise<JournalEntry<P>> {
    const scope = options.scope ?? null
    const exclusive = options.exclusive ?? false
    const deadline = Date.now() + this.waitMs
    for (;;) {
      const now = new Date()
      const row = { kind, scope, exclusive, payload: JSON.stringify(payload), owner: this.owner, lease_until: this.leaseEnd(), created_at: now, updated_at: now }
      const outcome = await this.knex
        .transaction(async (trx) => {
          if (scope !== null && this.dialect === 'postgresql') await trx.raw('select pg_advisory_xact_lock(?, hashtext(?))', [SCOPE_LOCK, scope])
          const [inserted] = await trx(TABLE).insert(row).returning('id')
          const id = Number(typeof inserted === 'object' ? inserted.id : inserted)
          if (scope === null) return id
          const conflicting = await trx(TABLE).where({ scope }).whereNot({ id }).where((q) => (exclusive ? q : q.where({ exclusive: true })))
          // an entry of a dead process holds the scope only when it can be repaired (its plugin is loaded)
          const holders = conflicting.filter((c: Record<string, any>) => toEntry(c).leaseUntil >= Date.now() || this.repairs.has(c.kind))
          if (holders.length) throw new ScopeHeld(holders)
          return id
        })
        .catch((err) => {
          if (err instanceof ScopeHeld) return err
          throw err
        })
      if (!(outcome instanceof ScopeHeld)) return { id: outcome, kind, scope, payload, createdAt: now }
      const dead = outcome.holders.filter((h) => toEntry(h).leaseUntil < Date.now() && this.leftBehind(h))
      let repaired = false
      for (const h of dead) repaired = (await this.takeOverAndRepair(h)) || repaired
      if (repaired) continue
      if (Date.now() > deadline) throw new MamError('conflict', `Another file operation is running in ${scope}; try again shortly`, { headers: { 'Retry-After': '1' } })
      await sleep(10 + Math.random() * 20)
    }
  }

  private keepAlive(id: number): () => void {
    const timer = setInterval(() => {
      this.knex(TABLE)
        .where({ id, owner: this.owner })
        .update({ lease_until: this.leaseEnd(), updated_at: new Date() })
        .catch((err) => this.log.warn({ err, id }, 'could not renew a storage journal lease'))
    }, Math.max(50, Math.floor(this.leaseMs / 3)))
    timer.unref()
    return () => clearInterval(timer)
  }

  private leaseEnd(): Date {
    return new Date(Date.now() + this.leaseMs)
  }
}

/** thrown inside the transaction of `begin` to undo its insert */
class ScopeHeld extends Error {
  constructor(readonly holders: Array<Record<string, any>>) {
    super('scope held')
  }
}

// the first key of the advisory lock that serialises the checks of one scope (PostgreSQL)
const SCOPE_LOCK = 7_005_002

const time = (v: unknown) => (v instanceof Date ? v : new Date(typeof v === 'string' && !/^\d+$/.test(v) ? v : Number(v)))

const toEntry = (row: Record<string, any>): JournalEntry<any> & { leaseUntil: number } => ({
  id: Number(row.id),
  kind: row.kind,
  scope: row.scope ?? null,
  payload: JSON.parse(row.payload),
  createdAt: time(row.created_at),
  leaseUntil: time(row.lease_until).getTime(),
})
