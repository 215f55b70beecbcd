import { randomUUID } from 'node:crypto'
import { MamError, User, conflict, forbidden, invalidParam, isUniqueViolation, iso, notFound, type Dialect, type EntityManager, type Knex, type Principal } from '../../core/index.js'
import type { AccessRightService, ProtectedType, TeamService } from '../identity/index.js'
import type { ProjectService } from '../projects/index.js'
import { clipEnd, fileNameOf, pathOfUrl, trackName, type SequenceClip, type SequenceDoc, type SequenceMarker, type TrackKind } from './model.js'
import { canDrop, durationTimecode, rateString, timecode, type Rate } from './time.js'

export const PREDITOR_SEQUENCE = { type: 'preditor_sequence', label: 'preditor sequence', table: 'preditor_sequences' } as const satisfies ProtectedType

const SEQUENCES = 'preditor_sequences'
const CLIPS = 'preditor_sequence_clips'
const MARKERS = 'preditor_sequence_markers'
/** a timeline is loaded and written whole; this bounds it */
export const MAX_CLIPS = 10_000
export const MAX_MARKERS = 10_000
const BATCH = 500

export interface SequenceRow {
  id: number
  uuid: string
  project_id: number
  name: string
  rate_num: number
  rate_den: number
  drop_frame: unknown
  start_frame: number
  width: number | null
  height: number | null
  locked_by_id: number | null
  locked_at: unknown
  source_format: string | null
  source_asset_id: number | null
  created_by_id: number | null
  created_at: unknown
  updated_at: unknown
}

export interface ClipRow {
  id: number
  sequence_id: number
  kind: TrackKind
  track: number
  record_frame: number
  source_in: number
  source_out: number
  source_start: number
  name: string
  reel: string | null
  url: string | null
  asset_id: number | null
}

export interface MarkerRow {
  id: number
  frame: number
  duration: number
  name: string
  comment: string
  color: string
}

export interface LoadedSequence {
  row: SequenceRow
  clips: ClipRow[]
  markers: MarkerRow[]
}

const now = () => new Date()
export const rateOf = (row: Pick<SequenceRow, 'rate_num' | 'rate_den'>): Rate => ({ num: Number(row.rate_num), den: Number(row.rate_den) })
export const normalizeRow = <T extends Record<string, any>>(row: T): T => {
  for (const k of ['id', 'project_id', 'rate_num', 'rate_den', 'start_frame', 'width', 'height', 'locked_by_id', 'source_asset_id', 'created_by_id', 'sequence_id', 'track', 'record_frame', 'source_in', 'source_out', 'source_start', 'asset_id', 'frame', 'duration'])
    if (k in row && row[k] !== null) (row as any)[k] = Number(row[k])
  return row
}

/** the stored clips and markers as the readers' and writers' sequence document */
export function docOf(s: LoadedSequence): SequenceDoc {
  return {
    name: s.row.name,
    rate: rateOf(s.row),
    dropFrame: Boolean(s.row.drop_frame),
    start: s.row.start_frame,
    width: s.row.width,
    height: s.row.height,
    clips: s.clips.map((c) => ({ kind: c.kind, track: c.track, record: c.record_frame, sourceIn: c.source_in, sourceOut: c.source_out, sourceStart: c.source_start, name: c.name, reel: c.reel, url: c.url, assetId: c.asset_id })),
    markers: s.markers.map((m) => ({ frame: m.frame, duration: m.duration, name: m.name, comment: m.comment, color: m.color })),
  }
}

/** what an asset offers a timeline: its rate, start timecode and length, from its probe metadata */
export interface AssetTiming {
  id: number
  name: string
  type: string
  /** null for audio, which fits any rate */
  rate: Rate | null
  /** start timecode in frames at the sequence's rate */
  start: number
  /** length in frames at the sequence's rate; null before analysis */
  frames: number | null
  reel: string | null
  hasAudio: boolean
  /** `file://` URL of the original */
  url: string
}

