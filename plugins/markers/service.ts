import { column, iso, conflict, invalid, notFound, type EntityManager, type Knex, type Principal, type ParamError } from '../../core/index.js'
import type { Asset } from '../assets/index.js'
import { MarkerDescription } from './entities.js'
import { COLORS, DEFAULT_COLOR, normalizeColor, type MarkerColor } from './colors.js'
import { frameOf, rateString, sameRate, tcOf, timecodeBase, toRate, type Rate, type TimecodeBase } from './timecode.js'

export const MAX_TEXT = 10_000
export const MAX_GUID = 128
const TRACK = /^(V|A|TC)\d{1,2}$/

/** what an asset's timeline looks like to its markers */
export interface Timeline {
  base: TimecodeBase
  /** frames in the asset; null when its duration is unknown */
  frames: number | null
}

/** fields as a client sends them; `param` names them the way they were sent (`marker_description[in]`) */
export interface MarkerInput {
  in?: number | string
  out?: number | string
  text?: string
  color?: string
  guid?: string | null
  track?: string | null
  author?: string | null
  rate?: number | string
  parent_id?: number | null
}

/** a marker as the editing-suite readers and writers see it (frames on the asset's timeline) */
export interface PlainMarker {
  id?: number
  in: number
  out: number
  text: string
  color: MarkerColor
  track: string | null
  author: string | null
  guid: string | null
  replies?: PlainMarker[]
  createdAt?: Date | null
}

export interface MarkerRow {
  id: number
  asset_id: number
  parent_id: number | null
  in_frame: number
  out_frame: number
  rate_num: number
  rate_den: number
  text: string
  color: string
  track: string | null
  author: string | null
  guid: string | null
  created_by_id: number | null
  created_by_name: string | null
  updated_by_id: number | null
  created_at: unknown
  updated_at: unknown
}

const ROW_COLUMNS = [
  'm.id', 'm.asset_id', 'm.parent_id', 'm.in_frame', 'm.out_frame', 'm.rate_num', 'm.rate_den', 'm.text', 'm.color', 'm.track', 'm.author', 'm.guid',
  'm.created_by_id', 'u.username as created_by_name', 'm.updated_by_id', 'm.created_at', 'm.updated_at',
]

/**
 * Marker descriptions of assets (§4.7). Frames are the truth; timecode labels are computed from the
 * asset's rate and start timecode. Access goes through the assets plugin (the asset's project):
 * callers pass an asset they checked.
 */
export class MarkerService {
  constructor(
    private readonly knex: Knex,
    /** the rate of assets without a video frame rate (audio) */
    private readonly defaultRate: Rate,
  ) {}

  timeline(asset: Pick<Asset, 'metadata' | 'duration'>): Timeline {
    const meta = asset.metadata as Record<string, unknown>
    const rate = toRate(meta.frame_rate) ?? this.defaultRate
    const base = timecodeBase(rate, meta.start_timecode)
    const frames = typeof asset.duration === 'number' && asset.duration > 0 ? Math.max(1, Math.round((asset.duration * rate.num) / rate.den)) : null
    return { base, frames }
  }

  /** top-level markers of an asset in timeline order, each with its replies */
  async list(assetId: number, options: { afterIn?: number; afterId?: number; limit: number }): Promise<MarkerRow[]> {
    let q = this.rows().where('m.asset_id', assetId).whereNull('m.parent_id')
    if (options.afterIn !== undefined) q = q.whereRaw('(m.in_frame, m.id) > (?, ?)', [options.afterIn, options.afterId ?? 0])
    const roots = (await q.orderBy([{ column: 'm.in_frame' }, { column: 'm.id' }]).limit(options.limit)) as MarkerRow[]
    return roots.map(normalizeRow)
  }

  /** the replies of these markers, by parent id, oldest first */
  async repliesOf(parentIds: number[]): Promise<Map<number, MarkerRow[]>> {
    const out = new Map<number, MarkerRow[]>()
    for (let i = 0; i < parentIds.length; i += 500) {
      const rows = (await this.rows().whereIn('m.parent_id', parentIds.slice(i, i + 500)).orderBy('m.id')) as MarkerRow[]
      for (const r of rows.map(normalizeRow)) {
        const list = out.get(r.parent_id!) ?? []
        list.push(r)
        out.set(r.parent_id!, list)
      }
    }
    return out
  }

  /** every marker of an asset with its replies (exports); bounded by the asset's marker count */
  async all(assetId: number): Promise<PlainMarker[]> {
    const out: PlainMarker[] = []
    let after: MarkerRow | undefined
    for (;;) {
      const page = await this.list(assetId, { afterIn: after?.in_frame, afterId: after?.id, limit: 2000 })
      const replies = await this.repliesOf(page.map((r) => r.id))
      for (const r of page) out.push({ ...plain(r), replies: (replies.get(r.id) ?? []).map(plain) })
      if (page.length < 2000) return out
      after = page[page.length - 1]
    }
  }

