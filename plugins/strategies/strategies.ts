import { mkdir, realpath } from 'node:fs/promises'
import path from 'node:path'
import { DiskTarget } from './targets/disk.js'
import { S3Target, parseS3Url } from './targets/s3.js'
import type { Target } from './targets/types.js'

import { MamError, conflict, deriveKey, invalid, isInside, isUniqueViolation, iso, notFound, unseal, seal, type Knex, type ParamError, type Principal } from '../../core/index.js'
export const KINDS = ['archive', 'backup', 'asset_copy_to', 'project_copy_to'] as const
export type StrategyKind = (typeof KINDS)[number]
export const TRANSMISSION_CHECKS = ['none', 'size', 'checksum', 'fingerprint'] as const
export const STRATEGY_TYPES = ['standard', 'full', 'incremental'] as const
export const CONTENTS = ['media', 'project_files', 'both'] as const

/** root keys of wire.md, per kind */
export const ROOT_KEY: Record<StrategyKind, string> = {
  archive: 'archivestrategy',
  backup: 'backupstrategy',
  asset_copy_to: 'assetcopytostrategy',
  project_copy_to: 'projectcopytostrategy',
}
/** the wrapping parameter clients send (`archive_strategy[name]`) */
export const WRAP_KEY: Record<StrategyKind, string> = {
  archive: 'archive_strategy',
  backup: 'backup_strategy',
  asset_copy_to: 'asset_copy_to_strategy',
  project_copy_to: 'project_copy_to_strategy',
}

export interface StrategyRow {
  id: number
  kind: StrategyKind
  name: string
  destination: string
  target_kind: 'disk' | 's3'
  target: Record<string, any>
  format: string
  admin_only: boolean
  includes: string[]
  transmission_check: (typeof TRANSMISSION_CHECKS)[number]
  enabled: boolean
  strategy_type: string
  contents: string
  delete_project: boolean
  keep: number
  incremental: boolean
  created_at: Date
  updated_at: Date
}

export interface StrategyFields {
  name?: string
  destination?: string
  target?: Record<string, unknown> | null
  format?: string
  admin_only?: boolean
  includes?: string[] | null
  transmission_check?: string
  enabled?: boolean
  strategy_type?: string
  contents?: string
  delete_project?: boolean
  keep?: number
}

const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v)
const bool = (v: unknown) => v === true || v === 1 || v === '1' || v === 't'

function fromDb(r: any): StrategyRow {
  return { ...r, id: Number(r.id), target: json(r.target) ?? {}, includes: json(r.includes) ?? [], admin_only: bool(r.admin_only), enabled: bool(r.enabled), delete_project: bool(r.delete_project), incremental: bool(r.incremental), keep: Number(r.keep) }
}

/**
 * Strategies: where archives, backups and copies go. Disk destinations must lie inside one of the
 * configured roots (`plugins.strategies.roots`): an administrator's typo must not make the server
 * write into /etc or into a project storage. S3 secret keys are sealed at rest under a key derived
 * from the server key, bound to the strategy's id.
 */
export class StrategyService {
  private readonly key: Buffer
  constructor(
    private readonly knex: Knex,
    secretKey: Buffer,
    private readonly roots: () => string[],
  ) {
    this.key = deriveKey(secretKey, 'strategies.target')
  }

  async list(kind: StrategyKind, viewer: Principal): Promise<StrategyRow[]> {
    const q = this.knex('strategies').where({ kind }).orderBy('name')
    if (!viewer.isAdmin) q.andWhere({ admin_only: false })
    return (await q).map(fromDb)
  }

  /** a strategy of this kind the viewer may see (404 otherwise: admin-only ones are invisible to others) */
  async get(kind: StrategyKind, id: number, viewer?: Principal): Promise<StrategyRow> {
    const r = await this.knex('strategies').where({ kind, id }).first()
    if (!r) throw notFound(`${kind.replace(/_/g, ' ')} strategy`, id)
    const row = fromDb(r)
    if (viewer && !viewer.isAdmin && row.admin_only) throw notFound(`${kind.replace(/_/g, ' ')} strategy`, id)
    return row
  }