/**
 * Preditor sequences (§4.19): timelines of a project's assets, with team rights of their own (type
 * `preditor_sequence`), an editing lock (open/close) held by one user, imports from editing-suite
 * files and exports to them. Every write runs in one transaction that first touches the sequence's
 * row, so concurrent writes to one sequence are serialized (a row lock on PostgreSQL, the write lock
 * on SQLite) and the lock and the track layout are read after the wait.
 */
export class SequenceService {
  constructor(
    private readonly knex: Knex,
    private readonly rights: AccessRightService,
    private readonly teams: TeamService,
    private readonly projects: ProjectService,
    readonly dialect: Dialect,
  ) {}

  async row(id: number, trx: Knex = this.knex): Promise<SequenceRow> {
    const row = await trx(SEQUENCES).where({ id }).first()
    if (!row) throw notFound(PREDITOR_SEQUENCE.label, id)
    return normalizeRow(row)
  }

  /** the sequence if the principal may read it (404 otherwise) */
  async readable(principal: Principal, id: number): Promise<SequenceRow> {
    await this.rights.assertRead(principal, PREDITOR_SEQUENCE, id)
    return this.row(id)
  }

  /** 404 without a right, 403 with read only */
  async writable(principal: Principal, id: number): Promise<SequenceRow> {
    await this.rights.assertWrite(principal, PREDITOR_SEQUENCE, id)
    return this.row(id)
  }

  /** writable, and not open by someone else now (423): checked before a request's other checks; `write` checks again in its transaction */
  async writableNow(principal: Principal, id: number): Promise<SequenceRow> {
    const row = await this.writable(principal, id)
    await this.assertNotHeldByOther(this.knex, row, principal)
    return row
  }

  async load(id: number, trx: Knex = this.knex): Promise<LoadedSequence> {
    const row = await this.row(id, trx)
    const clips = (await trx(CLIPS).where({ sequence_id: id }).orderBy([{ column: 'kind', order: 'desc' }, 'track', 'record_frame', 'id'])).map(normalizeRow) as ClipRow[]
    const markers = (await trx(MARKERS).where({ sequence_id: id }).orderBy(['frame', 'id'])).map(normalizeRow) as MarkerRow[]
    return { row, clips, markers }
  }

  listQuery(principal: Principal, projectId?: number): Knex.QueryBuilder {
    let q = this.knex(SEQUENCES).select('*')
    if (projectId !== undefined) q = q.where({ project_id: projectId })
    return this.rights.scope(q, principal, PREDITOR_SEQUENCE.type, 'id')
  }

  /** the newest sequence imported from this asset's file (sequence reports read it instead of the file) */
  async importedFrom(assetId: number): Promise<number | null> {
    const row = await this.knex(SEQUENCES).where({ source_asset_id: assetId }).orderBy('id', 'desc').first('id')
    return row ? Number(row.id) : null
  }

  /** clip and marker counts of a page of sequences, in two grouped queries */
  async counts(ids: number[]): Promise<Map<number, { clips: number; offline: number; markers: number }>> {
    const out = new Map(ids.map((id) => [id, { clips: 0, offline: 0, markers: 0 }]))
    if (!ids.length) return out
    const clips = await this.knex(CLIPS).whereIn('sequence_id', ids).groupBy('sequence_id').select('sequence_id').count({ n: '*' }).select(this.knex.raw('sum(case when asset_id is null then 1 else 0 end) as offline'))
    for (const c of clips as any[]) Object.assign(out.get(Number(c.sequence_id))!, { clips: Number(c.n), offline: Number(c.offline) })
    const markers = await this.knex(MARKERS).whereIn('sequence_id', ids).groupBy('sequence_id').select('sequence_id').count({ n: '*' })
    for (const m of markers as any[]) out.get(Number(m.sequence_id))!.markers = Number(m.n)
    return out
  }

