import path from 'node:path'
import { escapeLike, type Dialect, type Knex } from '../../core/index.js'
import type { ProjectService } from '../projects/index.js'
import { fileNameOf, fileUrl, pathOfUrl, type SequenceClip, type SequenceDoc } from './model.js'
import type { AssetTiming } from './service.js'
import { convertFrames, framesOfTimecode, toRate, type Rate } from './time.js'

/** the asset columns a timeline needs */
const COLUMNS = ['a.id', 'a.name', 'a.path', 'a.type', 'a.metadata', 'a.duration', 'p.storage', 'p.folder']
const IN_LIST = 500

interface AssetRow {
  id: number
  name: string
  path: string
  type: string
  metadata: unknown
  duration: number | null
  storage: string
  folder: string
}

const metadataOf = (m: unknown): Record<string, unknown> => {
  if (typeof m === 'string') {
    try {
      return JSON.parse(m) ?? {}
    } catch {
      return {}
    }
  }
  return (m as Record<string, unknown>) ?? {}
}

/**
 * An asset's place on a timeline at `rate`, from its probe metadata (assets plugin, §4.6): its
 * video frame rate (audio has none and fits any rate), start timecode and duration in frames.
 */
export function timingOf(asset: { id: number; name: string; type: string; metadata: unknown; duration: number | null }, url: string, rate: Rate): AssetTiming {
  const meta = metadataOf(asset.metadata)
  const own = asset.type === 'video' ? toRate(meta.frame_rate) : null
  const tc = typeof meta.start_timecode === 'string' ? meta.start_timecode : null
  const at = own ?? rate
  const parsed = tc ? framesOfTimecode(tc, at) : null
  const seconds = typeof asset.duration === 'number' ? asset.duration : Number(asset.duration)
  return {
    id: Number(asset.id),
    name: asset.name,
    type: asset.type,
    rate: own,
    start: parsed === null ? 0 : convertFrames(parsed, at, rate),
    frames: Number.isFinite(seconds) && seconds > 0 ? Math.max(1, Math.round((seconds * rate.num) / rate.den)) : null,
    reel: typeof meta.reel_name === 'string' && meta.reel_name ? meta.reel_name : null,
    hasAudio: asset.type === 'audio' || Number(meta.audio_channels) > 0 || Number(meta.audio_streams) > 0,
    url,
  }
}

export type MatchedBy = 'path' | 'name' | 'reel'

export interface ConformResult {
  doc: SequenceDoc
  matched: Record<MatchedBy, number>
  offline: SequenceClip[]
}

/**
 * Finds the MAM asset of each clip among the project's assets: by path (the clip's file path ends
 * with the asset's path in the project, two segments at least), then by file name (the file's name,
 * else the clip's name, with or without extension), then by reel and timecode (the asset's reel
 * name, and its timecode range covers the clip's source range). Lookups are batched `IN` lists, so
 * the cost follows the clips, not the size of the project. A matched clip points at the asset's
 * original; its source times are moved onto the asset's start timecode when the file gave only
 * timecodes (EDL). The rest stay offline clips.
 */
export class Conformer {
  constructor(
    private readonly knex: Knex,
    private readonly projects: ProjectService,
    private readonly dialect: Dialect,
  ) {}

  private query(projectId: number) {
    return this.knex('assets as a').join('projects as p', 'p.id', 'a.project_id').where('a.project_id', projectId).select(COLUMNS)
  }

  private urlOf(row: AssetRow) {
    return fileUrl(path.join(this.projects.pathOf({ storage: row.storage, folder: row.folder } as any), ...row.path.split('/')))
  }

  /** the timing of assets by id (any project), for writing their clips with the originals' URLs */
  async timings(ids: number[], rate: Rate): Promise<Map<number, AssetTiming>> {
    const out = new Map<number, AssetTiming>()
    const unique = [...new Set(ids)]
    for (let i = 0; i < unique.length; i += IN_LIST) {
      const rows: AssetRow[] = await this.knex('assets as a').join('projects as p', 'p.id', 'a.project_id').whereIn('a.id', unique.slice(i, i + IN_LIST)).select(COLUMNS)
      for (const r of rows) out.set(Number(r.id), timingOf(r, this.urlOf(r), rate))
    }
    return out
  }

  /** name, path, type and size of assets by id, for reports */
  async describe(ids: number[]): Promise<Array<{ id: number; name: string; path: string; type: string; size: number }>> {
    const out = []
    const unique = [...new Set(ids)]
    for (let i = 0; i < unique.length; i += IN_LIST)
      for (const r of await this.knex('assets').whereIn('id', unique.slice(i, i + IN_LIST)).select('id', 'name', 'path', 'type', 'size')) out.push({ id: Number(r.id), name: r.name, path: r.path, type: r.type, size: Number(r.size) })
    return out
  }