  async row(assetId: number, id: number): Promise<MarkerRow> {
    const row = (await this.rows().where({ 'm.id': id, 'm.asset_id': assetId }).first()) as MarkerRow | undefined
    if (!row) throw notFound('marker description', id)
    return normalizeRow(row)
  }

  async get(em: EntityManager, assetId: number, id: number): Promise<MarkerDescription> {
    const marker = await em.findOne(MarkerDescription, { id, assetId })
    if (!marker) throw notFound('marker description', id)
    return marker
  }

  /**
   * Checks one marker's fields against the asset's timeline; returns the frames and fields to store.
   * `current` is the marker being changed (absent on create). Errors name fields via `param`.
   */
  async validate(
    em: EntityManager,
    asset: Asset,
    timeline: Timeline,
    input: MarkerInput,
    param: (field: string) => string,
    current?: MarkerDescription,
  ): Promise<{ fields: Partial<MarkerDescription>; errors: ParamError[] }> {
    const errors: ParamError[] = []
    const fields: Partial<MarkerDescription> = {}
    const { base, frames } = timeline
    if (input.rate !== undefined) {
      const rate = toRate(input.rate)
      if (!rate) errors.push({ param: param('rate'), message: 'is not a frame rate (25, 29.97, 30000/1001 …)' })
      else if (!sameRate(rate, base.rate)) errors.push({ param: param('rate'), message: `does not match the asset's rate ${rateString(base.rate)}` })
    }
    let parent: MarkerDescription | null = null
    if (input.parent_id !== undefined && input.parent_id !== null && !current) {
      parent = await em.findOne(MarkerDescription, { id: input.parent_id, assetId: asset.id })
      if (!parent) errors.push({ param: param('parent_id'), message: `is not a marker of asset ${asset.id}` })
      else if (parent.parentId !== null) errors.push({ param: param('parent_id'), message: `is a reply; reply to its marker ${parent.parentId}` })
      else fields.parentId = parent.id
    }
    const frame = (field: 'in' | 'out'): number | undefined => {
      const value = input[field]
      if (value === undefined) return undefined
      let n: number | null
      if (typeof value === 'number') n = value
      else if (/^\d{1,9}$/.test(value.trim())) n = Number(value)
      else n = frameOf(base, value)
      if (n === null || !Number.isInteger(n)) {
        errors.push({ param: param(field), message: `is neither a frame number nor a timecode HH:MM:SS:FF (HH:MM:SS;FF drop-frame) at ${rateString(base.rate)} fps` })
        return undefined
      }
      if (n < 0) {
        errors.push({ param: param(field), message: typeof value === 'string' && !/^\d+$/.test(value) ? `is before the asset's start timecode ${tcOf(base, 0)}` : 'must not be negative' })
        return undefined
      }
      if (frames !== null && n >= frames) {
        errors.push({ param: param(field), message: `is beyond the asset's duration (${frames} frames, last ${tcOf(base, frames - 1)})` })
        return undefined
      }
      return n
    }
    const inFrame = frame('in') ?? (current ? current.inFrame : parent ? parent.inFrame : undefined)
    let outFrame = frame('out')
    if (inFrame === undefined && !errors.some((e) => e.param === param('in'))) errors.push({ param: param('in'), message: 'is required' })
    if (outFrame === undefined && !errors.some((e) => e.param === param('out')))
      outFrame = current && input.in === undefined ? current.outFrame : parent && input.in === undefined ? parent.outFrame : inFrame
    if (inFrame !== undefined && outFrame !== undefined && outFrame < inFrame) errors.push({ param: param('out'), message: `is before in (${tcOf(base, outFrame)} < ${tcOf(base, inFrame)})` })
    if (inFrame !== undefined) fields.inFrame = inFrame
    if (outFrame !== undefined) fields.outFrame = outFrame
    if (input.text !== undefined) {
      if (input.text.length > MAX_TEXT) errors.push({ param: param('text'), message: `is longer than ${MAX_TEXT} characters` })
      else if (input.text.includes('\u0000')) errors.push({ param: param('text'), message: 'must not contain NUL characters' })
      else if (parent && input.text.trim() === '') errors.push({ param: param('text'), message: 'must not be blank in a reply' })
      else fields.text = input.text
    } else if (!current) {
      if (parent) errors.push({ param: param('text'), message: 'is required' })
      else fields.text = ''
    }
    if (input.color !== undefined) {
      const color = normalizeColor(input.color)
      if (!color) errors.push({ param: param('color'), message: `is not a marker colour (${COLORS.join(', ')})` })
      else fields.color = color
    } else if (!current) fields.color = parent ? (parent.color as MarkerColor) : DEFAULT_COLOR
    if (input.track !== undefined) {
      if (input.track !== null && !TRACK.test(input.track)) errors.push({ param: param('track'), message: 'is not a track name (V1, A2, TC1 …)' })
      else fields.track = input.track
    }
    if (input.author !== undefined) {
      if (input.author !== null && input.author.length > 255) errors.push({ param: param('author'), message: 'is longer than 255 characters' })
      else fields.author = input.author
    }
    if (input.guid !== undefined) {
      const guid = input.guid === null || input.guid.trim() === '' ? null : input.guid.trim()
      if (guid !== null && (guid.length > MAX_GUID || /[\u0000-\u001f]/.test(guid))) errors.push({ param: param('guid'), message: `is not an editing-suite id (at most ${MAX_GUID} printable characters)` })
      else fields.guid = guid
    }
    return { fields, errors }
  }