  /** the project must be one the principal may change; an unknown or unreadable one is bad input */
  async assertProjectWritable(em: EntityManager, principal: Principal, projectId: number, param: string) {
    try {
      return await this.projects.writable(em, principal, projectId)
    } catch (err) {
      if (err instanceof MamError && err.code === 'not_found') throw invalidParam(param, `is not a project you can read (${projectId})`)
      throw err
    }
  }

  /**
   * A new sequence, the creator's own team given read and write on it. `doc` carries the clips and
   * markers of an import (already conformed); a taken name is a 409 unless `uniqueName` asks for
   * the next free `name (2)`.
   */
  async create(
    em: EntityManager,
    principal: Principal,
    input: { projectId: number; doc: SequenceDoc; sourceFormat?: string | null; sourceAssetId?: number | null },
    options: { nameParam: string; uniqueName?: boolean },
  ): Promise<number> {
    const user = await em.findOneOrFail(User, principal.userId)
    const own = await this.teams.ensureOwnTeam(em, user)
    const doc = input.doc
    if (doc.clips.length > MAX_CLIPS) throw invalidParam(options.nameParam, `the sequence has ${doc.clips.length} clips; at most ${MAX_CLIPS} are kept`)
    if (doc.markers.length > MAX_MARKERS) throw invalidParam(options.nameParam, `the sequence has ${doc.markers.length} markers; at most ${MAX_MARKERS} are kept`)
    const base = doc.name.normalize('NFC').trim().slice(0, 240)
    let id = 0
    for (let attempt = 1; !id; attempt++) {
      const name = attempt === 1 ? base : `${base} (${attempt})`
      try {
        id = await this.knex.transaction(async (trx) => {
          const [row] = await trx(SEQUENCES)
            .insert({
              uuid: randomUUID(),
              project_id: input.projectId,
              name,
              rate_num: doc.rate.num,
              rate_den: doc.rate.den,
              drop_frame: doc.dropFrame && canDrop(doc.rate),
              start_frame: doc.start,
              width: doc.width ?? null,
              height: doc.height ?? null,
              source_format: input.sourceFormat ?? null,
              source_asset_id: input.sourceAssetId ?? null,
              created_by_id: principal.userId,
              created_at: now(),
              updated_at: now(),
            })
            .returning('id')
          const newId = Number(typeof row === 'object' ? row.id : row)
          await this.insertClips(trx, newId, doc.clips)
          await this.insertMarkers(trx, newId, doc.markers)
          return newId
        })
      } catch (err) {
        if (!isUniqueViolation(err)) throw err
        if (!options.uniqueName || attempt >= 50) throw conflict(`A sequence named "${name}" exists in this project already`, { errors: [{ param: options.nameParam, message: 'is taken' }] })
      }
    }
    await this.rights.grant(em, PREDITOR_SEQUENCE.type, id, own.id, { read: true, write: true })
    return id
  }

  private async insertClips(trx: Knex, sequenceId: number, clips: SequenceClip[]) {
    const rows = clips.map((c) => ({
      sequence_id: sequenceId,
      kind: c.kind,
      track: c.track,
      record_frame: c.record,
      source_in: c.sourceIn,
      source_out: c.sourceOut,
      source_start: c.sourceStart ?? 0,
      name: c.name.slice(0, 255),
      reel: c.reel ? c.reel.slice(0, 64) : null,
      url: c.url ?? null,
      asset_id: c.assetId ?? null,
      created_at: now(),
      updated_at: now(),
    }))
    for (let i = 0; i < rows.length; i += BATCH) await trx(CLIPS).insert(rows.slice(i, i + BATCH))
  }

  private async insertMarkers(trx: Knex, sequenceId: number, markers: SequenceMarker[]) {
    const rows = markers.map((m) => ({ sequence_id: sequenceId, frame: m.frame, duration: m.duration, name: m.name.slice(0, 255), comment: m.comment, color: m.color, created_at: now(), updated_at: now() }))
    for (let i = 0; i < rows.length; i += BATCH) await trx(MARKERS).insert(rows.slice(i, i + BATCH))
  }

