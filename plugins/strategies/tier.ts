import { mkdir, readdir, readlink, rm, rmdir, symlink } from 'node:fs/promises'
import path from 'node:path'
import { Project, projectScope, type ProjectGuards, type ProjectService } from '../projects/index.js'
import { ACTIVE, type ArchiveService, type RunContext } from './archive.js'
import { DiskTarget } from './targets/disk.js'
import { copyVerified, type SourceFile } from './transfer.js'
import type { Copier } from './copier.js'

import { MamError, conflict, identityOf, isUniqueViolation, moveExclusive, notFound, sameFile, type EntityManager, type FileIdentity, type JournalEntry, type Knex, type StorageJournal, type StorageRegistry } from '../../core/index.js'

export const TIER_KIND = 'strategies.tier'
/** the hidden folder on the target storage a project is copied into before it takes its name there */
const stagingName = (projectId: number) => `.mamkit-tier-${projectId}`
/** files copied, flushed and verified together */
const PAGE = 64
/** a claim this old that never got its job (the process died between the two) is taken over */
const CLAIM_GRACE_MS = 5 * 60_000

/** what a repair decides from: where the project was and goes, and the identities of both trees */
interface TierIntent {
  projectId: number
  from: { storage: string; folder: string }
  to: { storage: string; folder: string }
  source: { dev: string; ino: string } | null
  staging: { dev: string; ino: string } | null
}

const identity = (id: FileIdentity | null) => (id ? { dev: id.dev, ino: id.ino } : null)
const matches = (id: FileIdentity | null, want: { dev: string; ino: string } | null) => want !== null && sameFile(id, want)

/** every entry below `root`: folders first (empty template folders move too), then files and symlinks */
async function* tree(root: string, rel = ''): AsyncGenerator<{ path: string; kind: 'dir' | 'file' | 'link' }> {
  const entries = await readdir(path.join(root, rel), { withFileTypes: true })
  entries.sort((a, b) => (a.name < b.name ? -1 : 1))
  for (const e of entries) {
    const r = rel ? `${rel}/${e.name}` : e.name
    if (e.isDirectory()) {
      yield { path: r, kind: 'dir' }
      yield* tree(root, r)
    } else if (e.isFile()) yield { path: r, kind: 'file' }
    else if (e.isSymbolicLink()) yield { path: r, kind: 'link' }
  }
}

/**
 * Moves projects between named storages (fast and slow disks: `POST /projects/tier`). The project's
 * tree is copied into a hidden folder on the target storage with the copy code of the strategies'
 * disk target (temporary name, fsync, rename), every file verified by reading it back (size and
 * SHA-256 against the original's), the folder then takes the project's name there, the row's
 * storage switches in one transaction, and only then the old tree goes. All of it under a storage
 * journal entry holding the project's scope alone: a crash before the switch rolls back (the copy
 * goes, the project stays whole where it was), a crash after it finishes (the old tree goes).
 */
export class TierService {
  constructor(
    private readonly knex: Knex,
    private readonly storages: StorageRegistry,
    private readonly journal: StorageJournal,
    private readonly archives: ArchiveService,
    private readonly projects: ProjectService,
    private readonly guards: ProjectGuards,
    private readonly copier: Copier,
  ) {}

  defineRepair(): void {
    this.journal.define<TierIntent>(TIER_KIND, (entry) => this.repair(entry))
  }

  /**
   * What a tier request is refused for, like an archive: frozen (423), mounted or open on an edit,
   * being archived or with archived files, on that storage already, or its folder name taken there (409).
   */
  async assertTierable(em: EntityManager, project: Project, storage: string): Promise<void> {
    this.projects.assertNotFrozen(project)
    if (project.storage === storage) throw conflict(`Project "${project.name}" is on storage "${storage}" already`, { errors: [{ param: 'storage', message: 'is the storage the project is on' }] })
    await this.guards.check(em, project, 'rename')
    const s = await this.archives.state(project.id)
    if (s && ((ACTIVE as readonly string[]).includes(s.state) || s.bytes_released > 0))
      throw conflict(`Project "${project.name}" is ${s.bytes_released > 0 ? 'archived (its files are on the archive target)' : `being archived (${s.state})`}; it cannot move to another storage now`, { state: s.state })
    const taken = await this.knex('projects').where({ storage, folder: project.folder }).whereNot({ id: project.id }).first('id')
    if (taken) throw conflict(`The folder "${project.folder}" is taken on storage "${storage}" by project ${taken.id}`, { errors: [{ param: 'storage', message: 'has a project with this folder name' }] })
  }

