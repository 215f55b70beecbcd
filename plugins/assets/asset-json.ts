import { column, iso } from '../../core/index.js'
import type { Asset } from './entities.js'

/** What an asset's JSON is made of: an entity, or a row read without the ORM (listings). */
export type AssetView = Pick<
  Asset,
  'id' | 'uuid' | 'name' | 'type' | 'path' | 'folder' | 'size' | 'duration' | 'online' | 'metadata' | 'analysisState' | 'analysisError' | 'proxyState' | 'proxyError' | 'proxyVersion' | 'proxies' | 'description' | 'crc32' | 'sha256' | 'mtime' | 'createdAt' | 'updatedAt'
> & { project: { id: number; name: string } }

/** the columns `viewOfRow` reads */
export const ASSET_COLUMNS = ['id', 'project_id', 'uuid', 'name', 'type', 'path', 'folder', 'size', 'duration', 'online', 'metadata', 'analysis_state', 'analysis_error', 'proxy_state', 'proxy_error', 'proxy_version', 'proxies', 'description', 'crc32', 'sha256', 'mtime', 'created_at', 'updated_at']

// drivers differ: SQLite gives JSON as text, booleans as 0/1 and dates as numbers; PostgreSQL gives bigints as strings
const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : (v ?? {}))
const date = (v: unknown) => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : (v as string | number)))
const number = (v: unknown) => (v === null || v === undefined ? null : Number(v))

/** a row of `assets` (ASSET_COLUMNS) as the fields of an asset, for listings that skip entity hydration */
export function viewOfRow(r: Record<string, any>, project: { id: number; name: string }): AssetView {
  return {
    id: Number(r.id),
    uuid: r.uuid,
    name: r.name,
    type: r.type,
    project,
    path: r.path,
    folder: r.folder,
    size: Number(r.size),
    duration: number(r.duration),
    online: Boolean(r.online),
    metadata: json(r.metadata),
    analysisState: r.analysis_state,
    analysisError: r.analysis_error,
    proxyState: r.proxy_state,
    proxyError: r.proxy_error,
    proxyVersion: Number(r.proxy_version),
    proxies: json(r.proxies),
    description: r.description,
    crc32: r.crc32,
    sha256: r.sha256,
    mtime: date(r.mtime),
    createdAt: date(r.created_at)!,
    updatedAt: date(r.updated_at)!,
  }
}

export function serializeAsset(a: AssetView) {
  const meta = a.metadata as Record<string, any>
  return {
    id: a.id,
    uuid: a.uuid,
    name: a.name,
    type: a.type,
    project_id: a.project.id,
    project_name: a.project.name,
    path: a.path,
    folder: a.folder,
    size: a.size,
    duration: a.duration,
    online: a.online,
    file_names: [a.name],
    clip_names: [meta.clip_name ?? a.name],
    metadata: a.metadata,
    analysis_state: a.analysisState,
    analysis_error: a.analysisError,
    // `none` (with proxy_error saying why) is final: no proxy job is due; `pending` only while one is
    proxy_state: a.proxyState,
    proxy_error: a.proxyError,
    proxy: { state: a.proxyState, version: a.proxyVersion, kinds: Object.keys(a.proxies) },
    video: a.type === 'video',
    audio: a.type === 'audio' || (a.type === 'video' && meta.audio_channels > 0),
    image: a.type === 'image',
    descriptions: a.description ? [a.description] : [],
    description: a.description,
    crc32: a.crc32,
    sha256: a.sha256,
    archive_strategy_id: null,
    modified_at: iso(a.mtime),
    created_at: iso(a.createdAt),
    updated_at: iso(a.updatedAt),
  }
}

/** epoch ms (SQLite), a numeric string or a Date (PostgreSQL) → ISO 8601, as `iso(date(v))` without the Date in between when it can */
const isoOfColumn = (v: unknown): string | null => (v === null || v === undefined ? null : typeof v === 'number' ? new Date(v).toISOString() : iso(column.date(v)))

/**
 * `serializeAsset(viewOfRow(r, project))` in one step, for listings: a page of 100 assets made 100
 * views, 300 Dates and 100 JSON objects before the answer; this makes the JSON objects alone. The
 * same JSON, key for key (test/plugins/assets/asset-json.test.ts compares the two).
 */
export function assetJsonOfRow(r: Record<string, any>, project: { id: number; name: string }) {
  const meta = json(r.metadata) as Record<string, any>
  const type = r.type
  const description = r.description
  return {
    id: Number(r.id),
    uuid: r.uuid,
    name: r.name,
    type,
    project_id: project.id,
    project_name: project.name,
    path: r.path,
    folder: r.folder,
    size: Number(r.size),
    duration: number(r.duration),
    online: Boolean(r.online),
    file_names: [r.name],
    clip_names: [meta.clip_name ?? r.name],
    metadata: meta,
    analysis_state: r.analysis_state,
    analysis_error: r.analysis_error,
    proxy_state: r.proxy_state,
    proxy_error: r.proxy_error,
    proxy: { state: r.proxy_state, version: Number(r.proxy_version), kinds: Object.keys(json(r.proxies)) },
    video: type === 'video',
    audio: type === 'audio' || (type === 'video' && meta.audio_channels > 0),
    image: type === 'image',
    descriptions: description ? [description] : [],
    description,
    crc32: r.crc32,
    sha256: r.sha256,
    archive_strategy_id: null,
    modified_at: isoOfColumn(r.mtime),
    created_at: isoOfColumn(r.created_at),
    updated_at: isoOfColumn(r.updated_at),
  }
}