  /**
   * Runs a change of one sequence: the row is touched first (serializing writers), then the lock
   * is checked as it is now. Writes by anyone but the holder of an open sequence are 423.
   */
  async write<T>(principal: Principal, id: number, change: (trx: Knex, row: SequenceRow) => Promise<T>): Promise<T> {
    await this.rights.assertWrite(principal, PREDITOR_SEQUENCE, id)
    return this.knex.transaction(async (trx) => {
      const touched = await trx(SEQUENCES).where({ id }).update({ updated_at: now() })
      if (!touched) throw notFound(PREDITOR_SEQUENCE.label, id)
      const row = await this.row(id, trx)
      await this.assertNotHeldByOther(trx, row, principal)
      return change(trx, row)
    })
  }

  private async holderName(trx: Knex, userId: number): Promise<string> {
    const user = await trx('users').where({ id: userId }).first('username')
    return user?.username ?? `user ${userId}`
  }

  private async assertNotHeldByOther(trx: Knex, row: SequenceRow, principal: Principal) {
    if (row.locked_by_id === null || row.locked_by_id === principal.userId) return
    const holder = await this.holderName(trx, row.locked_by_id)
    throw new MamError('locked', `Sequence "${row.name}" is open for editing by ${holder} since ${iso(row.locked_at as Date)}; changes wait until it is closed`, {
      locked_by: { id: row.locked_by_id, username: holder },
      locked_at: iso(row.locked_at as Date),
    })
  }

