import path from 'node:path'
import { Type } from 'typebox'
import { projectServices } from '../projects/refs.js'
import { strategyServices } from './refs.js'
import { migrations } from './migrations.js'
import { strategyEntities } from './entities.js'
import { StrategyService } from './strategies.js'
import { ACTIVE, ArchiveService } from './archive.js'
import { registerStrategyRoutes } from './routes.js'
import { registerArchiveRoutes } from './project-routes.js'
import { ArchiveJob, defineCopyJobs, defineStrategyJobs, defineTierJob } from './jobs.js'
import { CopyService } from './copies.js'
import { strategyEvents } from './events.js'
import { StrategyRuns } from './runs.js'
import { TierService } from './tier.js'
import { Copier } from './copier.js'
import { registerTierRoutes } from './tier-routes.js'
import { registerCopyRoutes } from './copy-routes.js'
export { strategyServices } from './refs.js'
export { StrategyService } from './strategies.js'
export { ArchiveService } from './archive.js'
export { StrategyRuns, RUNNABLE_KINDS, type RunnableKind, type ProjectRun, type RunTarget } from './runs.js'
export { Strategy, ArchiveState, ArchiveFile, StrategyCopy } from './entities.js'

import { andThen, conflict, coreServices, definePlugin } from '../../core/index.js'

/** a project's archive fields when it has no archive state: archive_strategy_id, archive_strategy_state, archived */
const NOT_ARCHIVED = [null, null, false] as const
const Settings = Type.Object(
  {
    /** directories disk destinations must lie inside; empty: `<dataDir>/targets` */
    roots: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
    /** worker threads that copy and hash large files (archive, restore, copy-to, backup, tier); 0: all in the event loop's thread; default: one per file in flight (4), at least one per core */
    copyThreads: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
  },
  { default: {} },
)

/** Archive, backup and copy-to strategies on disk and S3 object storage (§4.5, §4.20 archive routes). */
export const strategiesPlugin = definePlugin({
  name: 'strategies',
  title: 'Strategies',
  version: '1.0.0',
  description: 'Archive, backup and copy-to strategies writing to directories or S3-compatible object storage, with verified copies and restores',
  dependsOn: ['projects', 'assets'],
  migrations,
  entities: strategyEntities,
  events: strategyEvents,
  settings: Settings,
  register(api) {
    const roots = () => {
      const configured = api.settings().roots
      return configured.length ? configured.map((r: string) => path.resolve(r)) : [path.join(api.config.dataDir, 'targets')]
    }
    api.provide(strategyServices.strategies, (r) => new StrategyService(r(coreServices.knex), r(coreServices.config).secretKey, roots))
    api.provide(strategyServices.copier, () => new Copier(api.settings().copyThreads), { dispose: (c) => c.close() })
    api.provide(strategyServices.archives, (r) => new ArchiveService(r(coreServices.knex), r(strategyServices.strategies), r(projectServices.service), r(projectServices.storageJournal), r(coreServices.outbox), r(strategyServices.copier)))
    api.provide(strategyServices.copies, (r) => {
      const db = r(coreServices.db)
      return new CopyService(r(coreServices.knex), db.dialect, r(strategyServices.strategies), r(projectServices.service), api.config.databaseUrl, r(strategyServices.copier))
    })
    api.provide(strategyServices.runs, (r) => new StrategyRuns(r(coreServices.knex), r(coreServices.jobs), r(strategyServices.archives), r(strategyServices.strategies), r(projectServices.service), r(projectServices.guards), () => r(coreServices.em), r(strategyServices.tier), r(coreServices.storages)))
    api.provide(strategyServices.tier, (r) => new TierService(r(coreServices.knex), r(coreServices.storages), r(projectServices.storageJournal), r(strategyServices.archives), r(projectServices.service), r(projectServices.guards), r(strategyServices.copier)))
    registerStrategyRoutes(api)
    registerTierRoutes(api)
    defineTierJob(api)
    registerCopyRoutes(api)
    defineCopyJobs(api)
    registerArchiveRoutes(api)
    defineStrategyJobs(api)
  },
  start({ resolve }) {
    // before the projects plugin's started phase repairs what a killed process left in the journal
    resolve(strategyServices.tier).defineRepair()
    const archives = resolve(strategyServices.archives)
    // GET /projects/:id shows where its archive is and how far it got; fields (values): GET /projects writes its page as text
    resolve(projectServices.service).views.addFields({
      keys: ['archive_strategy_id', 'archive_strategy_state', 'archived'],
      read: (ids) =>
        andThen(archives.statesOf(ids), (states) => (id: number) => {
          const s = states.get(id)
          return s ? [s.archive_strategy_id ?? null, s.state, s.state === 'archived' || s.bytes_released > 0] : NOT_ARCHIVED
        }),
    })
    // a rename or delete would pull the folder from under a running archive, or orphan an archive
    resolve(projectServices.guards).add(async (_em, project, action) => {
      const s = await archives.state(project.id)
      if (!s) return
      if ((ACTIVE as readonly string[]).includes(s.state)) throw conflict(`Project "${project.name}" is being ${s.direction === 'unarchive' ? 'restored' : 'archived'} (${s.state}); wait or cancel_archiving before you ${action} it`, { state: s.state })
      if (action === 'delete' && s.bytes_released > 0) throw conflict(`Project "${project.name}" has archived files; unarchive it before you delete it`, { state: s.state })
    })
  },
  async started({ resolve }) {
    // a state left active without a live job (a crash between the state's write and the enqueue) gets one
    const knex = resolve(coreServices.knex)
    const jobs = resolve(coreServices.jobs)
    const stuck = await knex('archive_states as s')
      .leftJoin('jobs as j', 'j.id', 's.job_id')
      .whereIn('s.state', ACTIVE as unknown as string[])
      .andWhere((q) => q.whereNull('j.id').orWhereNotIn('j.state', ['queued', 'running']))
      .select('s.id', 's.project_id', 's.user_id')
    for (const s of stuck) {
      const job = await jobs.enqueue(ArchiveJob.type, { projectId: Number(s.project_id) }, { userId: s.user_id === null ? null : Number(s.user_id), projectId: Number(s.project_id), maxAttempts: 10 })
      await knex('archive_states').where({ id: s.id }).update({ job_id: job.id })
    }
  },
})
