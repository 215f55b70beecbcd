import { execFile } from 'node:child_process'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'
import { promisify } from 'node:util'
import type { ProjectService } from '../projects/index.js'
import { type RunContext, type TransmissionCheck } from './archive.js'
import { PARALLEL, copyVerified, type SourceFile } from './transfer.js'
import { eachLimit } from './concurrency.js'
import type { Copier } from './copier.js'
import type { StrategyRow, StrategyService } from './strategies.js'
import { sameSums, sumsOf, type Sums, type Target } from './targets/types.js'

import { MamError, openInside, safeName, type Dialect, type Knex } from '../../core/index.js'
const run = promisify(execFile)
/** files per page: one batch of the target (flushed together), as the archive's */
const PAGE = 64

export interface ManifestEntry extends Sums {
  path: string
  /** the backup that holds the bytes (an incremental backup points at an earlier one for unchanged files) */
  in: string
}

/** every regular non-hidden file below `root`, relative */
async function* walk(root: string, rel = ''): AsyncGenerator<string> {
  const { readdir } = await import('node:fs/promises')
  const entries = await readdir(path.join(root, rel), { withFileTypes: true }).catch(() => [])
  entries.sort((a, b) => (a.name < b.name ? -1 : 1))
  for (const e of entries) {
    if (e.name.startsWith('.')) continue
    const r = rel ? `${rel}/${e.name}` : e.name
    if (e.isDirectory()) yield* walk(root, r)
    else if (e.isFile()) yield r
  }
}

const stamp = (d = new Date()) => d.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')

/**
 * Copies (copy-to of assets, folders and projects), project backups (full or incremental, with
 * retention) and database backups. Originals are opened with `openInside` and read from the checked
 * descriptor; every object is verified as the strategy's `transmission_check` says. Nothing here
 * removes an original.
 */
