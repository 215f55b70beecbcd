import type { ProjectGuards, ProjectService } from '../projects/index.js'
import { Project } from '../projects/index.js'
import type { ArchiveService, StateRow } from './archive.js'
import type { StrategyService } from './strategies.js'
import type { TierService } from './tier.js'
import { ArchiveJob, BackupJob, CopyJob, TierJob } from './jobs.js'

import { MamError, conflict, type EntityManager, type StorageRegistry, type JobRow, type JobService, type Knex } from '../../core/index.js'

/** the strategy kinds a project can be run through unattended (schedules) */
export const RUNNABLE_KINDS = ['archive', 'backup', 'project_copy_to', 'tier'] as const
export type RunnableKind = (typeof RUNNABLE_KINDS)[number]

/** what a run writes with: a strategy (archive, backup, copy-to), or the storage projects move to (tier) */
export type RunTarget = { strategyId: number } | { storage: string }

/** what one project got from a run: its job, or why it was left alone */
export type ProjectRun = { project_id: number; job_id: number } | { project_id: number; skipped: string }

/** the job types whose run on a project must not overlap with another of the same kind */
const JOB_OF: Record<RunnableKind, string> = { archive: ArchiveJob.type, backup: BackupJob.type, project_copy_to: CopyJob.type, tier: TierJob.type }

/**
 * Starting strategy jobs on projects, for the request routes and for unattended runs (schedules):
 * the archive's claimed state row and its job, a backup, a project copy-to, a move to another
 * storage (tier). An unattended run
 * checks what a request would be refused for (frozen, mounted or open, archiving) and skips the
 * project with the reason instead, and never queues a second job of a kind already queued or
 * running for that project (no overlapping runs).
 */
export class StrategyRuns {
  constructor(
    private readonly knex: Knex,
    private readonly jobs: JobService,
    private readonly archives: ArchiveService,
    private readonly strategies: StrategyService,
    private readonly projects: ProjectService,
    private readonly guards: ProjectGuards,
    private readonly em: () => EntityManager,
    private readonly tier: TierService,
    private readonly storages: StorageRegistry,
  ) {}

  /** queues the archive job of a state row `begin` claimed, and links the two */
  async queueArchive(s: StateRow, userId: number | null): Promise<JobRow> {
    const job = await this.jobs.enqueue(ArchiveJob, { projectId: s.project_id }, { userId, projectId: s.project_id, maxAttempts: 10 })
    await this.archives.setJob(s.id, job.id)
    return job
  }

  /** the queued or running job of this kind on the project, if any */
  async activeJob(kind: RunnableKind, projectId: number): Promise<number | null> {
    const row = await this.knex('jobs').where({ type: JOB_OF[kind], project_id: projectId }).whereIn('state', ['queued', 'running']).first('id')
    return row ? Number(row.id) : null
  }

  /**
   * Runs `kind` on each project, for `userId` (whose jobs they are): with a strategy, which must
   * exist and be enabled (a 409/422 otherwise, nothing queued), or for a tier with the storage the
   * projects go to. Each project is queued or skipped with the reason.
   */
  async runOn(kind: RunnableKind, target: RunTarget, projectIds: number[], userId: number | null): Promise<ProjectRun[]> {
    let strategyId = 0
    if (kind === 'tier') {
      if (!('storage' in target)) throw new MamError('invalid_parameters', 'a tier names the storage the projects go to')
      this.storages.get(target.storage, 'storage')
    } else {
      if (!('strategyId' in target)) throw new MamError('invalid_parameters', `a ${kind} run names its strategy`)
      const strategy = await this.strategies.usable(kind, target.strategyId, undefined, 'strategy_id')
      if (kind === 'project_copy_to' && strategy.delete_project)
        throw new MamError('not_implemented', `Strategy "${strategy.name}" deletes the source project after the copy; that step is not built in this server yet, so nothing was copied`)
      strategyId = strategy.id
    }
    const out: ProjectRun[] = []
    for (const projectId of projectIds) {
      try {
        out.push({ project_id: projectId, job_id: await this.runOne(kind, strategyId, 'storage' in target ? target.storage : '', projectId, userId) })
      } catch (err) {
        // a refusal a request would get (409, 423, 404) is this project's reason; anything else ends the run
        if (!(err instanceof MamError) || err.status >= 500) throw err
        out.push({ project_id: projectId, skipped: err.message })
      }
    }
    return out
  }