  private async byColumn(projectId: number, column: string, values: string[]): Promise<AssetRow[]> {
    const out: AssetRow[] = []
    const unique = [...new Set(values)]
    for (let i = 0; i < unique.length; i += IN_LIST) out.push(...(await this.query(projectId).whereIn(column, unique.slice(i, i + IN_LIST)).orderBy('a.id')))
    return out
  }

  private reelColumn() {
    return this.dialect === 'postgresql' ? this.knex.raw(`(a.metadata::jsonb ->> 'reel_name')`) : this.knex.raw(`json_extract(a.metadata, '$.reel_name')`)
  }

  async conform(doc: SequenceDoc, projectId: number): Promise<ConformResult> {
    const matched: Record<MatchedBy, number> = { path: 0, name: 0, reel: 0 }
    const found = new Map<SequenceClip, AssetRow>()
    const rate = doc.rate

    // 1. by path: every suffix of two or more segments of the clip's file path
    const suffixes = new Map<SequenceClip, string[]>()
    for (const c of doc.clips) {
      const segments = (pathOfUrl(c.url) ?? '').split('/').filter(Boolean)
      const list: string[] = []
      for (let n = Math.min(segments.length, 12); n >= 2; n--) list.push(segments.slice(-n).join('/'))
      if (list.length) suffixes.set(c, list)
    }
    const byPath = new Map((await this.byColumn(projectId, 'a.path', [...suffixes.values()].flat())).map((r) => [r.path, r]))
    for (const [c, list] of suffixes) {
      const hit = list.map((s) => byPath.get(s)).find(Boolean)
      if (hit) {
        found.set(c, hit)
        matched.path++
      }
    }

    // 2. by file name: the file's name, else the clip's name; then the clip's name as a stem
    const rest = () => doc.clips.filter((c) => !found.has(c))
    const names = (c: SequenceClip) => [fileNameOf(c.url), c.name].filter((n): n is string => Boolean(n))
    const byName = new Map<string, AssetRow>()
    for (const r of await this.byColumn(projectId, 'a.name', rest().flatMap(names))) if (!byName.has(r.name)) byName.set(r.name, r)
    for (const c of rest()) {
      const hit = names(c).map((n) => byName.get(n)).find(Boolean)
      if (hit) {
        found.set(c, hit)
        matched.name++
      }
    }
    const stems = [...new Set(rest().map((c) => c.name).filter((n) => n && !/\.\w{2,5}$/.test(n)))]
    if (stems.length) {
      const rows: AssetRow[] = []
      for (let i = 0; i < stems.length; i += 100) {
        const batch = stems.slice(i, i + 100)
        rows.push(...(await this.query(projectId).where((q) => batch.forEach((s) => q.orWhereRaw(`a.name like ? escape '\\'`, [`${escapeLike(s)}.%`]))).orderBy('a.id').limit(1000)))
      }
      for (const c of rest()) {
        const hit = rows.find((r) => r.name.slice(0, r.name.lastIndexOf('.')) === c.name)
        if (hit) {
          found.set(c, hit)
          matched.name++
        }
      }
    }

    // 3. by reel and timecode
    const reels = [...new Set(rest().map((c) => c.reel).filter((r): r is string => Boolean(r)))]
    if (reels.length) {
      const candidates: AssetRow[] = []
      for (let i = 0; i < reels.length; i += IN_LIST) candidates.push(...(await this.query(projectId).whereIn(this.reelColumn() as any, reels.slice(i, i + IN_LIST)).orderBy('a.id')))
      for (const c of rest()) {
        const hit = candidates.find((r) => {
          const t = timingOf(r, '', rate)
          if (t.reel !== c.reel || t.frames === null) return false
          const from = c.sourceStart === null ? c.sourceIn : c.sourceStart + c.sourceIn
          const to = from + (c.sourceOut - c.sourceIn)
          return from >= t.start && to <= t.start + t.frames
        })
        if (hit) {
          found.set(c, hit)
          matched.reel++
        }
      }
    }

    const clips = doc.clips.map((c) => {
      const row = found.get(c)
      if (!row) return { ...c, assetId: null, sourceStart: c.sourceStart ?? 0 }
      const t = timingOf(row, this.urlOf(row), rate)
      // an EDL gives the source as timecode: it becomes frames from the asset's first frame
      const shift = c.sourceStart === null ? t.start : 0
      return { ...c, assetId: t.id, url: t.url, reel: c.reel ?? t.reel, sourceStart: c.sourceStart === null ? t.start : c.sourceStart, sourceIn: c.sourceIn - shift, sourceOut: c.sourceOut - shift }
    })
    return { doc: { ...doc, clips }, matched, offline: clips.filter((c) => !c.assetId) }
  }
}

/** a rate a client sends: `25`, `29.97`, `30000/1001` */
export const parseRate = (value: unknown): Rate | null => (typeof value === 'number' || typeof value === 'string' ? toRate(value) : null)
