import { createHash, randomUUID } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { iso, MamError, isUniqueViolation, notFound, permanentError, type Knex } from '../../core/index.js'
import { TABLES } from './migrations.js'
import type { FederationService } from './service.js'
import type { WireCrdt } from './store.js'

/**
 * Receive records of transports (FEDERATION.md §6.7): anything that arrives outside the gossip
 * loop (a signed bundle from an air-gapped site, media, a project transfer). The record is durable
 * and idempotent on (from_site, content_sha256); a job fetches each manifest entry from its URL,
 * verifies size and SHA-256, keeps it under the data directory, and applies a bundle through the
 * merge_state code path.
 */
export interface ManifestEntry {
  sha256: string
  size: number
  role: string
  url: string
}

export interface TransportRow {
  id: number
  uuid: string
  from_site: string
  kind: string
  subject: string | null
  content_sha256: string
  manifest: string
  status: string
  error: string | null
  applied_at: Date | null
  created_at: Date
  updated_at: Date
}

export const transportJson = (r: TransportRow) => ({
  id: Number(r.id),
  uuid: r.uuid,
  from_site: r.from_site,
  kind: r.kind,
  subject: r.subject,
  content_sha256: r.content_sha256,
  manifest: JSON.parse(r.manifest),
  status: r.status,
  error: r.error,
  applied_at: iso(r.applied_at),
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
})

/** SHA-256 over the manifest's canonical listing: what `content_sha256` must be */
export const contentShaOf = (manifest: ManifestEntry[]) => createHash('sha256').update(manifest.map((m) => `${m.sha256}:${m.size}:${m.role}`).sort().join('\n')).digest('hex')

export class TransportService {
  constructor(
    private readonly knex: Knex,
    private readonly fed: FederationService,
    private readonly dataDir: string,
  ) {}

  async get(id: number): Promise<TransportRow> {
    const row = await this.knex(TABLES.transports).where({ id }).first()
    if (!row) throw notFound('federation transport', id)
    return row
  }

  /** the record, new (created: true) or the one received before with the same content */
  async receive(input: { from_site: string; kind: string; subject: string | null; manifest: ManifestEntry[]; content_sha256: string }): Promise<{ row: TransportRow; created: boolean }> {
    const existing = await this.knex(TABLES.transports).where({ from_site: input.from_site, content_sha256: input.content_sha256 }).first()
    if (existing) return { row: existing, created: false }
    const now = new Date()
    try {
      await this.knex(TABLES.transports).insert({ uuid: randomUUID(), from_site: input.from_site, kind: input.kind, subject: input.subject, content_sha256: input.content_sha256, manifest: JSON.stringify(input.manifest), status: 'pending', created_at: now, updated_at: now })
    } catch (err) {
      // two deliveries of one transport at once: the unique index keeps one, both answer with it
      if (!isUniqueViolation(err)) throw err
      return { row: await this.knex(TABLES.transports).where({ from_site: input.from_site, content_sha256: input.content_sha256 }).first(), created: false }
    }
    return { row: await this.knex(TABLES.transports).where({ from_site: input.from_site, content_sha256: input.content_sha256 }).first(), created: true }
  }

  private dirOf(row: TransportRow) {
    return path.join(this.dataDir, 'federation', 'transports', row.uuid)
  }

  /** the job: fetch (skipping files already verified), verify, apply; idempotent */
  async pull(id: number, signal: AbortSignal): Promise<{ files: number; bytes: number; merged?: number }> {
    const row = await this.get(id)
    if (row.status === 'applied') return { files: 0, bytes: 0 }
    const manifest = JSON.parse(row.manifest) as ManifestEntry[]
    const dir = this.dirOf(row)
    await mkdir(dir, { recursive: true })
    let bytes = 0
    try {
      for (const entry of manifest) {
        const target = path.join(dir, entry.sha256)
        if ((await stat(target).catch(() => null))?.size === entry.size) continue
        const res = await fetch(entry.url, { signal })
        if (!res.ok || !res.body) throw permanentError(`${entry.url} answered ${res.status}`)
        const temp = `${target}.part`
        const hash = createHash('sha256')
        let size = 0
        const counted = Readable.fromWeb(res.body as any).on('data', (chunk: Buffer) => {
          hash.update(chunk)
          size += chunk.length
          if (size > entry.size) counted.destroy(new Error(`more than the ${entry.size} bytes announced`))
        })
        await pipeline(counted, createWriteStream(temp))
        const digest = hash.digest('hex')
        if (size !== entry.size || digest !== entry.sha256) {
          await rm(temp, { force: true })
          throw permanentError(`${entry.role} ${entry.sha256}: received ${size} bytes with SHA-256 ${digest}, announced ${entry.size} bytes`)
        }
        await rename(temp, target)
        bytes += size
      }
      let merged: number | undefined
      if (row.kind === 'bundle') {
        const crdts: WireCrdt[] = []
        for (const entry of manifest) {
          const parsed = JSON.parse(await readFile(path.join(dir, entry.sha256), 'utf8'))
          if (!Array.isArray(parsed?.crdts)) throw permanentError(`bundle file ${entry.sha256} has no crdts list`)
          crdts.push(...parsed.crdts)
        }
        const result = await this.fed.mergeWithReport(crdts, false)
        merged = result.report.changed.length
      }
      await this.knex(TABLES.transports).where({ id }).update({ status: 'applied', error: null, applied_at: new Date(), updated_at: new Date() })
      return { files: manifest.length, bytes, merged }
    } catch (err) {
      if ((err as { permanent?: boolean }).permanent || err instanceof SyntaxError || err instanceof MamError) {
        await this.knex(TABLES.transports).where({ id }).update({ status: 'failed', error: String((err as Error).message).slice(0, 1000), updated_at: new Date() })
        throw permanentError((err as Error).message, err)
      }
      throw err
    }
  }
}
