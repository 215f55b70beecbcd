import type { ArchiveService } from './archive.js'
import type { StrategyService } from './strategies.js'
import type { CopyService } from './copies.js'
import type { StrategyRuns } from './runs.js'
import type { TierService } from './tier.js'
import type { Copier } from './copier.js'

import { createServiceRef } from '../../core/index.js'
/** The strategies plugin's services, for plugins that list `strategies` in their dependsOn. */
export const strategyServices = {
  /** archive, backup and copy-to strategies and the targets they write to */
  strategies: createServiceRef<StrategyService>('strategies.strategies'),
  /** project archives: state, start, cancel, errors; the archive job's engine */
  archives: createServiceRef<ArchiveService>('strategies.archives'),
  /** copy-to, project backups and database backups */
  copies: createServiceRef<CopyService>('strategies.copies'),
  /** starting archive, backup, copy-to (and tier) jobs on projects, for requests and unattended runs (schedules) */
  runs: createServiceRef<StrategyRuns>('strategies.runs'),
  /** moving projects between named storages (POST /projects/tier) */
  tier: createServiceRef<TierService>('strategies.tier'),
  /** copies and hashes large files in worker threads (archive, restore, copy-to, backup, tier) */
  copier: createServiceRef<Copier>('strategies.copier'),
} as const