  private async runOne(kind: RunnableKind, strategyId: number, storage: string, projectId: number, userId: number | null): Promise<number> {
    const running = await this.activeJob(kind, projectId)
    if (running !== null) throw new MamError('conflict', `job ${running} of this kind is still queued or running for project ${projectId}`)
    const em = this.em()
    const project = await em.findOne(Project, { id: projectId, deleted: false }, { populate: ['frozenBy'] })
    if (!project) throw new MamError('not_found', `project ${projectId} no longer exists`)
    if (kind === 'backup') return (await this.jobs.enqueue(BackupJob, { strategyId, projectId }, { userId, projectId })).id
    if (kind === 'project_copy_to') return (await this.jobs.enqueue(CopyJob, { strategyId, kind: 'project_copy_to', projectId }, { userId, projectId })).id
    if (kind === 'tier') {
      await this.tier.assertTierable(em, project, storage)
      return (await this.queueTier([projectId], storage, userId, true))[0].id
    }
    // an archive is refused like PUT /projects/:id/archive: frozen, mounted or open on an edit, archiving or archived
    this.projects.assertNotFrozen(project)
    await this.guards.check(em, project, 'rename')
    const s = await this.beginArchive(projectId, strategyId, userId, false)
    return (await this.queueArchive(s, userId)).id
  }

  /**
   * Queues a move of each project to `storage`, each claimed first (TierService.claim: two requests
   * for one project meet there, one gets a 409). `allOrNothing`: a project claimed by another move
   * fails the whole request (its claims go, nothing is queued); otherwise that project is left out.
   */
  async queueTier(projectIds: number[], storage: string, userId: number | null, allOrNothing: boolean): Promise<JobRow[]> {
    const claims = new Map<number, number>()
    let queued: JobRow[] | null = null
    try {
      for (const projectId of projectIds) {
        try {
          claims.set(projectId, await this.tier.claim(projectId, storage))
        } catch (err) {
          if (allOrNothing || !(err instanceof MamError) || err.status !== 409) throw err
        }
      }
      if (!claims.size) return []
      queued = await this.jobs.enqueueMany([...claims.keys()].map((projectId) => ({ type: TierJob, payload: { projectId, storage }, options: { userId, projectId } })))
      for (const job of queued) await this.tier.claimed(claims.get(job.project_id!)!, job.id)
      return queued
    } finally {
      // a refused request leaves no claim behind (after the enqueue the claims belong to the jobs)
      if (!queued) await this.tier.unclaim([...claims.values()])
    }
  }

  /** claims the project's archive state for a new archive with this strategy (409 when it is busy, archived, or partly archived elsewhere) */
  async beginArchive(projectId: number, strategyId: number, userId: number | null, excludeLinkedFiles: boolean): Promise<StateRow> {
    const current = await this.archives.state(projectId)
    // a failed archive resumes with its strategy; another strategy needs the old copies gone first
    if (current && current.state === 'failed' && current.direction === 'archive' && current.archive_strategy_id !== strategyId && current.bytes_released > 0)
      throw conflict(`Project ${projectId} is partly archived with strategy ${current.archive_strategy_id}; resume with that strategy or unarchive first`)
    return this.archives.begin(projectId, 'archive', ['online', 'failed', 'cancelled'], { archive_strategy_id: strategyId, user_id: userId, exclude_linked_files: excludeLinkedFiles })
  }
}
