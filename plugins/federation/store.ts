import { type Dialect, type Knex } from '../../core/index.js'
import { Hlc } from './hlc.js'
import { bucketOf, canonical, checksumOf, emptyState, merge, parseState, resolve, write, xorChecksums, type RecordState, type TypeRules, type Value } from './kernel.js'
import { TABLES } from './migrations.js'
import { shortIdOf } from './site.js'

/** a replicated record as it travels between sites */
export interface WireCrdt {
  uuid: string
  type: string
  origin_site: string
  owner_site: string
  state: string
}

export interface StateRow {
  id: number
  uuid: string
  type: string
  origin_site: string
  owner_site: string
  state: string
  checksum: string
  bucket: number
  local_seq: number
  deleted: boolean
  schema_v: number
  local_id: number | null
  local_values: string | null
}

export interface MergeOutcome {
  uuid: string
  type: string
  /** the stored state changed (new local_seq) */
  changed: boolean
  before: RecordState | undefined
  after: RecordState
  row: StateRow
}

const rowOf = (r: any): StateRow => ({
  ...r,
  id: Number(r.id),
  bucket: Number(r.bucket),
  local_seq: Number(r.local_seq),
  deleted: Boolean(r.deleted),
  schema_v: Number(r.schema_v),
  local_id: r.local_id === null || r.local_id === undefined ? null : Number(r.local_id),
})

export const toWire = (r: StateRow): WireCrdt => ({ uuid: r.uuid, type: r.type, origin_site: r.origin_site, owner_site: r.owner_site, state: r.state })

/**
 * `federation_crdt_state`: every replicated record's canonical state, checksum, bucket and the
 * commit-ordered `local_seq` of its last change here (FEDERATION.md §4). Local writes and remote
 * merges go through this one class, inside the caller's transaction.
 */
export class CrdtStore {
  constructor(
    private readonly knex: Knex,
    readonly hlc: Hlc,
    private readonly rulesOf: (type: string) => TypeRules,
    private readonly dialect: Dialect,
  ) {}

  /** the next change number, taken last in the transaction: the counter row stays locked until commit, so numbers become visible in commit order (§5.1) */
  private async nextSeq(db: Knex): Promise<number> {
    await db(TABLES.seq).where({ id: 1 }).increment('n', 1)
    const row = await db(TABLES.seq).where({ id: 1 }).first('n')
    return Number(row.n)
  }

  async currentSeq(db: Knex = this.knex): Promise<number> {
    const row = await db(TABLES.seq).where({ id: 1 }).first('n')
    return Number(row?.n ?? 0)
  }

  /** the row, locked for the rest of the transaction on PostgreSQL (SQLite has one writer) */
  async lock(db: Knex, uuid: string): Promise<StateRow | undefined> {
    const q = db(TABLES.state).where({ uuid })
    const row = await (this.dialect === 'postgresql' ? q.forUpdate() : q).first()
    return row ? rowOf(row) : undefined
  }

  async get(uuid: string, db: Knex = this.knex): Promise<StateRow | undefined> {
    const row = await db(TABLES.state).where({ uuid }).first()
    return row ? rowOf(row) : undefined
  }

  async byLocalId(db: Knex, type: string, localId: number): Promise<StateRow | undefined> {
    const row = await db(TABLES.state).where({ type, local_id: localId }).first()
    return row ? rowOf(row) : undefined
  }

  async ofType(db: Knex, type: string): Promise<StateRow[]> {
    return (await db(TABLES.state).where({ type }).orderBy('uuid')).map(rowOf)
  }

  resolved(row: Pick<StateRow, 'state' | 'type' | 'origin_site'>): Record<string, Value> {
    return resolve(JSON.parse(row.state), this.rulesOf(row.type), shortIdOf(row.origin_site))
  }

