import type { EntityManager } from '../../core/index.js'
import type { Project } from './entities.js'

/** what a guard can veto; writes into a project are not guarded (an open edit session allows them) */
export type GuardedAction = 'rename' | 'delete'
export type ProjectGuard = (em: EntityManager, project: Project, action: GuardedAction) => Promise<void>

/**
 * Checks other plugins hang on project changes: the edits plugin refuses to rename or delete a
 * mounted project. Resolved as `projectServices.guards`; a guard throws a MamError to refuse.
 */
export class ProjectGuards {
  private readonly guards: ProjectGuard[] = []
  add(guard: ProjectGuard): void {
    this.guards.push(guard)
  }
  async check(em: EntityManager, project: Project, action: GuardedAction): Promise<void> {
    for (const guard of this.guards) await guard(em, project, action)
  }
}