  async create(em: EntityManager, principal: Principal, asset: Asset, timeline: Timeline, input: MarkerInput, param: (f: string) => string): Promise<MarkerDescription> {
    const { fields, errors } = await this.validate(em, asset, timeline, input, param)
    if (errors.length) throw invalid(errors)
    const marker = em.create(MarkerDescription, {
      assetId: asset.id,
      ...fields,
      rateNum: timeline.base.rate.num,
      rateDen: timeline.base.rate.den,
      createdById: principal.userId,
      updatedById: principal.userId,
    } as MarkerDescription)
    await this.flushGuid(em, fields.guid, param)
    return marker
  }

  async update(em: EntityManager, principal: Principal, asset: Asset, timeline: Timeline, marker: MarkerDescription, input: MarkerInput, param: (f: string) => string): Promise<MarkerDescription> {
    const { fields, errors } = await this.validate(em, asset, timeline, input, param, marker)
    if (input.parent_id !== undefined && input.parent_id !== marker.parentId) errors.push({ param: param('parent_id'), message: 'cannot be changed' })
    if (errors.length) throw invalid(errors)
    Object.assign(marker, fields, { updatedById: principal.userId, rateNum: timeline.base.rate.num, rateDen: timeline.base.rate.den })
    await this.flushGuid(em, fields.guid, param)
    return marker
  }

  /** a taken editing-suite id is a 409 naming the field (the unique index decides under races) */
  private async flushGuid(em: EntityManager, guid: string | null | undefined, param: (f: string) => string) {
    try {
      await em.flush()
    } catch (err) {
      if ((err as { name?: string }).name !== 'UniqueConstraintViolationException') throw err
      em.clear()
      throw conflict(`Another marker of this asset has the editing-suite id "${guid}"`, { errors: [{ param: param('guid'), message: 'is taken by another marker of this asset' }] })
    }
  }

  /** removes a marker and its replies */
  async remove(em: EntityManager, marker: MarkerDescription): Promise<void> {
    await em.transactional(async (tx) => {
      await tx.nativeDelete(MarkerDescription, { parentId: marker.id })
      await tx.nativeDelete(MarkerDescription, { id: marker.id })
    })
    em.getUnitOfWork().unsetIdentity(marker)
  }

  /**
   * Sets editing-suite ids on many markers at once, matched by `id` or by `in` (frame or timecode)
   * plus `text`. All or nothing: one unmatched entry, a bad value or a taken id changes nothing.
   */
  async bulkSetGuids(
    em: EntityManager,
    principal: Principal,
    asset: Asset,
    timeline: Timeline,
    entries: Array<{ id?: number; in?: number | string; text?: string; guid: string | null }>,
    param: (i: number, field: string) => string,
  ): Promise<MarkerDescription[]> {
    return em.transactional(async (tx) => {
      const errors: ParamError[] = []
      const matched: Array<[MarkerDescription, string | null]> = []
      const seen = new Map<string, number>()
      for (const [i, entry] of entries.entries()) {
        const guid = entry.guid === null || entry.guid.trim() === '' ? null : entry.guid.trim()
        if (guid !== null && (guid.length > MAX_GUID || /[\u0000-\u001f]/.test(guid))) {
          errors.push({ param: param(i, 'guid'), message: `is not an editing-suite id (at most ${MAX_GUID} printable characters)` })
          continue
        }
        if (guid !== null) {
          if (seen.has(guid)) errors.push({ param: param(i, 'guid'), message: `repeats entry ${seen.get(guid)}` })
          seen.set(guid, i)
        }
        let marker: MarkerDescription | null = null
        if (entry.id !== undefined) {
          marker = await tx.findOne(MarkerDescription, { id: entry.id, assetId: asset.id })
          if (!marker) errors.push({ param: param(i, 'id'), message: `is not a marker of asset ${asset.id}` })
        } else if (entry.in !== undefined && entry.text !== undefined) {
          const frame = typeof entry.in === 'number' ? entry.in : /^\d+$/.test(entry.in) ? Number(entry.in) : frameOf(timeline.base, entry.in)
          if (frame === null) errors.push({ param: param(i, 'in'), message: 'is neither a frame number nor a timecode' })
          else {
            const found = await tx.find(MarkerDescription, { assetId: asset.id, inFrame: frame, text: entry.text, parentId: null }, { orderBy: { id: 'asc' }, limit: 2 })
            if (found.length === 0) errors.push({ param: param(i, 'in'), message: `and text match no marker of asset ${asset.id}` })
            else if (found.length > 1) errors.push({ param: param(i, 'in'), message: 'and text match several markers; send their ids' })
            else marker = found[0]
          }
        } else errors.push({ param: param(i, 'id'), message: 'or in and text are required' })
        if (marker) matched.push([marker, guid])
      }
      if (errors.length) throw invalid(errors)
      // ids moving between markers of this batch: clear first, so the unique index sees the end state
      for (const [marker] of matched) marker.guid = null
      await tx.flush()
      for (const [marker, guid] of matched) Object.assign(marker, { guid, updatedById: principal.userId })
      try {
        await tx.flush()
      } catch (err) {
        if ((err as { name?: string }).name !== 'UniqueConstraintViolationException') throw err
        throw conflict('An editing-suite id of this request belongs to another marker of the asset', { errors: [{ param: 'marker_descriptions', message: 'contain an id taken by another marker' }] })
      }
      return matched.map(([m]) => m)
    })
  }