  private async save(db: Knex, existing: StateRow | undefined, w: { uuid: string; type: string; origin_site: string; owner_site: string }, state: RecordState, local: { local_id?: number | null; local_values?: string | null } = {}): Promise<StateRow> {
    const text = canonical(state)
    const values = resolve(state, this.rulesOf(w.type), shortIdOf(w.origin_site))
    const fields = {
      state: text,
      checksum: checksumOf(w.type, w.uuid, text),
      deleted: values._deleted === true,
      schema_v: state.v,
      ...local,
    }
    const seq = await this.nextSeq(db)
    if (existing) {
      await db(TABLES.state).where({ id: existing.id }).update({ ...fields, local_seq: seq })
      return { ...existing, ...fields, local_seq: seq } as StateRow
    }
    const row = { uuid: w.uuid, type: w.type, origin_site: w.origin_site, owner_site: w.owner_site, bucket: bucketOf(w.uuid), local_seq: seq, local_id: null, local_values: null, ...fields }
    await db(TABLES.state).insert(row)
    return rowOf({ ...(await db(TABLES.state).where({ uuid: w.uuid }).first()) })
  }

  /** a local change of some fields, with one fresh dot of this site's replica */
  async writeLocal(db: Knex, replica: string, w: { uuid: string; type: string; origin_site: string; owner_site: string }, changes: Record<string, Value | undefined>, local?: { local_id?: number | null; local_values?: string | null }): Promise<StateRow> {
    const existing = await this.lock(db, w.uuid)
    const before: RecordState = existing ? JSON.parse(existing.state) : emptyState()
    return this.save(db, existing, existing ?? w, write(before, replica, this.hlc.tick(), changes), local)
  }

  /** only the local bookkeeping columns (no change of the replicated state, no new local_seq) */
  async setLocal(db: Knex, uuid: string, local: { local_id?: number | null; local_values?: string | null }): Promise<void> {
    await db(TABLES.state).where({ uuid }).update(local)
  }

  /**
   * Merges a peer's state (validated first, §6.5). A peer may never claim a counter of THIS site's
   * replica above what this site issued for the record: that would swallow our later writes.
   * Throws `{ problem }` objects for a refused state; the caller reports them per uuid.
   */
  async mergeRemote(db: Knex, replica: string, incoming: WireCrdt): Promise<MergeOutcome> {
    const parsed = parseState(incoming.state)
    if ('problem' in parsed) throw new RefusedState(parsed.problem)
    const existing = await this.lock(db, incoming.uuid)
    if (existing && existing.type !== incoming.type) throw new RefusedState(`uuid is a ${existing.type} here, not a ${incoming.type}`)
    const mine = existing ? (JSON.parse(existing.state) as RecordState) : undefined
    const claimed = parsed.state.cc[replica] ?? 0
    if (claimed > (mine?.cc[replica] ?? 0)) throw new RefusedState(`the state claims ${replica}:${claimed}, beyond what this site issued for the record`)
    for (const entries of Object.values(parsed.state.f)) for (const e of entries) if (e[3]) this.hlc.recv(e[3])
    const after = mine ? merge(mine, parsed.state) : parsed.state
    const text = canonical(after)
    if (existing && existing.state === text) return { uuid: incoming.uuid, type: incoming.type, changed: false, before: mine, after, row: existing }
    // origin never changes; the first one seen stays
    const row = await this.save(db, existing, existing ?? incoming, after)
    return { uuid: incoming.uuid, type: incoming.type, changed: true, before: mine, after, row }
  }

  /** rows changed after `seq`, oldest first: a page of the delta push or of initial_data */
  async since(seq: number, limit: number, db: Knex = this.knex): Promise<StateRow[]> {
    return (await db(TABLES.state).where('local_seq', '>', seq).orderBy('local_seq').limit(limit)).map(rowOf)
  }