  /** a strategy a job or request may write with: visible, enabled */
  async usable(kind: StrategyKind, id: number, viewer: Principal | undefined, param: string): Promise<StrategyRow> {
    const row = await this.get(kind, id, viewer).catch((err) => {
      if (err instanceof MamError && err.code === 'not_found') throw invalid([{ param, message: `is not a known ${kind.replace(/_/g, ' ')} strategy` }])
      throw err
    })
    if (!row.enabled) throw conflict(`Strategy "${row.name}" is disabled`, { errors: [{ param, message: 'names a disabled strategy' }] })
    return row
  }

  /** checks and normalises fields; `param(f)` names a field as the client sent it */
  private async validate(kind: StrategyKind, fields: StrategyFields, current: StrategyRow | null, param: (f: string) => string) {
    const errors: ParamError[] = []
    const out: Record<string, unknown> = {}
    if (fields.name !== undefined) {
      const name = fields.name.normalize('NFC').trim()
      if (!name) errors.push({ param: param('name'), message: 'must not be blank' })
      out.name = name
    } else if (!current) errors.push({ param: param('name'), message: 'is required' })
    let destination = current?.destination
    let targetKind = current?.target_kind
    if (fields.destination !== undefined) {
      const d = fields.destination.trim()
      if (d.startsWith('s3://')) {
        if (!parseS3Url(d)) errors.push({ param: param('destination'), message: 'is not s3://bucket/prefix with a valid bucket name' })
        targetKind = 's3'
      } else if (!path.isAbsolute(d)) errors.push({ param: param('destination'), message: 'must be an absolute directory path or s3://bucket/prefix' })
      else {
        const real = await this.realDestination(d)
        if (!real) errors.push({ param: param('destination'), message: `must lie inside one of the configured target roots (${this.roots().join(', ') || 'none configured'})` })
        targetKind = 'disk'
      }
      destination = d
      out.destination = d
      out.target_kind = targetKind
    } else if (!current) errors.push({ param: param('destination'), message: 'is required' })
    const target: Record<string, any> = { ...(current?.target ?? {}) }
    if (fields.target !== undefined && fields.target !== null) {
      const t = fields.target as Record<string, unknown>
      for (const k of ['endpoint', 'region', 'access_key_id', 'storage_class', 'checksum_mode'] as const) if (t[k] !== undefined) target[k] = t[k] === null ? undefined : String(t[k])
      if (t.force_path_style !== undefined) target.force_path_style = t.force_path_style === true || t.force_path_style === 'true'
      if (t.endpoint !== undefined && t.endpoint !== null && t.endpoint !== '') {
        try {
          const u = new URL(String(t.endpoint))
          if (!['http:', 'https:'].includes(u.protocol)) throw new Error()
        } catch {
          errors.push({ param: `${param('target')}[endpoint]`, message: 'is not an http(s) URL' })
        }
      }
      if (t.checksum_mode !== undefined && !['WHEN_REQUIRED', 'WHEN_SUPPORTED'].includes(String(t.checksum_mode))) errors.push({ param: `${param('target')}[checksum_mode]`, message: 'must be one of: WHEN_REQUIRED, WHEN_SUPPORTED' })
      if (t.secret_access_key !== undefined) target.secret_access_key = t.secret_access_key === null ? undefined : { pending: String(t.secret_access_key) }
    }
    if (targetKind === 's3') {
      if (!target.access_key_id) errors.push({ param: `${param('target')}[access_key_id]`, message: 'is required for an s3:// destination' })
      if (!target.secret_access_key) errors.push({ param: `${param('target')}[secret_access_key]`, message: 'is required for an s3:// destination' })
    }
    if (fields.format !== undefined) {
      if (fields.format !== 'plain') errors.push({ param: param('format'), message: 'must be one of: plain' })
      out.format = fields.format
    }
    if (fields.transmission_check !== undefined) {
      if (!(TRANSMISSION_CHECKS as readonly string[]).includes(fields.transmission_check)) errors.push({ param: param('transmission_check'), message: `must be one of: ${TRANSMISSION_CHECKS.join(', ')}` })
      out.transmission_check = fields.transmission_check
    }
    if (fields.strategy_type !== undefined) {
      if (!(STRATEGY_TYPES as readonly string[]).includes(fields.strategy_type)) errors.push({ param: param('strategy_type'), message: `must be one of: ${STRATEGY_TYPES.join(', ')}` })
      if (kind !== 'backup' && fields.strategy_type === 'incremental') errors.push({ param: param('strategy_type'), message: 'incremental is for backup strategies' })
      out.strategy_type = fields.strategy_type
      out.incremental = fields.strategy_type === 'incremental'
    }
    if (fields.contents !== undefined) {
      if (!(CONTENTS as readonly string[]).includes(fields.contents)) errors.push({ param: param('contents'), message: `must be one of: ${CONTENTS.join(', ')}` })
      out.contents = fields.contents
    }
    if (fields.includes !== undefined) {
      const list = fields.includes ?? []
      list.forEach((inc, i) => {
        if (typeof inc !== 'string' || inc.split('/').some((s) => s === '..') || inc.startsWith('/')) errors.push({ param: `${param('includes')}[${i}]`, message: 'must be a folder path inside the project' })
      })
      out.includes = JSON.stringify(list.map((s) => s.replace(/^\/+|\/+$/g, '')).filter(Boolean))
    }
    for (const k of ['admin_only', 'enabled', 'delete_project'] as const) if (fields[k] !== undefined) out[k] = fields[k]
    if (fields.keep !== undefined) out.keep = fields.keep
    if (errors.length) throw invalid(errors)
    return { out, target, destination: destination!, targetKind: targetKind! }
  }

