import type { Knex } from '../../core/index.js'

/** a file or folder of a project that moved: paths relative to the project folder, `/`-separated */
export interface PathMove {
  from: string
  to: string
  isFolder: boolean
}

/**
 * What another plugin keeps about project paths (asset rows, later galleries and archives) and how
 * it follows a move. Projects does not know those plugins; they add a hook in their `start`.
 */
export interface PathMoveHook {
  /** target paths its rows still claim (an offline asset): such a move is refused (409) before anything moves */
  occupied?(knex: Knex, projectId: number, moves: PathMove[]): Promise<string[]>
  /** rows follow the files; runs in the transaction that ends the move's journal entry, so use `trx` only */
  moved(trx: Knex.Transaction, projectId: number, moves: PathMove[]): Promise<void>
}

/** Resolved as `pathMoveHooks`. */
export class PathMoveHooks {
  private readonly hooks: PathMoveHook[] = []
  add(hook: PathMoveHook): void {
    this.hooks.push(hook)
  }
  async occupied(knex: Knex, projectId: number, moves: PathMove[]): Promise<Set<string>> {
    const taken = new Set<string>()
    for (const hook of this.hooks) for (const p of (await hook.occupied?.(knex, projectId, moves)) ?? []) taken.add(p)
    return taken
  }
  async moved(trx: Knex.Transaction, projectId: number, moves: PathMove[]): Promise<void> {
    if (moves.length === 0) return
    for (const hook of this.hooks) await hook.moved(trx, projectId, moves)
  }
}