  /**
   * A page of the snapshot in initial_data's order: by type (parents first, `typeOrder`; types this
   * version does not know last, by name), then uuid. `after` is the last (type, uuid) of the previous page.
   */
  async page(after: { type: string; uuid: string } | undefined, limit: number, typeOrder: string[]): Promise<StateRow[]> {
    const present = (await this.knex(TABLES.state).distinct('type')).map((r: any) => String(r.type))
    const types = [...typeOrder.filter((t) => present.includes(t)), ...present.filter((t) => !typeOrder.includes(t)).sort()]
    const rows: StateRow[] = []
    let i = after ? types.indexOf(after.type) : 0
    if (i < 0) i = 0
    for (; i < types.length && rows.length < limit; i++) {
      const q = this.knex(TABLES.state).where({ type: types[i] }).orderBy('uuid').limit(limit - rows.length)
      if (after && types[i] === after.type) q.where('uuid', '>', after.uuid)
      rows.push(...(await q).map(rowOf))
    }
    return rows
  }

  /** XOR roll-up of every checksum: equal roots mean converged (false-equal ~2⁻⁶⁴) */
  async root(db: Knex = this.knex): Promise<string> {
    return xorChecksums((await db(TABLES.state).select('checksum')).map((r: any) => r.checksum))
  }

  /**
   * Bucket roll-ups at a level (6 bits of the 24-bit bucket per level), optionally only under some
   * parent prefixes: `{ "<hex prefix>": "<xor>" }`. Computed in JS: the checksum is text (see the
   * migration), and the grouping is one scan of the covering index.
   */
  async rollup(level: number, parents?: string[]): Promise<Record<string, string>> {
    const q = this.knex(TABLES.state).select('bucket', 'checksum')
    if (parents?.length) {
      q.where((w) => {
        for (const p of parents) {
          const [lo, hi] = bucketRange(level - 1, p)
          w.orWhereBetween('bucket', [lo, hi])
        }
      })
    }
    const groups = new Map<string, string[]>()
    for (const r of await q) {
      const key = prefixOf(level, Number(r.bucket))
      let list = groups.get(key)
      if (!list) groups.set(key, (list = []))
      list.push(r.checksum)
    }
    const out: Record<string, string> = {}
    for (const [k, list] of [...groups].sort()) out[k] = xorChecksums(list)
    return out
  }

  /** the (uuid, checksum) rows under a prefix, by uuid after `cursor` */
  async leaf(level: number, prefix: string, cursor: string | null, limit: number): Promise<StateRow[]> {
    const [lo, hi] = bucketRange(level, prefix)
    const q = this.knex(TABLES.state).whereBetween('bucket', [lo, hi]).orderBy('uuid').limit(limit)
    if (cursor) q.where('uuid', '>', cursor)
    return (await q).map(rowOf)
  }

  async manyByUuid(uuids: string[], db: Knex = this.knex): Promise<StateRow[]> {
    if (!uuids.length) return []
    return (await db(TABLES.state).whereIn('uuid', uuids)).map(rowOf)
  }

  /** at boot: the HLC continues after the newest own stamps (a lost tick is harmless: it only ranks ties) */
  async restoreClock(replica: string): Promise<void> {
    for (const r of await this.knex(TABLES.state).orderBy('local_seq', 'desc').limit(200).select('state')) {
      const state = JSON.parse(r.state) as RecordState
      for (const entries of Object.values(state.f)) for (const e of entries) if (e[1] === replica) this.hlc.restore(e[3])
    }
  }
}

export class RefusedState extends Error {}

export const LEVEL_BITS = 6
export const MAX_LEVEL = 4
const hexWidth = (level: number) => Math.ceil((level * LEVEL_BITS) / 4)
export const prefixOf = (level: number, bucket: number) => (bucket >>> (24 - level * LEVEL_BITS)).toString(16).padStart(hexWidth(level), '0')
export const PREFIX_PATTERN = (level: number) => new RegExp(`^[0-9a-f]{${hexWidth(level)}}$`)
/** the buckets under a node of a level (level 0: everything) */
export function bucketRange(level: number, prefix: string): [number, number] {
  if (level <= 0) return [0, 2 ** 24 - 1]
  const shift = 24 - level * LEVEL_BITS
  const n = parseInt(prefix, 16)
  return [n * 2 ** shift, (n + 1) * 2 ** shift - 1]
}
