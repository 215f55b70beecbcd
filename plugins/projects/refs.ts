import { createServiceRef, type StorageJournal } from '../../core/index.js'
import type { ProjectService } from './service.js'
import type { ProjectGuards } from './guards.js'
import type { PathMoveHooks } from './path-moves.js'
import type { ProjectMoves } from './moves.js'
import type { ProjectRelocation } from './relocation.js'

/** The projects plugin's services, for plugins that list `projects` in their dependsOn. */
export const projectServices = {
  /** projects: access checks (`readable`/`writable` take the principal), folders, create, trash */
  service: createServiceRef<ProjectService>('projects.service'),
  /** vetoes other plugins add to project actions (an open edit session blocks a rename …) */
  guards: createServiceRef<ProjectGuards>('projects.guards'),
  /** hooks that carry other plugins' rows along when a folder or project moves */
  pathMoveHooks: createServiceRef<PathMoveHooks>('projects.pathMoveHooks'),
  /** the journal of file operations that must end together with rows (moves here, uploads in assets) */
  storageJournal: createServiceRef<StorageJournal>('projects.storageJournal'),
  moves: createServiceRef<ProjectMoves>('projects.moves'),
  relocation: createServiceRef<ProjectRelocation>('projects.relocation'),
} as const