  async update(principal: Principal, id: number, input: { name?: string; start?: number; dropFrame?: boolean; rate?: Rate; width?: number | null; height?: number | null; markers?: SequenceMarker[]; removeClipIds?: number[] }, param: (f: string) => string) {
    await this.write(principal, id, async (trx, row) => {
      const patch: Record<string, unknown> = {}
      if (input.name !== undefined) {
        const name = input.name.normalize('NFC').trim()
        if (!name) throw invalidParam(param('name'), 'must not be blank')
        patch.name = name
      }
      if (input.rate) {
        const clips = await trx(CLIPS).where({ sequence_id: id }).count({ n: '*' })
        if (Number(clips[0].n) > 0 && (input.rate.num !== row.rate_num || input.rate.den !== row.rate_den)) throw invalidParam(param('frame_rate'), 'cannot change while the sequence has clips (their frames are counted at the old rate)')
        patch.rate_num = input.rate.num
        patch.rate_den = input.rate.den
      }
      const rate = input.rate ?? rateOf(row)
      if (input.dropFrame !== undefined) {
        if (input.dropFrame && !canDrop(rate)) throw invalidParam(param('drop_frame'), `drop-frame counting exists at 29.97 and 59.94 only, not ${rateString(rate)}`)
        patch.drop_frame = input.dropFrame
      } else if (input.rate && !canDrop(rate)) patch.drop_frame = false
      if (input.start !== undefined) patch.start_frame = input.start
      if (input.width !== undefined) patch.width = input.width
      if (input.height !== undefined) patch.height = input.height
      if (input.removeClipIds?.length) {
        const removed = await trx(CLIPS).where({ sequence_id: id }).whereIn('id', input.removeClipIds).delete()
        if (removed !== new Set(input.removeClipIds).size) throw invalidParam(param('remove_clip_ids'), 'names a clip that is not in this sequence')
      }
      if (input.markers) {
        await trx(MARKERS).where({ sequence_id: id }).delete()
        await this.insertMarkers(trx, id, input.markers)
      }
      if (!Object.keys(patch).length) return
      try {
        await trx(SEQUENCES).where({ id }).update(patch)
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`A sequence named "${patch.name}" exists in this project already`, { errors: [{ param: param('name'), message: 'is taken' }] })
        throw err
      }
    })
  }

  async remove(em: EntityManager, principal: Principal, id: number) {
    await this.write(principal, id, async (trx) => {
      await trx(SEQUENCES).where({ id }).delete()
    })
    await this.rights.forget(em, PREDITOR_SEQUENCE.type, id)
  }

  /**
   * Appends a clip of an asset to a track: at `position` (frames from the sequence's start) or
   * after the last clip of the track. Checked against the asset's rate and length and against the
   * clips already on the track, after the sequence's row is locked, so two appends at once land one
   * after the other.
   */
  async addClip(principal: Principal, id: number, asset: AssetTiming, input: { kind: TrackKind; track: number; sourceIn: number; sourceOut: number; position?: number; name?: string }, params: { in: string; out: string; position: string; track: string }) {
    return this.write(principal, id, async (trx) => {
      const onTrack = (await trx(CLIPS).where({ sequence_id: id, kind: input.kind, track: input.track }).orderBy('record_frame').select('id', 'record_frame', 'source_in', 'source_out')).map(normalizeRow)
      const length = input.sourceOut - input.sourceIn
      const end = onTrack.reduce((n, c) => Math.max(n, c.record_frame + c.source_out - c.source_in), 0)
      const record = input.position ?? end
      const overlap = onTrack.find((c) => record < c.record_frame + c.source_out - c.source_in && c.record_frame < record + length)
      if (overlap) throw invalidParam(params.position, `frames ${record}–${record + length - 1} overlap clip ${overlap.id} on ${trackName(input)} (frames ${overlap.record_frame}–${overlap.record_frame + overlap.source_out - overlap.source_in - 1})`)
      if (onTrack.length >= MAX_CLIPS) throw conflict(`the track holds ${MAX_CLIPS} clips already`)
      const [row] = await trx(CLIPS)
        .insert({
          sequence_id: id,
          kind: input.kind,
          track: input.track,
          record_frame: record,
          source_in: input.sourceIn,
          source_out: input.sourceOut,
          source_start: asset.start,
          name: (input.name ?? asset.name).slice(0, 255),
          reel: asset.reel?.slice(0, 64) ?? null,
          url: asset.url,
          asset_id: asset.id,
          created_at: now(),
          updated_at: now(),
        })
        .returning('id')
      return Number(typeof row === 'object' ? row.id : row)
    })
  }

  /** PUT /open: the lock is taken when free or already ours; another holder is a 409 naming them */
  async open(principal: Principal, id: number): Promise<void> {
    await this.rights.assertWrite(principal, PREDITOR_SEQUENCE, id)
    const taken = await this.knex(SEQUENCES)
      .where({ id })
      .andWhere((q) => q.whereNull('locked_by_id').orWhere('locked_by_id', principal.userId))
      .update({ locked_by_id: principal.userId, locked_at: now(), updated_at: now() })
    if (taken) return
    const row = await this.row(id)
    if (row.locked_by_id === null) return this.open(principal, id) // closed between the two statements
    const holder = await this.holderName(this.knex, row.locked_by_id)
    throw conflict(`Sequence "${row.name}" is open for editing by ${holder} since ${iso(row.locked_at as Date)}`, { locked_by: { id: row.locked_by_id, username: holder }, locked_at: iso(row.locked_at as Date) })
  }

  /** DELETE /close: by the holder, or an administrator (who may break another's lock) */
  async close(principal: Principal, id: number) {
    await this.rights.assertRead(principal, PREDITOR_SEQUENCE, id)
    const row = await this.row(id)
    if (row.locked_by_id === null) throw conflict(`Sequence "${row.name}" is not open`)
    if (row.locked_by_id !== principal.userId && !principal.isAdmin) throw forbidden(`Sequence "${row.name}" is open by ${await this.holderName(this.knex, row.locked_by_id)}; only they or an administrator may close it`)
    const released = await this.knex(SEQUENCES).where({ id, locked_by_id: row.locked_by_id }).update({ locked_by_id: null, locked_at: null, updated_at: now() })
    if (!released) throw conflict(`Sequence "${row.name}" changed hands while closing; try again`)
  }

  async usernames(ids: Array<number | null>): Promise<Map<number, string>> {
    const wanted = [...new Set(ids.filter((i): i is number => i !== null))]
    const rows = wanted.length ? await this.knex('users').whereIn('id', wanted).select('id', 'username') : []
    return new Map(rows.map((r: any) => [Number(r.id), r.username]))
  }

  /** `url` of a clip on a MAM asset is its original's absolute path: administrators only (SECURITY.md; the downloads for editing suites carry it) */
  serializeClip(c: ClipRow, row: SequenceRow, viewer?: Principal) {
    const rate = rateOf(row)
    const df = Boolean(row.drop_frame)
    const length = c.source_out - c.source_in
    return {
      id: c.id,
      kind: c.kind,
      track: trackName(c),
      name: c.name,
      asset_id: c.asset_id,
      offline: c.asset_id === null,
      record_in: c.record_frame,
      record_out: c.record_frame + length,
      source_in: c.source_in,
      source_out: c.source_out,
      duration: length,
      record_in_timecode: timecode(row.start_frame + c.record_frame, rate, df),
      record_out_timecode: timecode(row.start_frame + c.record_frame + length, rate, df),
      source_in_timecode: timecode(c.source_start + c.source_in, rate, df),
      source_out_timecode: timecode(c.source_start + c.source_out, rate, df),
      reel: c.reel,
      url: c.asset_id !== null && !viewer?.isAdmin ? null : c.url,
      file_name: fileNameOf(c.url),
    }
  }

  serialize(s: { row: SequenceRow; clips?: ClipRow[]; markers?: MarkerRow[] }, extra: { usernames: Map<number, string>; counts?: { clips: number; offline: number; markers: number }; viewer?: Principal }) {
    const { row } = s
    const rate = rateOf(row)
    const df = Boolean(row.drop_frame)
    const length = (s.clips ?? []).reduce((n, c) => Math.max(n, c.record_frame + c.source_out - c.source_in), 0)
    const out: Record<string, unknown> = {
      id: row.id,
      uuid: row.uuid,
      project_id: row.project_id,
      name: row.name,
      frame_rate: rateString(rate),
      drop_frame: df,
      start_timecode: timecode(row.start_frame, rate, df),
      width: row.width,
      height: row.height,
      locked_by: row.locked_by_id,
      locked_by_username: row.locked_by_id === null ? null : (extra.usernames.get(row.locked_by_id) ?? null),
      locked_at: iso(row.locked_at as Date | null),
      source_format: row.source_format,
      source_asset_id: row.source_asset_id,
      created_by: row.created_by_id,
      created_at: iso(row.created_at as Date),
      updated_at: iso(row.updated_at as Date),
    }
    if (s.clips) {
      out.duration = length
      out.duration_timecode = durationTimecode(length, rate)
      out.clips = s.clips.map((c) => this.serializeClip(c, row, extra.viewer))
      out.offline_clips = s.clips.filter((c) => c.asset_id === null).length
    } else if (extra.counts) Object.assign(out, { clip_count: extra.counts.clips, offline_clips: extra.counts.offline, marker_count: extra.counts.markers })
    if (s.markers) out.markers = s.markers.map((m) => ({ id: m.id, frame: m.frame, duration: m.duration, timecode: timecode(row.start_frame + m.frame, rate, df), name: m.name, comment: m.comment, color: m.color }))
    return out
  }
}

/** an offline clip as the import answer lists it */
export const offlineJson = (c: SequenceClip, doc: SequenceDoc) => ({
  track: trackName(c),
  name: c.name,
  reel: c.reel ?? null,
  file: pathOfUrl(c.url),
  record_in_timecode: timecode(doc.start + c.record, doc.rate, doc.dropFrame),
  record_out_timecode: timecode(doc.start + clipEnd(c), doc.rate, doc.dropFrame),
  source_in_timecode: timecode((c.sourceStart ?? 0) + c.sourceIn, doc.rate, doc.dropFrame),
})
