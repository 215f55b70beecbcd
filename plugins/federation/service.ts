import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import { conflict, invalidParam, MamError, type Database, type EntityManager, type Knex } from '../../core/index.js'
import { conflicts as conflictedFields, type RecordState, type Value, type TypeRules } from './kernel.js'
import { TABLES } from './migrations.js'
import { CREATED, EVERYWHERE, SITE_RULES, TYPE_ORDER, snapshotOf, type MaterializeContext, type ReplicatedType } from './replicated.js'
import { signedHeaders } from './signing.js'
import { shortIdOf, type SiteIdentity } from './site.js'
import { CrdtStore, RefusedState, toWire, type MergeOutcome, type StateRow, type WireCrdt } from './store.js'

export const PROTOCOL = 1
export const PAGE = 500

export interface FederationSettings {
  name?: string
  baseUrl?: string
  gossipIntervalMs: number
  inviteTtlMinutes: number
  peerTimeoutMs: number
  clockOffsetMs: number
}

export interface PeerRow {
  id: number
  site_uuid: string
  name: string
  base_url: string | null
  public_key: string
  replica: string | null
  status: string
  pull_only: boolean
  introduced_by: string | null
  sent_acked_seq: number
  recv_seq: number
  last_root: string | null
  clock_offset_ms: number | null
  last_ok_at: Date | null
  last_error: string | null
  created_at: Date
  updated_at: Date
}

export const peerOf = (r: any): PeerRow => ({ ...r, id: Number(r.id), pull_only: Boolean(r.pull_only), sent_acked_seq: Number(r.sent_acked_seq), recv_seq: Number(r.recv_seq) })

export interface MergeReport {
  changed: { uuid: string; type: string; fields: string[] }[]
  conflicts: { uuid: string; type: string; fields: string[] }[]
  collisions: { uuid: string; type: string; field: string; value: string; local_id: number | null }[]
  unknown_references: { uuid: string; type: string; field: string; target: string }[]
  rejected: { uuid: string; reason: string }[]
}

class DryRun extends Error {}

const knexOf = (em: EntityManager): Knex => ((em.getTransactionContext() as Knex | undefined) ?? em.getKnex()) as Knex

/** one federation operation at a time in this process; PostgreSQL serialises processes through the counter row */
class Mutex {
  private tail: Promise<unknown> = Promise.resolve()
  run<T>(work: () => Promise<T>): Promise<T> {
    const next = this.tail.then(work, work)
    this.tail = next.catch(() => undefined)
    return next
  }
}

/**
 * The federation's state machine: captures local edits into the replicated state, merges states
 * from peers (and materialises them into the plugins' rows in the same transaction), serves
 * snapshots and gossip pages, and talks to peers (signed requests).
 */
export class FederationService {
  readonly store: CrdtStore
  private readonly byType: Map<string, ReplicatedType>
  private readonly mutex = new Mutex()
  /** every table a replicated type reads or writes, for `transaction`'s lock */
  private readonly lockedTables: string

  constructor(
    private readonly db: Database,
    readonly site: SiteIdentity,
    readonly types: ReplicatedType[],
    store: (rulesOf: (type: string) => TypeRules) => CrdtStore,
    readonly settings: () => FederationSettings,
    private readonly log: Logger,
  ) {
    this.byType = new Map(types.map((t) => [t.type, t]))
    this.lockedTables = [...new Set(types.flatMap((t) => t.tables))].map((t) => `"${t}"`).join(', ')
    this.store = store((type) => (type === 'site' ? SITE_RULES : (this.byType.get(type)?.rules ?? {})))
  }

  get knex(): Knex {
    return this.db.knex
  }

  async ready(): Promise<void> {
    await this.site.load()
  }

  replica(): string {
    return this.site.replica()
  }

