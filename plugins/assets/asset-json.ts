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
/** a JSON object column (text on SQLite, parsed on PostgreSQL); anything but an object reads as {} (a stored `null` made listings fail) */
const json = (v: unknown): Record<string, any> => {
  const parsed = typeof v === 'string' ? JSON.parse(v) : v
  return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {}
}
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

/** a timestamptz as `toISOString()` spells it (`2026-11-25T05:44:48.029Z`; to_char's MS truncates, as a Date does) */
const isoSql = (c: string) => `to_char(${c} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
/** years a Date parses from PostgreSQL's text and `isoSql` spells alike (a year below 1000 was misread by the Date parser) */
const isoSafe = (c: string) => `(${c} >= '1900-01-01' and ${c} < '10000-01-01')`
/** a nullable text column as a JSON value */
const jsonText = (c: string) => `coalesce(to_json(${c})::text, 'null')`

/**
 * PostgreSQL: the text of `JSON.stringify(assetJsonOfRow(r, project))` made by the database, for
 * listings (a page of 100 assets: the driver's parsing of 2,300 values, 300 timestamps and 200 JSON
 * columns, the objects and their stringifying were most of the Node process's time per page).
 * `a` is the alias of `assets` in the statement, which must join `from` (a lateral item, `<a>_m`) right after it;
 * `projectName` is the SQL of the project's name (a bound `?::text`).
 *
 * `json` is byte for byte what `assetJsonOfRow` + JSON.stringify answer when `ok` is true:
 * - strings: to_json escapes as JSON.stringify does (test/plugins/assets/asset-json.test.ts);
 * - `metadata` and `proxies` are sent as stored: every writer stores JSON.stringify's text (the ORM's
 *   json type, ingest's `'{}'`), which JSON.parse + JSON.stringify give back unchanged;
 * - numbers: `size` within ±2^53, `duration` where PostgreSQL writes it as JavaScript does (shortest
 *   digits, no exponent: 0, or 1e-4 ≤ |d| < 1e15); timestamps in the years 1900–9999;
 * - `clip_names` is `metadata.clip_name ?? name`; `audio` needs `audio_channels > 0` of a video, so
 *   a string, array or object there (JavaScript's coercions) is not `ok`; `metadata`/`proxies`
 *   other than objects (`null` answers `{}`) are not `ok`.
 * A row that is not `ok` is answered by `assetJsonOfRow` from its plain columns (the caller reads them).
 */
export function assetJsonSql(a: string, projectName: string) {
  const m = `${a}_m`
  const video = `${a}.type = 'video'`
  const channels = `json_typeof(${m}.audio_channels)`
  const json =
    `'{"id":' || ${a}.id || ',"uuid":' || to_json(${a}.uuid) || ',"name":' || to_json(${a}.name) || ',"type":' || to_json(${a}.type)` +
    ` || ',"project_id":' || ${a}.project_id || ',"project_name":' || to_json(${projectName}) || ',"path":' || to_json(${a}.path) || ',"folder":' || to_json(${a}.folder)` +
    ` || ',"size":' || ${a}.size || ',"duration":' || coalesce(${a}.duration::text, 'null') || ',"online":' || ${a}.online` +
    ` || ',"file_names":[' || to_json(${a}.name) || '],"clip_names":[' || (case when ${m}.clip_name is null or json_typeof(${m}.clip_name) = 'null' then to_json(${a}.name) else ${m}.clip_name end)` +
    ` || '],"metadata":' || ${a}.metadata || ',"analysis_state":' || to_json(${a}.analysis_state) || ',"analysis_error":' || ${jsonText(`${a}.analysis_error`)}` +
    ` || ',"proxy_state":' || to_json(${a}.proxy_state) || ',"proxy_error":' || ${jsonText(`${a}.proxy_error`)}` +
    ` || ',"proxy":{"state":' || to_json(${a}.proxy_state) || ',"version":' || ${a}.proxy_version || ',"kinds":' || array_to_json(array(select json_object_keys(${m}.proxies_object)))` +
    ` || '},"video":' || (${video}) || ',"audio":' || (${a}.type = 'audio' or (${video} and coalesce(${channels} = 'number' and ${m}.audio_channels::text::numeric > 0 or ${channels} = 'boolean' and ${m}.audio_channels::text = 'true', false)))` +
    ` || ',"image":' || (${a}.type = 'image') || ',"descriptions":' || (case when ${a}.description <> '' then '[' || to_json(${a}.description) || ']' else '[]' end)` +
    ` || ',"description":' || ${jsonText(`${a}.description`)} || ',"crc32":' || ${jsonText(`${a}.crc32`)} || ',"sha256":' || ${jsonText(`${a}.sha256`)} || ',"archive_strategy_id":null'` +
    ` || ',"modified_at":' || coalesce('"' || ${isoSql(`${a}.mtime`)} || '"', 'null') || ',"created_at":"' || ${isoSql(`${a}.created_at`)} || '","updated_at":"' || ${isoSql(`${a}.updated_at`)} || '"}'`
  const ok =
    `(json_typeof(${a}.metadata) = 'object' and json_typeof(${a}.proxies) = 'object'` +
    ` and ${a}.size between -9007199254740991 and 9007199254740991` +
    ` and (${a}.duration is null or ${a}.duration::text = '0' or (abs(${a}.duration) >= 1e-4 and abs(${a}.duration) < 1e15))` +
    ` and (${a}.mtime is null or ${isoSafe(`${a}.mtime`)}) and ${isoSafe(`${a}.created_at`)} and ${isoSafe(`${a}.updated_at`)}` +
    ` and (not (${video}) or ${channels} is null or ${channels} in ('null', 'number', 'boolean')))`
  // one parse of each JSON column for the fields read from it (a non-object reads as {}: such a row is not `ok`)
  const from =
    `cross join lateral (select r.clip_name, r.audio_channels, case when json_typeof(${a}.proxies) = 'object' then ${a}.proxies else '{}' end as proxies_object` +
    ` from json_to_record(case when json_typeof(${a}.metadata) = 'object' then ${a}.metadata else '{}' end) as r(clip_name json, audio_channels json)) ${m}`
  return { json, ok, from }
}