  /**
   * Claims the project for one move. The unique claim row per project makes two requests meet: one
   * inserts it, the other finds it and gets a 409, unless that claim is over: its job ended
   * (finished, failed, cancelled) or never came (no job after CLAIM_GRACE_MS). The one request whose
   * delete removes an old claim inserts anew; the others meet that one. Returns the claim's id.
   */
  async claim(projectId: number, storage: string): Promise<number> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = new Date()
      try {
        const [row] = await this.knex('tier_claims').insert({ project_id: projectId, storage, job_id: null, created_at: now, updated_at: now }).returning('id')
        return Number(typeof row === 'object' ? row.id : row)
      } catch (err) {
        if (!isUniqueViolation(err)) throw err
      }
      const held = await this.knex('tier_claims').where({ project_id: projectId }).first()
      if (!held) continue
      const jobId = held.job_id === null ? null : Number(held.job_id)
      const live = jobId === null ? Date.now() - new Date(held.created_at).getTime() < CLAIM_GRACE_MS : Boolean(await this.knex('jobs').where({ id: jobId }).whereIn('state', ['queued', 'running']).first('id'))
      if (live) throw conflict(`Project ${projectId} is being moved to storage "${held.storage}" already${jobId === null ? '' : ` (job ${jobId})`}`, { job_id: jobId })
      await this.knex('tier_claims').where({ id: held.id }).delete()
    }
    throw conflict(`Project ${projectId} is being moved to another storage by another request`)
  }

  /** the claim's job is queued */
  async claimed(claimId: number, jobId: number): Promise<void> {
    await this.knex('tier_claims').where({ id: claimId }).update({ job_id: jobId, updated_at: new Date() })
  }

  /** claims whose jobs were not queued after all */
  async unclaim(claimIds: number[]): Promise<void> {
    if (claimIds.length) await this.knex('tier_claims').whereIn('id', claimIds).delete()
  }

  /** the job is done with the project; a failed job's claim stays until a new request finds it over */
  async release(projectId: number, jobId: number): Promise<void> {
    await this.knex('tier_claims').where({ project_id: projectId, job_id: jobId }).delete()
  }

  /** projects a policy takes: not used (or created) since the cutoff, not on `storage`, at most `limit` */
  async byPolicy(storage: string, cutoff: Date, limit = 1000): Promise<number[]> {
    const rows = await this.knex('projects')
      .where({ deleted: false })
      .whereNot({ storage })
      .andWhere('created_at', '<', cutoff)
      .andWhere((w) => w.whereNull('last_used_at').orWhere('last_used_at', '<', cutoff))
      .orderBy('id')
      .limit(limit)
      .pluck('id')
    return rows.map(Number)
  }

  /** one project to `storage`; idempotent (a project there already is done) */
  async tier(em: EntityManager, projectId: number, storage: string, ctx: RunContext): Promise<{ project_id: number; storage: string; files: number; bytes: number; moved: boolean }> {
    const targetRoot = this.storages.get(storage).root
    const intent: TierIntent = { projectId, from: { storage: '', folder: '' }, to: { storage, folder: '' }, source: null, staging: null }
    return this.journal.run(TIER_KIND, intent, { scope: projectScope(projectId), exclusive: true }, async (entry) => {
      // alone in the project now: what the row says is where the tree is
      const project = await em.fork().findOne(Project, { id: projectId, deleted: false }, { populate: ['frozenBy'] })
      if (!project) throw Object.assign(notFound('project', projectId), { permanent: true })
      if (project.storage === storage) {
        await this.journal.end(this.knex, entry)
        return { project_id: projectId, storage, files: 0, bytes: 0, moved: false }
      }
      await this.assertTierable(em, project, storage).catch((err) => Promise.reject(Object.assign(err, { permanent: true })))
      const source = this.projects.pathOf(project)
      const staging = path.join(targetRoot, stagingName(projectId))
      // a copy left by an attempt a repair could not finish (the row never switched, so it is ours)
      await rm(staging, { recursive: true, force: true })
      await mkdir(staging)
      Object.assign(intent, { from: { storage: project.storage, folder: project.folder }, to: { storage, folder: project.folder }, source: identity(await identityOf(source)), staging: identity(await identityOf(staging)) })
      if (!intent.source) throw Object.assign(new MamError('conflict', `The folder of project "${project.name}" is missing on storage "${project.storage}"`), { permanent: true })
      await this.journal.update(entry, intent)

      const copied = await this.copyTree(source, staging, ctx)
      // stopped while the last page was verified: still before the switch, so it rolls back
      ctx.signal.throwIfAborted()
      const final = path.join(targetRoot, project.folder)
      await mkdir(path.dirname(final), { recursive: true })
      await moveExclusive(staging, final, true).catch((err) => {
        throw ['EEXIST', 'ENOTEMPTY'].includes(err.code) ? Object.assign(conflict(`The folder "${project.folder}" exists already on storage "${storage}"`), { permanent: true }) : err
      })
      // the switch: one statement on the row, fenced on where it was; the repair reads it to decide
      const n = await this.knex('projects').where({ id: projectId, storage: project.storage, folder: project.folder }).update({ storage, updated_at: new Date() })
      if (!n) throw new Error(`project ${projectId} moved meanwhile`)
      await rm(source, { recursive: true, force: true })
      await this.journal.end(this.knex, entry)
      return { project_id: projectId, storage, ...copied, moved: true }
    })
  }

  /**
   * Copies and verifies every file (one pass each through the hasher, flushed a page at a time,
   * then read back: size and SHA-256 against what was read), recreates folders and symlinks.
   * Any file that cannot be copied fails the move (all or nothing; the staging copy is rolled back).
   */
  private async copyTree(source: string, staging: string, ctx: RunContext): Promise<{ files: number; bytes: number }> {
    const target = new DiskTarget(staging)
    let files = 0
    let bytes = 0
    let total = 0
    for await (const e of tree(source)) if (e.kind === 'file') total++
    let page: Array<SourceFile<string>> = []
    const flush = async () => {
      const outcomes = await copyVerified(target, page, { check: 'fingerprint', signal: ctx.signal, reuse: false, copy: this.copier.copy, compare: this.copier.compare })
      page = []
      for (const o of outcomes) {
        if (o.error) throw o.error
        files++
        bytes += o.sums.size
      }
      ctx.progress(files / Math.max(1, total))
    }
    for await (const e of tree(source)) {
      ctx.signal.throwIfAborted()
      const to = path.join(staging, ...e.path.split('/'))
      if (e.kind === 'dir') await mkdir(to, { recursive: true })
      else if (e.kind === 'link') await symlink(await readlink(path.join(source, ...e.path.split('/'))), to)
      else {
        page.push({ item: e.path, root: source, path: e.path, key: e.path })
        if (page.length >= PAGE) await flush()
      }
    }
    if (page.length) await flush()
    return { files, bytes }
  }

  /** from the row and the disk: switched → the old tree goes; not switched → the copy goes, the project stays where it was */
  private async repair(entry: JournalEntry<TierIntent>): Promise<void> {
    const r = entry.payload
    if (r.from.storage) {
      const row = await this.knex('projects').where({ id: r.projectId }).first('storage', 'folder')
      const source = path.join(this.storages.get(r.from.storage).root, r.from.folder)
      const staging = path.join(this.storages.get(r.to.storage).root, stagingName(r.projectId))
      const final = path.join(this.storages.get(r.to.storage).root, r.to.folder)
      if (row && row.storage === r.to.storage) {
        if (matches(await identityOf(source), r.source)) await rm(source, { recursive: true, force: true })
      } else {
        if (matches(await identityOf(staging), r.staging)) await rm(staging, { recursive: true, force: true })
        const there = await identityOf(final)
        if (matches(there, r.staging)) await rm(final, { recursive: true, force: true })
        // the empty folder moveExclusive claimed the name with, before its rename (rmdir refuses anything else)
        else if (there?.isDirectory && !(await this.knex('projects').where({ storage: r.to.storage, folder: r.to.folder }).first('id'))) await rmdir(final).catch(() => {})
      }
    }
    await this.journal.end(this.knex, entry)
  }
}
