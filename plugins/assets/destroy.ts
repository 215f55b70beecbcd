import { rm } from 'node:fs/promises'
import path from 'node:path'
import type { JournalEntry, Knex, StorageJournal } from '../../core/index.js'
import { projectScope, type ProjectService } from '../projects/index.js'
import { pathBelow } from './files.js'

const DESTROY_KIND = 'assets.destroy'

/** what one project loses: paths below its root, each a file or a folder with everything in it */
interface DestroyIntent {
  projectId: number
  paths: string[]
}

/**
 * Removes files or folders of a project with their asset rows as one operation. The intent is
 * journalled before the first file goes and ended in the transaction that deletes the rows, so a
 * crash in between (files gone, rows left: "original is offline" forever) is finished by the repair
 * on the next start. Finishing is the only consistent end: some files may already be gone, and the
 * client never had an answer.
 */
export class AssetDestroyer {
  constructor(
    private readonly knex: Knex,
    private readonly journal: StorageJournal,
    private readonly projects: ProjectService,
  ) {}

  defineRepair(): void {
    this.journal.define<DestroyIntent>(DESTROY_KIND, (entry) => this.finish(entry))
  }

  async destroy(projectId: number, paths: string[]): Promise<void> {
    await this.journal.run<DestroyIntent, void>(DESTROY_KIND, { projectId, paths }, { scope: projectScope(projectId), exclusive: true }, (entry) => this.finish(entry))
  }

  /** idempotent: removes what is still there, then the rows, and ends the entry with them */
  private async finish(entry: JournalEntry<DestroyIntent>): Promise<void> {
    const { projectId, paths } = entry.payload
    const root = await this.projects.currentRoot(projectId).catch(() => null)
    if (root) for (const p of paths) await rm(path.join(root, p), { recursive: true, force: true })
    await this.knex.transaction(async (trx) => {
      for (const p of paths)
        await trx('assets')
          .where({ project_id: projectId })
          .where((q) => q.where('path', p).orWhereRaw(...pathBelow(p)))
          .delete()
      await this.journal.end(trx, entry)
    })
  }
}