  /**
   * A transaction on a fresh EntityManager; the counter row is locked first so federation writers of
   * all processes take turns. On PostgreSQL the replicated types' tables are then locked against
   * writes (reads go on): capture compares the rows with what it saw last, materialisation writes
   * them, and the values it leaves are remembered as seen. A user's edit committed in between would
   * be taken for the federation's own and never replicated, or written over (a flag renamed during a
   * background merge came back under its old name at every site). Local writes wait for the merge
   * instead, and the next capture sees them. SQLite's one connection already serialises them.
   */
  transaction<T>(work: (em: EntityManager, k: Knex) => Promise<T>): Promise<T> {
    return this.mutex.run(() =>
      (this.db.orm.em.fork() as EntityManager).transactional(async (em) => {
        const k = knexOf(em)
        await k(TABLES.seq).where({ id: 1 }).update({ n: k.raw('n') })
        if (this.db.dialect === 'postgresql') await k.raw(`lock table ${this.lockedTables} in share row exclusive mode`)
        return work(em, k)
      }),
    )
  }


  // ------------------------------------------------------------------ capture and materialise

  private ctxFor(em: EntityManager, k: Knex, originSite: string): MaterializeContext {
    return {
      em,
      originSlug: shortIdOf(originSite),
      localIdOf: async (uuid) => (await this.store.get(uuid, k))?.local_id ?? null,
      uuidOfLocal: async (type, localId) => (await this.store.byLocalId(k, type, localId))?.uuid ?? null,
    }
  }

  /**
   * Local edits become replicated writes: each type's rows are compared with the values last read
   * from or written to them (`local_values`), and the differences are written with a fresh dot.
   * The other plugins' write paths are left alone; their replicated tables (users, roles, teams,
   * flags) are small, so a comparison before every exchange is cheap.
   */
  async capture(em: EntityManager, k: Knex): Promise<number> {
    const self = this.site.current.site_uuid
    const replica = this.replica()
    let written = 0
    for (const type of this.types) {
      const ctx = this.ctxFor(em, k, self)
      const local = await type.list(em, ctx)
      const rows = await this.store.ofType(k, type.type)
      const byLocal = new Map(rows.filter((r) => r.local_id !== null).map((r) => [r.local_id!, r]))
      const byUuid = new Map(rows.map((r) => [r.uuid, r]))
      const seen = new Set<number>()
      for (const rec of local) {
        seen.add(rec.localId)
        const snapshot = snapshotOf(rec)
        let row = byLocal.get(rec.localId)
        if (row) {
          const stamp = JSON.parse(row.local_values ?? '{}')[CREATED]
          if (stamp !== undefined && stamp !== rec.created) {
            // the id of a deleted row was given to a new one: the old record is deleted, the row is new
            await this.store.writeLocal(k, replica, row, { _deleted: true }, { local_id: null, local_values: null })
            written++
            row = undefined
          }
        }
        if (!row && rec.fixedUuid && byUuid.get(rec.fixedUuid)) {
          // a record every site has (a built-in role) arrived from a peer before it was read here
          row = byUuid.get(rec.fixedUuid)!
          const known = JSON.stringify({ ...this.store.resolved(row), [CREATED]: rec.created })
          await this.store.setLocal(k, row.uuid, { local_id: rec.localId, local_values: known })
          row = { ...row, local_id: rec.localId, local_values: known }
        }
        if (!row) {
          const uuid = rec.fixedUuid ?? randomUUID()
          await this.claimLocal(k, type.type, uuid, rec.localId)
          const origin = rec.fixedUuid ? EVERYWHERE : self
          await this.store.writeLocal(k, replica, { uuid, type: type.type, origin_site: origin, owner_site: origin }, rec.values, { local_id: rec.localId, local_values: snapshot })
          written++
          continue
        }
        const before = JSON.parse(row.local_values ?? '{}') as Record<string, Value>
        const changes: Record<string, Value | undefined> = {}
        for (const field of new Set([...Object.keys(before), ...Object.keys(rec.values)])) {
          if (field === CREATED) continue
          if (JSON.stringify(before[field]) === JSON.stringify(rec.values[field])) continue
          if (row.origin_site !== self && type.rules.originOnly?.includes(field)) continue
          changes[field] = rec.values[field]
        }
        if (Object.keys(changes).length) {
          await this.store.writeLocal(k, replica, row, changes, { local_values: snapshot })
          written++
        } else if (row.local_values !== snapshot) {
          await this.store.setLocal(k, row.uuid, { local_values: snapshot })
        }
      }
      for (const row of rows) {
        if (row.local_id === null || seen.has(row.local_id) || row.deleted) continue
        await this.store.writeLocal(k, replica, row, { _deleted: true }, { local_id: null, local_values: null })
        written++
      }
    }
    return written
  }