export class CopyService {
  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly strategies: StrategyService,
    private readonly projects: ProjectService,
    private readonly databaseUrl: string | undefined,
    private readonly copier: Copier,
  ) {}

  /** the paths a copy covers: explicit ones, a folder's, or by contents (media: registered assets) */
  async select(projectId: number, root: string, sel: { paths?: string[]; folder?: string; contents?: string; includes?: string[] }): Promise<string[]> {
    if (sel.paths) return sel.paths
    const registered = new Set<string>(await this.knex('assets').where({ project_id: projectId }).pluck('path'))
    const out: string[] = []
    for await (const rel of walk(root)) {
      if (sel.folder && !(rel.startsWith(`${sel.folder}/`))) continue
      if (sel.includes?.length && !sel.includes.some((inc) => rel === inc || rel.startsWith(`${inc}/`))) continue
      if (sel.contents === 'media' && !registered.has(rel)) continue
      if (sel.contents === 'project_files' && registered.has(rel)) continue
      out.push(rel)
    }
    return out
  }

  /**
   * Copies `paths` of the project to `keyPrefix/…` with the archive's batched one-pass copy
   * (copyVerified: large files copied and hashed in worker threads, a page made durable together,
   * then verified). An incremental backup hashes each file first (off the event loop too) and
   * leaves out those whose checksums match the previous backup's; the others are copied against
   * those checksums, so a file that changes in between is an error, not a silent mismatch.
   */
  private async copyFiles(target: Target, check: TransmissionCheck, root: string, paths: string[], keyPrefix: string, ctx: RunContext, previous?: Map<string, ManifestEntry>) {
    const manifest: ManifestEntry[] = []
    const errors: Array<{ path: string; error: string }> = []
    let bytes = 0
    let copied = 0
    const copy = this.copier.copy
    for (let i = 0; i < paths.length; i += PAGE) {
      ctx.signal.throwIfAborted()
      const page: Array<SourceFile<string>> = []
      await eachLimit(paths.slice(i, i + PAGE), PARALLEL, async (rel) => {
        const file: SourceFile<string> = { item: rel, root, path: rel, key: `${keyPrefix}/${rel}` }
        const before = previous?.get(rel)
        if (before) {
          try {
            const opened = await openInside(root, rel, `file ${rel}`)
            try {
              const sums = await copy(opened.handle, null, opened.stats.size, ctx.signal)
              if (sameSums(before, sums)) return void manifest.push({ ...sums, path: rel, in: before.in })
              file.known = { sums, size: opened.stats.size, mtimeMs: Math.floor(opened.stats.mtimeMs) }
            } finally {
              await opened.close()
            }
          } catch (err) {
            if (ctx.signal.aborted || !(err instanceof MamError || (err as NodeJS.ErrnoException).code === 'ENOENT')) throw err
            return void errors.push({ path: rel, error: (err as Error).message })
          }
        }
        page.push(file)
      })
      for (const o of await copyVerified(target, page, { check, signal: ctx.signal, reuse: false, copy, compare: this.copier.compare, copyPage: this.copier.copyPage })) {
        if (o.error) {
          errors.push({ path: o.item, error: o.error.message })
          continue
        }
        manifest.push({ ...o.sums, path: o.item, in: keyPrefix })
        bytes += o.sums.size
        copied++
      }
      ctx.progress(Math.min(1, (i + PAGE) / Math.max(1, paths.length)))
    }
    manifest.sort((a, b) => (a.path < b.path ? -1 : 1))
    return { manifest, errors, bytes, copied }
  }

  private async record(strategy: StrategyRow, projectId: number | null, jobId: number, key: string, manifest: ManifestEntry[], bytes: number, state: string) {
    const now = new Date()
    await this.knex('strategy_copies').insert({ strategy_id: strategy.id, project_id: projectId, job_id: jobId, key, files: manifest.length, bytes, manifest: JSON.stringify(manifest), state, created_at: now, updated_at: now })
  }

  /** copy-to of assets, a folder or a project: a plain tree `<project>-<id>/…` on the target */
  async copyTo(jobId: number, p: { strategyId: number; kind: 'asset_copy_to' | 'project_copy_to'; projectId: number; paths?: string[]; folder?: string }, ctx: RunContext) {
    const strategy = await this.strategies.get(p.kind, p.strategyId)
    const project = await this.knex('projects').where({ id: p.projectId }).first('id', 'name')
    const root = await this.projects.currentRoot(p.projectId)
    const paths = await this.select(p.projectId, root, { paths: p.paths, folder: p.folder, contents: p.kind === 'project_copy_to' ? strategy.contents : undefined, includes: p.kind === 'project_copy_to' ? strategy.includes : undefined })
    const target = await this.strategies.targetOf(strategy)
    try {
      const key = `${safeName(project.name)}-${project.id}`
      await target.sweep(key)
      const r = await this.copyFiles(target, strategy.transmission_check as TransmissionCheck, root, paths, key, ctx)
      await this.record(strategy, p.projectId, jobId, key, r.manifest, r.bytes, r.errors.length ? 'partial' : 'finished')
      if (r.errors.length) throw Object.assign(new Error(`${r.errors.length} of ${paths.length} file(s) were not copied: ${r.errors.slice(0, 5).map((e) => `${e.path}: ${e.error}`).join('; ')}`), { permanent: true })
      return { files: r.copied, bytes: r.bytes, key }
    } finally {
      await target.close()
    }
  }

  /** a project backup: full, or incremental (only files whose checksum changed since the last one); keeps `keep` */
  async backup(jobId: number, p: { strategyId: number; projectId: number }, ctx: RunContext) {
    const strategy = await this.strategies.get('backup', p.strategyId)
    const root = await this.projects.currentRoot(p.projectId)
    const paths = await this.select(p.projectId, root, { includes: strategy.includes })
    const last = strategy.incremental ? await this.knex('strategy_copies').where({ strategy_id: strategy.id, project_id: p.projectId, state: 'finished' }).orderBy('id', 'desc').first('manifest') : null
    const previous = last ? new Map<string, ManifestEntry>((JSON.parse(typeof last.manifest === 'string' ? last.manifest : JSON.stringify(last.manifest)) as ManifestEntry[]).map((e) => [e.path, e])) : undefined
    const target = await this.strategies.targetOf(strategy)
    try {
      const key = `project-${p.projectId}/${stamp()}-${jobId}`
      await target.sweep(key)
      const r = await this.copyFiles(target, strategy.transmission_check as TransmissionCheck, root, paths, `${key}`, ctx, previous)
      const body = Buffer.from(JSON.stringify({ format: 'mamkit-backup/1', project_id: p.projectId, incremental: Boolean(previous), files: r.manifest }))
      const sums = await sumsOf(Readable.from([body]))
      await target.put(`${key}.manifest.json`, Readable.from([body]), sums, ctx.signal)
      await this.record(strategy, p.projectId, jobId, key, r.manifest, r.bytes, r.errors.length ? 'partial' : 'finished')
      const pruned = await this.prune(strategy, p.projectId, target)
      if (r.errors.length) throw Object.assign(new Error(`${r.errors.length} file(s) were not backed up: ${r.errors.slice(0, 5).map((e) => `${e.path}: ${e.error}`).join('; ')}`), { permanent: true })
      return { key, files: r.manifest.length, copied: r.copied, bytes: r.bytes, incremental: Boolean(previous), pruned }
    } finally {
      await target.close()
    }
  }

  /** retention: the newest `keep` backups stay, and every older one a kept incremental backup still points into */
  private async prune(strategy: StrategyRow, projectId: number | null, target: Target): Promise<string[]> {
    if (!strategy.keep) return []
    const q = this.knex('strategy_copies').where({ strategy_id: strategy.id }).orderBy('id', 'desc').select('id', 'key', 'manifest')
    if (projectId === null) q.whereNull('project_id')
    else q.andWhere({ project_id: projectId })
    const rows = await q
    const kept = rows.slice(0, strategy.keep)
    const needed = new Set<string>()
    for (const r of kept) for (const e of JSON.parse(typeof r.manifest === 'string' ? r.manifest : JSON.stringify(r.manifest)) as ManifestEntry[]) needed.add(e.in)
    const pruned: string[] = []
    for (const r of rows.slice(strategy.keep)) {
      if (needed.has(r.key)) continue
      if (projectId === null) await target.delete(r.key)
      else {
        await target.deletePrefix(r.key)
        await target.delete(`${r.key}.manifest.json`)
      }
      await this.knex('strategy_copies').where({ id: r.id }).delete()
      pruned.push(r.key)
    }
    return pruned
  }

  /**
   * A database backup now: SQLite's online backup API (a consistent copy while the server writes),
   * or `pg_dump -Fc` on PostgreSQL; written to the backup strategy's target under `database/`, verified.
   */
  async databaseBackup(jobId: number, p: { strategyId: number }, ctx: RunContext) {
    const strategy = await this.strategies.get('backup', p.strategyId)
    const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-dbbackup-'))
    const target = await this.strategies.targetOf(strategy)
    try {
      let file: string
      let key: string
      if (this.dialect === 'sqlite') {
        file = path.join(dir, 'mamkit.sqlite')
        const conn: any = await (this.knex as any).client.acquireConnection()
        try {
          await conn.backup(file)
        } finally {
          await (this.knex as any).client.releaseConnection(conn)
        }
        key = `database/${stamp()}-${jobId}.sqlite`
      } else {
        file = path.join(dir, 'mamkit.pgdump')
        try {
          await run('pg_dump', ['-Fc', '--no-owner', '-f', file, '--dbname', this.databaseUrl!], { signal: ctx.signal, maxBuffer: 16 << 20 })
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw Object.assign(new MamError('service_unavailable', 'pg_dump is not installed (Debian: postgresql-client)'), { permanent: true })
          throw err
        }
        key = `database/${stamp()}-${jobId}.pgdump`
      }
      // the same one-pass copy as the project files (hashed in a worker, flushed, verified)
      const [done] = await copyVerified(target, [{ item: file, root: dir, path: path.basename(file), key }], { check: strategy.transmission_check as TransmissionCheck, signal: ctx.signal, reuse: false, copy: this.copier.copy, compare: this.copier.compare })
      if (done.error) throw done.error
      const sums = done.sums
      await this.record(strategy, null, jobId, key, [{ ...sums, path: path.basename(file), in: key }], sums.size, 'finished')
      const pruned = await this.prune(strategy, null, target)
      return { key, bytes: (await stat(file)).size, sha256: sums.sha256, dialect: this.dialect, pruned }
    } finally {
      await target.close()
      await rm(dir, { recursive: true, force: true })
    }
  }
}
