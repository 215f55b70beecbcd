import type { Project } from './entities.js'
import type { NewProject } from './service.js'

import { type EntityManager, type Knex, type Principal } from '../../core/index.js'
/**
 * What other plugins add to project creation (custom metadata: mandatory fields, generated numbers,
 * a name composed of values). Added in the plugin's `start`; a hook throws a MamError to refuse.
 */
export interface ProjectCreateHook {
  /**
   * before anything is written or checked: may refuse (4xx) or fill in the input (the name). What
   * `created` needs goes into `input.prepared[<plugin>]` as JSON, not into memory: after a crash the
   * repair runs `created` with the input as it was stored with the creation.
   */
  prepare?(em: EntityManager, principal: Principal, input: NewProject): Promise<void>
  /**
   * inside the transaction that commits the new project: rows written with `trx` commit with it. In the
   * request, a refusal (a 4xx MamError) undoes the whole creation: row, rights and folder. Runs once per
   * project: in the request, or in the repair of a creation a crash cut short after the tree was in
   * place (then `principal` is the creator, via `job`, and a refusal is logged: the project stays,
   * without the hook's rows).
   */
  created?(trx: Knex, project: Project, principal: Principal, input: NewProject): Promise<void>
}

export class ProjectCreateHooks {
  private readonly hooks: ProjectCreateHook[] = []
  add(hook: ProjectCreateHook): void {
    this.hooks.push(hook)
  }
  async prepare(em: EntityManager, principal: Principal, input: NewProject): Promise<void> {
    for (const hook of this.hooks) await hook.prepare?.(em, principal, input)
  }
  async created(trx: Knex, project: Project, principal: Principal, input: NewProject): Promise<void> {
    for (const hook of this.hooks) await hook.created?.(trx, project, principal, input)
  }
}