  /** resolved values into the local row; then remembers what the row holds, so capture sees no edit */
  private async materialize(em: EntityManager, k: Knex, row: StateRow): Promise<void> {
    if (row.type === 'site') return this.materializeSite(k, row)
    const type = this.byType.get(row.type)
    if (!type) return // a type of a newer version: stored, merged and relayed, not shown here
    const values = this.store.resolved(row)
    // a fork with an empty identity map in the same transaction (a savepoint): entities read by
    // capture must not be flushed back over what the materialisation wrote or deleted
    const localId = await em.fork({ clear: true, keepTransactionContext: true }).transactional((inner) => type.materialize(row.local_id, values, this.ctxFor(inner, knexOf(inner), row.origin_site)))
    if (localId !== null) await this.claimLocal(k, row.type, row.uuid, localId)
    await this.store.setLocal(k, row.uuid, { local_id: localId })
  }

  /**
   * One record per local row. SQLite gives a new row the id of a deleted last row: a record still
   * pointing at that id lost its row to a local delete that capture has not seen yet, so it is deleted.
   */
  private async claimLocal(k: Knex, type: string, uuid: string, localId: number): Promise<void> {
    for (const stale of await k(TABLES.state).where({ type, local_id: localId }).whereNot({ uuid }).select('uuid')) {
      const other = (await this.store.get(stale.uuid, k))!
      if (other.deleted) await this.store.setLocal(k, other.uuid, { local_id: null, local_values: null })
      else await this.store.writeLocal(k, this.replica(), other, { _deleted: true }, { local_id: null, local_values: null })
    }
  }

  /** a row that cannot be written here (a constraint of another plugin) leaves the merged state in place and is retried with the next change */
  private async materializeSafely(em: EntityManager, k: Knex, row: StateRow): Promise<void> {
    try {
      await this.materialize(em, k, row)
    } catch (err) {
      this.log.warn({ uuid: row.uuid, type: row.type, err: (err as Error).message }, 'federation: could not materialise a record')
    }
  }

  private async refreshLocalValues(em: EntityManager, k: Knex, types: Set<string>): Promise<void> {
    for (const type of this.types) {
      if (!types.has(type.type)) continue
      const self = this.site.current.site_uuid
      for (const rec of await type.list(em, this.ctxFor(em, k, self))) {
        const row = await this.store.byLocalId(k, type.type, rec.localId)
        if (row) await this.store.setLocal(k, row.uuid, { local_values: snapshotOf(rec) })
      }
    }
  }

  async materializeSite(k: Knex, row: StateRow): Promise<void> {
    if (row.uuid === this.site.current.site_uuid) return
    const v = this.store.resolved(row)
    const keys = Object.entries(v).filter(([f, val]) => f.startsWith('public_keys/') && typeof val === 'string' && v[`revoked/${f.slice(12)}`] !== true)
    const key = keys.length ? String(keys.sort()[0][1]) : null
    const existing = await k(TABLES.peers).where({ site_uuid: row.uuid }).first()
    const fields = {
      name: typeof v.name === 'string' ? v.name : 'site',
      base_url: typeof v.base_url === 'string' ? v.base_url : null,
      replica: typeof v.replica === 'string' ? v.replica : null,
      status: typeof v.status === 'string' ? v.status : 'active',
      pull_only: v.pull_only === true,
      introduced_by: typeof v.introduced_by === 'string' ? v.introduced_by : null,
      updated_at: new Date(),
    }
    if (existing) await k(TABLES.peers).where({ id: existing.id }).update({ ...fields, ...(key ? { public_key: key } : {}) })
    else if (key) await k(TABLES.peers).insert({ site_uuid: row.uuid, public_key: key, created_at: new Date(), ...fields })
  }

  // ------------------------------------------------------------------ merging