  /** the checked real directory of a disk destination (made when missing), or null outside the roots */
  private async realDestination(d: string): Promise<string | null> {
    const roots = await Promise.all(this.roots().map((r) => mkdir(r, { recursive: true }).then(() => realpath(r)).catch(() => null)))
    // the deepest existing ancestor decides: a symlink inside a root that points elsewhere is refused
    let probe = path.resolve(d)
    let rest = ''
    for (;;) {
      const real = await realpath(probe).catch(() => null)
      if (real) {
        const full = path.join(real, rest)
        return roots.some((r) => r && isInside(r, full)) ? full : null
      }
      const parent = path.dirname(probe)
      if (parent === probe) return null
      rest = path.join(path.basename(probe), rest)
      probe = parent
    }
  }

  private sealTarget(id: number, target: Record<string, any>) {
    const t = { ...target }
    if (t.secret_access_key?.pending !== undefined) t.secret_access_key = seal(this.key, t.secret_access_key.pending, `strategy:${id}`)
    return JSON.stringify(t)
  }

  async create(kind: StrategyKind, fields: StrategyFields, param: (f: string) => string): Promise<StrategyRow> {
    const { out, target } = await this.validate(kind, fields, null, param)
    const now = new Date()
    try {
      return await this.knex.transaction(async (trx) => {
        const [r] = await trx('strategies')
          .insert({
            kind,
            includes: '[]',
            ...out,
            strategy_type: out.strategy_type ?? (kind === 'backup' ? 'full' : 'standard'),
            transmission_check: out.transmission_check ?? 'fingerprint',
            target: '{}',
            created_at: now,
            updated_at: now,
          })
          .returning('id')
        const id = Number(typeof r === 'object' ? r.id : r)
        await trx('strategies').where({ id }).update({ target: this.sealTarget(id, target) })
        return fromDb(await trx('strategies').where({ id }).first())
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A ${kind.replace(/_/g, ' ')} strategy named "${out.name}" exists already`, { errors: [{ param: param('name'), message: 'is taken' }] })
      throw err
    }
  }

  async update(kind: StrategyKind, id: number, fields: StrategyFields, param: (f: string) => string): Promise<StrategyRow> {
    const current = await this.get(kind, id)
    const { out, target } = await this.validate(kind, fields, current, param)
    try {
      await this.knex('strategies').where({ id, kind }).update({ ...out, target: this.sealTarget(id, target), updated_at: new Date() })
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A ${kind.replace(/_/g, ' ')} strategy named "${out.name}" exists already`, { errors: [{ param: param('name'), message: 'is taken' }] })
      throw err
    }
    return this.get(kind, id)
  }

  /** removes a copy-to strategy; archives still pointing at a strategy keep it (409) */
  async remove(kind: StrategyKind, id: number): Promise<StrategyRow> {
    const row = await this.get(kind, id)
    const used = await this.knex('archive_states').where({ archive_strategy_id: id }).orWhere({ next_strategy_id: id }).first('project_id')
    if (used) throw conflict(`Strategy "${row.name}" holds the archive of project ${used.project_id}; move or restore it first`)
    await this.knex('strategies').where({ id, kind }).delete()
    return row
  }

  /** the target a strategy writes to; the caller closes it */
  async targetOf(row: StrategyRow): Promise<Target> {
    if (row.target_kind === 'disk') {
      const real = await this.realDestination(row.destination)
      if (!real) throw new MamError('conflict', `The destination of strategy "${row.name}" is no longer inside a configured target root`)
      return new DiskTarget(real)
    }
    const { bucket, prefix } = parseS3Url(row.destination)!
    const t = row.target
    let secret = ''
    try {
      secret = unseal(this.key, t.secret_access_key ?? '', `strategy:${row.id}`)
    } catch {
      throw new MamError('service_unavailable', `The S3 secret of strategy "${row.name}" cannot be opened (sealed under another server key); set it again`)
    }
    const isAws = !t.endpoint || /\.amazonaws\.com(:\d+)?\/?$/.test(new URL(t.endpoint).host)
    return new S3Target({
      bucket,
      prefix,
      endpoint: t.endpoint,
      region: t.region ?? 'us-east-1',
      accessKeyId: t.access_key_id,
      secretAccessKey: secret,
      forcePathStyle: t.force_path_style ?? !isAws,
      storageClass: t.storage_class,
      checksumMode: (t.checksum_mode as 'WHEN_REQUIRED' | 'WHEN_SUPPORTED') ?? (isAws ? 'WHEN_SUPPORTED' : 'WHEN_REQUIRED'),
    })
  }

  serialize(row: StrategyRow, viewer: Principal | undefined) {
    const { secret_access_key, ...target } = row.target
    const base: Record<string, unknown> = {
      id: row.id,
      name: row.name,
      // a disk destination is a server path: administrators only (SECURITY.md)
      destination: viewer?.isAdmin || row.target_kind === 's3' ? row.destination : null,
      target_kind: row.target_kind,
      target: row.target_kind === 's3' ? { ...target, secret_access_key_set: Boolean(secret_access_key) } : {},
      format: row.format,
      admin_only: row.admin_only,
      enabled: row.enabled,
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    }
    if (row.kind === 'archive') Object.assign(base, { includes: row.includes, strategy_type: row.strategy_type, transmission_check: row.transmission_check })
    if (row.kind === 'project_copy_to') Object.assign(base, { contents: row.contents, delete_project: row.delete_project, includes: row.includes, transmission_check: row.transmission_check })
    if (row.kind === 'asset_copy_to') Object.assign(base, { transmission_check: row.transmission_check })
    if (row.kind === 'backup') Object.assign(base, { strategy_type: row.strategy_type, keep: row.keep, includes: row.includes, transmission_check: row.transmission_check })
    return base
  }
}