  /** inserts many markers (an imported marker list) in one transaction */
  async insertMany(em: EntityManager, principal: Principal, asset: Asset, timeline: Timeline, markers: PlainMarker[]): Promise<number[]> {
    return em.transactional(async (tx) => {
      const created = markers.map((m) =>
        tx.create(MarkerDescription, {
          assetId: asset.id,
          parentId: null,
          inFrame: m.in,
          outFrame: m.out,
          rateNum: timeline.base.rate.num,
          rateDen: timeline.base.rate.den,
          text: m.text,
          color: m.color,
          track: m.track,
          author: m.author,
          guid: m.guid,
          createdById: principal.userId,
          updatedById: principal.userId,
        } as MarkerDescription),
      )
      try {
        await tx.flush()
      } catch (err) {
        if ((err as { name?: string }).name !== 'UniqueConstraintViolationException') throw err
        throw conflict('A marker id in the file belongs to another marker of the asset already', { errors: [{ param: 'file', message: 'repeats an editing-suite id the asset has' }] })
      }
      return created.map((m) => m.id)
    })
  }

  serialize(row: MarkerRow, timeline: Timeline, replies?: MarkerRow[]): Record<string, unknown> {
    const base = { ...timeline.base, rate: { num: row.rate_num, den: row.rate_den } }
    return {
      id: row.id,
      asset_id: row.asset_id,
      parent_id: row.parent_id,
      guid: row.guid,
      in: row.in_frame,
      out: row.out_frame,
      tc_in: tcOf(base, row.in_frame),
      tc_out: tcOf(base, row.out_frame),
      duration: row.out_frame - row.in_frame + 1,
      rate: rateString(base.rate),
      drop_frame: base.dropFrame,
      text: row.text,
      color: row.color,
      track: row.track,
      author: row.author,
      created_by: row.created_by_id,
      created_by_name: row.created_by_name,
      updated_by: row.updated_by_id,
      ...(replies ? { replies: replies.map((r) => this.serialize(r, timeline)) } : {}),
      created_at: iso(column.date(row.created_at)),
      updated_at: iso(column.date(row.updated_at)),
    }
  }

  private rows() {
    return this.knex('marker_descriptions as m').leftJoin('users as u', 'u.id', 'm.created_by_id').select(ROW_COLUMNS)
  }
}

function normalizeRow(r: MarkerRow): MarkerRow {
  return {
    ...r,
    id: Number(r.id),
    asset_id: Number(r.asset_id),
    parent_id: column.intOrNull(r.parent_id),
    in_frame: Number(r.in_frame),
    out_frame: Number(r.out_frame),
    rate_num: Number(r.rate_num),
    rate_den: Number(r.rate_den),
    created_by_id: column.intOrNull(r.created_by_id),
    updated_by_id: column.intOrNull(r.updated_by_id),
  }
}

export const plain = (r: MarkerRow): PlainMarker => ({
  id: r.id,
  in: r.in_frame,
  out: r.out_frame,
  text: r.text,
  color: (normalizeColor(r.color) ?? DEFAULT_COLOR) as MarkerColor,
  track: r.track,
  author: r.author ?? r.created_by_name,
  guid: r.guid,
  createdAt: column.date(r.created_at),
})