  /**
   * Merges states (a gossip page, a snapshot page, a bundle): captures local edits first (so they
   * get dots before remote values are written over the rows), then merges each record, parents
   * first, and materialises what changed. A refused record is reported, not fatal (§6.5).
   */
  async mergeAll(em: EntityManager, k: Knex, crdts: WireCrdt[]): Promise<{ outcomes: MergeOutcome[]; rejected: { uuid: string; reason: string }[] }> {
    await this.capture(em, k)
    em.clear()
    const rank = (t: string) => (TYPE_ORDER.includes(t) ? TYPE_ORDER.indexOf(t) : TYPE_ORDER.length)
    const ordered = [...crdts].sort((a, b) => rank(a.type) - rank(b.type))
    const outcomes: MergeOutcome[] = []
    const rejected: { uuid: string; reason: string }[] = []
    const touched = new Set<string>()
    let created = false
    for (const c of ordered) {
      try {
        const outcome = await this.store.mergeRemote(k, this.replica(), c)
        outcomes.push(outcome)
        if (!outcome.changed) continue
        const hadLocal = outcome.row.local_id !== null
        await this.materializeSafely(em, k, outcome.row)
        touched.add(c.type)
        if (!hadLocal) created = true
      } catch (err) {
        if (err instanceof RefusedState) {
          rejected.push({ uuid: String(c.uuid), reason: err.message })
          this.log.warn({ uuid: c.uuid, reason: err.message }, 'federation: refused a peer state')
        } else throw err
      }
    }
    // records that arrived before what they refer to (a team before its members): once the
    // referenced ones exist, materialise the referring records again
    if (created) {
      for (const type of ['user', 'team']) {
        for (const row of await this.store.ofType(k, type)) {
          if (row.deleted) continue
          await this.materializeSafely(em, k, row)
          touched.add(type)
        }
      }
    }
    em.clear()
    await this.refreshLocalValues(em, k, touched)
    return { outcomes, rejected }
  }

  /** merge_state and dry_run_merge_state: committed or rolled back, with the admin's report (§5.4) */
  async mergeWithReport(crdts: WireCrdt[], dryRun: boolean, strict = true): Promise<{ crdts: WireCrdt[]; report: MergeReport }> {
    let result: { crdts: WireCrdt[]; report: MergeReport } | undefined
    try {
      await this.transaction(async (em, k) => {
        const { outcomes, rejected } = await this.mergeAll(em, k, crdts)
        // an admin's import is all or nothing: the first refused state names itself, nothing is kept
        if (strict && rejected.length) {
          const i = crdts.findIndex((c) => c.uuid === rejected[0].uuid)
          throw invalidParam(`crdts[${i}][state]`, rejected[0].reason)
        }
        const report: MergeReport = { changed: [], conflicts: [], collisions: [], unknown_references: [], rejected }
        for (const o of outcomes) {
          const row = (await this.store.get(o.uuid, k))!
          if (o.changed) report.changed.push({ uuid: o.uuid, type: o.type, fields: changedFields(o.before, o.after) })
          const fresh = conflictedFields(o.after).filter((f) => !o.before || !conflictedFields(o.before).includes(f))
          if (fresh.length) report.conflicts.push({ uuid: o.uuid, type: o.type, fields: fresh })
          await this.describe(em, k, row, report)
        }
        const states = await this.store.manyByUuid(outcomes.map((o) => o.uuid), k)
        result = { crdts: states.map(toWire), report }
        if (dryRun) throw new DryRun()
      })
    } catch (err) {
      if (!(err instanceof DryRun)) throw err
    }
    return result!
  }

  /** collisions (a login or name taken here by another record, §8.2) and references to unknown uuids */
  private async describe(em: EntityManager, k: Knex, row: StateRow, report: MergeReport): Promise<void> {
    const values = this.store.resolved(row)
    const unknown = async (field: string, target: unknown) => {
      if (typeof target !== 'string') return
      if (!(await this.store.get(target, k))) report.unknown_references.push({ uuid: row.uuid, type: row.type, field, target })
    }
    if (row.type === 'user') {
      await unknown('role', values.role)
      if (typeof values.login === 'string') {
        const local = await k('users').where({ username: values.login }).first('id')
        if (local && Number(local.id) !== row.local_id) report.collisions.push({ uuid: row.uuid, type: row.type, field: 'login', value: values.login, local_id: Number(local.id) })
      }
    }
    if (row.type === 'team') for (const f of Object.keys(values)) if (f.startsWith('members/')) await unknown(f, f.slice(8))
    if (row.type === 'site' && row.uuid !== this.site.current.site_uuid) {
      const replica = values.replica
      if (typeof replica === 'string' && replica.split('.')[0] === shortIdOf(this.site.current.site_uuid))
        report.collisions.push({ uuid: row.uuid, type: row.type, field: 'replica', value: replica, local_id: null })
    }
  }

