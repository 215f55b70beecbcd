import { realpath, rmdir, unlink } from 'node:fs/promises'
import path from 'node:path'
import { conflict, invalidParam, notFound, moveExclusive, identityOf, sameFile, type Knex, type JournalEntry, type StorageJournal } from '../../core/index.js'
import type { Project } from './entities.js'
import type { ProjectService } from './service.js'
import type { PathMove, PathMoveHooks } from './path-moves.js'
import type { PlannedMove } from './folders.js'
import { makeDirs } from '../../core/index.js'

const MOVE_KIND = 'projects.move'

/** what a repair needs: the moves, each with the identity (device and inode) of what it moves */
interface MoveIntent {
  projectId: number
  moves: Array<PathMove & { dev: string; ino: string }>
}

/** the journal scope of a project's tree: moves take it alone, uploads share it */
export const projectScope = (projectId: number) => `project:${projectId}`

/**
 * Folder moves inside a project, with the rows of other plugins (assets …) following in the same
 * transaction that ends the journal entry. Moves of one project run one at a time (and not beside
 * an upload into it), so rows and files change in the same order. A crash between the file system
 * and the database is repaired from the disk: whatever moved has its rows moved, whatever did not
 * keeps them. Resolved as `projectMoves`.
 */
export class ProjectMoves {
  constructor(
    private readonly knex: Knex,
    private readonly journal: StorageJournal,
    private readonly hooks: PathMoveHooks,
    private readonly projects: ProjectService,
  ) {}

  defineRepair(): void {
    this.journal.define<MoveIntent>(MOVE_KIND, (entry) => this.repair(entry))
  }

  /** `plan` checks the request against the project folder (as it is once the move runs alone in the project) and says what moves */
  async move(project: Project, plan: (root: string) => Promise<PlannedMove[]>): Promise<void> {
    await this.journal.run<MoveIntent, void>(MOVE_KIND, { projectId: project.id, moves: [] }, { scope: projectScope(project.id), exclusive: true }, async (entry) => {
      const root = await this.projects.currentRoot(project.id)
      const planned = await plan(root)
      const taken = await this.hooks.occupied(this.knex, project.id, planned)
      const blocked = planned.find((m) => taken.has(m.to))
      if (blocked)
        throw conflict(`An asset is still registered at "${blocked.to}" (its file is gone); remove it (DELETE /assets/destroy) before moving something there`, {
          errors: [{ param: blocked.targetParam, message: 'names a path an asset is registered at' }],
        })
      const moves: MoveIntent['moves'] = []
      for (const m of planned) {
        const id = await identityOf(path.join(root, m.from))
        if (!id) throw notFound('path', m.from)
        moves.push({ from: m.from, to: m.to, isFolder: m.isFolder, dev: id.dev, ino: id.ino })
      }
      await this.journal.update(entry, { projectId: project.id, moves })
      const done: PathMove[] = []
      let failure: { move: PlannedMove; err: NodeJS.ErrnoException } | undefined
      const folders = new Set<string>()
      for (const [i, m] of moves.entries()) {
        try {
          const folder = path.dirname(path.join(root, m.to))
          if (!folders.has(folder)) await makeDirs(folder)
          folders.add(folder)
          await moveExclusive(path.join(root, m.from), path.join(root, m.to), m.isFolder)
          done.push(m)
        } catch (err) {
          failure = { move: planned[i], err: err as NodeJS.ErrnoException }
          break
        }
      }
      await this.commit(entry, project.id, done)
      if (failure) throw moveError(failure.move, failure.err)
    })
  }

  private commit(entry: JournalEntry<unknown>, projectId: number, done: PathMove[]): Promise<void> {
    return this.knex.transaction(async (trx) => {
      await this.hooks.moved(trx, projectId, done)
      await this.journal.end(trx, entry)
    })
  }

  /** decides per move from the disk whether it happened (where the inode is), finishes a half-done file move and moves the rows of what moved */
  private async repair(entry: JournalEntry<MoveIntent>): Promise<void> {
    const row = await this.knex('projects').where({ id: entry.payload.projectId }).first('id', 'storage', 'folder')
    const root = row ? await realpath(this.projects.pathOf(row as Project)).catch(() => null) : null
    const done: PathMove[] = []
    for (const m of root ? entry.payload.moves : []) {
      const [at, was] = [await identityOf(path.join(root!, m.to)), await identityOf(path.join(root!, m.from))]
      if (sameFile(at, m)) {
        // linked under the new name, the old one not yet removed
        if (!m.isFolder && sameFile(was, m)) await unlink(path.join(root!, m.from))
        done.push(m)
      } else if (sameFile(was, m) && m.isFolder && at?.isDirectory) {
        // the empty folder that claimed the name before the rename (rmdir refuses anything else)
        await rmdir(path.join(root!, m.to)).catch(() => {})
      }
    }
    await this.commit(entry, entry.payload.projectId, done)
  }
}

function moveError(move: PlannedMove, err: NodeJS.ErrnoException): Error {
  if (err.code === 'EEXIST' || err.code === 'ENOTEMPTY')
    return conflict(`"${move.to}" was taken meanwhile`, { errors: [{ param: move.targetParam, message: 'exists already' }] })
  if (err.code === 'ENOENT') return notFound('path', move.from)
  if (err.code === 'EXDEV') return invalidParam(move.param, `lies on another file system than "${path.posix.dirname(move.to) || '/'}"`)
  return err
}