  // ------------------------------------------------------------------ snapshot and gossip pages

  async snapshotPage(cursor: { type: string; uuid: string } | undefined, limit: number, watermark: number | undefined) {
    if (!cursor) await this.transaction((em, k) => this.capture(em, k))
    // the watermark is read before the first page: a change after it comes with the pushes that follow
    const seq = watermark ?? (await this.store.currentSeq())
    const rows = await this.store.page(cursor, limit, TYPE_ORDER)
    const last = rows[rows.length - 1]
    return { seq, rows, next: rows.length === limit && last ? { type: last.type, uuid: last.uuid, seq } : null }
  }

  /** rows changed after `after` up to the current counter, at most one page; `to` is where the page ends */
  async changesAfter(after: number, limit = PAGE): Promise<{ from: number; to: number; rows: StateRow[] }> {
    const current = await this.store.currentSeq()
    const rows = (await this.store.since(after, limit)).filter((r) => r.local_seq <= current)
    const to = rows.length === limit ? rows[rows.length - 1].local_seq : Math.max(current, after)
    return { from: after + 1, to, rows }
  }

  // ------------------------------------------------------------------ sites

  async peers(): Promise<PeerRow[]> {
    return (await this.knex(TABLES.peers).orderBy('id')).map(peerOf)
  }

  async peer(siteUuid: string): Promise<PeerRow | undefined> {
    const row = await this.knex(TABLES.peers).where({ site_uuid: siteUuid }).first()
    return row ? peerOf(row) : undefined
  }

  /** the key a signed request is checked with: a peer's, or this site's own (a site may call itself) */
  async keyOf(siteUuid: string): Promise<{ publicKey: string; status: string } | undefined> {
    const self = await this.site.load()
    if (siteUuid === self.site_uuid) return { publicKey: self.public_key, status: 'active' }
    const peer = await this.peer(siteUuid)
    return peer ? { publicKey: peer.public_key, status: peer.status } : undefined
  }

  /** this site's own record in the site CRDT (written when it founds or joins a federation, and on edits) */
  async writeSiteRecord(k: Knex, siteUuid: string, changes: Record<string, Value | undefined>): Promise<StateRow> {
    return this.store.writeLocal(k, this.replica(), { uuid: siteUuid, type: 'site', origin_site: siteUuid, owner_site: siteUuid }, changes)
  }

  async ownSiteFields(): Promise<Record<string, Value>> {
    const self = await this.site.load()
    return { name: self.name, base_url: self.base_url, [`public_keys/k1`]: self.public_key, replica: this.replica(), status: 'active', pull_only: false }
  }

  /** founds a federation on the first invite: this site's record is its first member */
  async ensureFederation(baseUrl: string): Promise<string> {
    const self = await this.site.load()
    if (self.federation_uuid) return self.federation_uuid
    return this.transaction(async (_em, k) => {
      const fresh = await k(TABLES.site).where({ site_uuid: self.site_uuid }).first()
      if (fresh.federation_uuid) {
        await this.site.reload()
        return fresh.federation_uuid as string
      }
      const federation = randomUUID()
      await this.site.update(k, { federation_uuid: federation, base_url: self.base_url ?? baseUrl })
      await this.writeSiteRecord(k, self.site_uuid, await this.ownSiteFields())
      return federation
    })
  }

  // ------------------------------------------------------------------ talking to peers

  async call<T = any>(baseUrl: string, method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown): Promise<{ status: number; headers: Headers; body: T }> {
    const self = await this.site.load()
    const url = new URL(`/api/v1${path}`, baseUrl)
    const pathWithQuery = url.pathname + url.search
    const headers: Record<string, string> = { ...signedHeaders((d) => this.site.sign(d), self.site_uuid, method, pathWithQuery, body), accept: 'application/json' }
    if (body !== undefined) headers['content-type'] = 'application/json'
    let res: Response
    try {
      res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(this.settings().peerTimeoutMs) })
    } catch (err) {
      throw new MamError('service_unavailable', `The site at ${url.origin} did not answer: ${(err as Error).message}`)
    }
    const text = await res.text()
    let parsed: any
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {
      parsed = undefined
    }
    return { status: res.status, headers: res.headers, body: parsed }
  }

  private async notePeer(siteUuid: string, changes: Record<string, unknown>) {
    await this.knex(TABLES.peers)
      .where({ site_uuid: siteUuid })
      .update({ ...changes, updated_at: new Date() })
  }

  /** one delta push to a peer; its answer carries one page back (§5.1) */
  async pushTo(peer: PeerRow): Promise<{ sent: number; received: number; rootsEqual: boolean }> {
    if (!peer.base_url) throw conflict(`The site ${peer.name} has no base URL`)
    const self = await this.site.load()
    await this.transaction((em, k) => this.capture(em, k))
    const page = await this.changesAfter(peer.sent_acked_seq)
    const root = await this.store.root()
    const sentAt = Date.now()
    const res = await this.call(peer.base_url, 'POST', '/gossip', {
      protocol: PROTOCOL,
      federation: self.federation_uuid,
      from: self.site_uuid,
      incarnation: String(self.incarnation),
      seq_from: page.from,
      seq_to: page.to,
      recv_seq: peer.recv_seq,
      root,
      crdts: page.rows.map(toWire),
    })
    if (res.status !== 200) {
      await this.notePeer(peer.site_uuid, { last_error: `POST /gossip answered ${res.status}: ${res.body?.detail ?? ''}`.slice(0, 500) })
      throw new MamError('service_unavailable', `The site ${peer.name} refused the gossip page (${res.status}): ${res.body?.detail ?? ''}`)
    }
    const answer = res.body.gossip
    const back = answer.back as { seq_from: number; seq_to: number; crdts: WireCrdt[] } | undefined
    let received = 0
    let recvSeq = peer.recv_seq
    if (back && Array.isArray(back.crdts)) {
      const { rejected } = await this.transaction((em, k) => this.mergeAll(em, k, back.crdts))
      received = back.crdts.length
      // the watermark moves only over a contiguous, fully accepted page
      if (!rejected.length && Number(back.seq_from) <= recvSeq + 1 && Number(back.seq_to) > recvSeq) recvSeq = Number(back.seq_to)
    }
    const myRoot = await this.store.root()
    await this.notePeer(peer.site_uuid, {
      sent_acked_seq: Math.max(peer.sent_acked_seq, Number(answer.applied_to) || 0),
      recv_seq: recvSeq,
      last_root: String(answer.root ?? ''),
      last_ok_at: new Date(),
      last_error: null,
      clock_offset_ms: typeof answer.clock_ms === 'number' ? Math.round(answer.clock_ms - (sentAt + Date.now()) / 2) : null,
    })
    return { sent: page.rows.length, received, rootsEqual: myRoot === answer.root }
  }

  /** the receiving side of a push */
  async receivePush(from: string, body: { seq_to?: number; recv_seq?: number; crdts: WireCrdt[] }) {
    const { outcomes, rejected } = await this.transaction((em, k) => this.mergeAll(em, k, body.crdts))
    const back = body.recv_seq === undefined ? undefined : await this.changesAfter(body.recv_seq)
    await this.notePeer(from, { last_ok_at: new Date() })
    return {
      applied_to: rejected.length ? null : (body.seq_to ?? null),
      root: await this.store.root(),
      changed: outcomes.filter((o) => o.changed).length,
      rejected,
      clock_ms: Date.now(),
      ...(back ? { back: { seq_from: back.from, seq_to: back.to, crdts: back.rows.map(toWire) } } : {}),
    }
  }

  /**
   * Anti-entropy with a peer (§5.2): compare bucket roll-ups level by level, then the (uuid,
   * checksum) rows of the differing leaves; merge what the peer has and push back what it lacks.
   */
  async antiEntropy(peer: PeerRow, leafLevel = 2): Promise<{ pulled: number; pushed: number; roundTrips: number }> {
    if (!peer.base_url) throw conflict(`The site ${peer.name} has no base URL`)
    await this.transaction((em, k) => this.capture(em, k))
    let roundTrips = 0
    let differing: string[] | undefined
    for (let level = 1; level <= leafLevel; level++) {
      const checksums = await this.store.rollup(level, differing)
      const res = await this.call(peer.base_url, 'PUT', '/gossip', { protocol: PROTOCOL, level, parents: differing ?? [], checksums })
      roundTrips++
      if (res.status !== 200) throw new MamError('service_unavailable', `The site ${peer.name} refused the checksums (${res.status}): ${res.body?.detail ?? ''}`)
      differing = res.body.gossip.differing as string[]
      if (!differing.length) return { pulled: 0, pushed: 0, roundTrips }
    }
    let pulled = 0
    const toPush = new Set<string>()
    for (const prefix of differing!) {
      const mine = await this.store.leaf(leafLevel, prefix, null, 100_000)
      let cursor: string | null = null
      do {
        const res: { status: number; body: any } = await this.call(peer.base_url, 'PUT', '/gossip', { protocol: PROTOCOL, level: 'rows', depth: leafLevel, prefix, rows: mine.map((r) => [r.uuid, r.checksum]), cursor })
        roundTrips++
        if (res.status !== 200) throw new MamError('service_unavailable', `The site ${peer.name} refused the rows (${res.status}): ${res.body?.detail ?? ''}`)
        const answer = res.body.gossip
        const crdts = answer.crdts as WireCrdt[]
        if (crdts.length) {
          const { outcomes } = await this.transaction((em, k) => this.mergeAll(em, k, crdts))
          pulled += crdts.length
          // ours had something theirs lacked: the merged state goes back
          for (const o of outcomes) if (o.changed && o.before) toPush.add(o.uuid)
        }
        for (const u of answer.want as string[]) toPush.add(u)
        cursor = answer.cursor
      } while (cursor)
    }
    const rows = await this.store.manyByUuid([...toPush])
    for (let i = 0; i < rows.length; i += PAGE) {
      const res = await this.call(peer.base_url, 'POST', '/gossip', { protocol: PROTOCOL, federation: this.site.current.federation_uuid, from: this.site.current.site_uuid, incarnation: String(this.site.current.incarnation), crdts: rows.slice(i, i + PAGE).map(toWire) })
      roundTrips++
      if (res.status !== 200) throw new MamError('service_unavailable', `The site ${peer.name} refused the repair page (${res.status})`)
    }
    return { pulled, pushed: rows.length, roundTrips }
  }

  /** one round with every active peer: push; anti-entropy when roots still differ with nothing left to send */
  async round(): Promise<void> {
    const self = await this.site.load()
    if (!self.federation_uuid) return
    for (const peer of await this.peers()) {
      if (peer.status !== 'active' || !peer.base_url) continue
      try {
        let result = await this.pushTo(peer)
        for (let i = 0; i < 20 && (result.sent === PAGE || result.received === PAGE); i++) result = await this.pushTo((await this.peer(peer.site_uuid))!)
        if (!result.rootsEqual) {
          await this.antiEntropy((await this.peer(peer.site_uuid))!)
        }
      } catch (err) {
        this.log.warn({ peer: peer.site_uuid, err: (err as Error).message }, 'federation: exchange failed')
        await this.notePeer(peer.site_uuid, { last_error: (err as Error).message.slice(0, 500) }).catch(() => undefined)
      }
    }
  }

  private timer: NodeJS.Timeout | undefined
  private running = false

  /** rounds on the local clock (only to schedule), ±20 % jitter so sites do not stay in step */
  startTimer(): void {
    const every = this.settings().gossipIntervalMs
    if (!every || this.timer) return
    const next = () => {
      this.timer = setTimeout(async () => {
        if (!this.running) {
          this.running = true
          await this.round().catch((err) => this.log.warn({ err: (err as Error).message }, 'federation: round failed'))
          this.running = false
        }
        if (this.timer) next()
      }, every * (0.8 + Math.random() * 0.4))
      this.timer.unref()
    }
    next()
  }

  stopTimer(): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}

function changedFields(before: RecordState | undefined, after: RecordState): string[] {
  const out: string[] = []
  for (const f of new Set([...Object.keys(before?.f ?? {}), ...Object.keys(after.f)])) if (JSON.stringify(before?.f[f]) !== JSON.stringify(after.f[f])) out.push(f)
  return out.sort()
}
