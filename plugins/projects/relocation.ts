import { rename, rmdir } from 'node:fs/promises'
import path from 'node:path'
import { isUniqueViolation, conflict, notFound, moveExclusive, identityOf, sameFile, type Knex, type JournalEntry, type StorageJournal, type StorageRegistry } from '../../core/index.js'
import type { Project } from './entities.js'
import { projectScope } from './moves.js'
import { makeDirs } from '../../core/index.js'

const RELOCATE_KIND = 'projects.relocate'

/** a project's folder moving on its storage: renamed with the project, or into the trash */
interface Relocation {
  projectId: number
  purpose: 'rename' | 'trash'
  storage: string
  from: string
  to: string
  /** the project's name before and after (rename) */
  names: [string, string]
  /** identity of the folder; null when it had vanished from the storage already */
  dev: string | null
  ino: string | null
}

/**
 * Renaming a project and moving it into the trash move its whole folder. The row changes first (the
 * unique storage + folder index reserves a new name against other renames and creations), then
 * the folder moves; both under the journal, alone in the project's scope (no folder move or upload
 * runs inside it meanwhile). A crash in between is repaired from the disk: a folder that moved
 * keeps the new row, one that did not gets the old row back. Resolved as `projectRelocation`.
 */
export class ProjectRelocation {
  constructor(
    private readonly knex: Knex,
    private readonly journal: StorageJournal,
    private readonly storages: StorageRegistry,
  ) {}

  defineRepair(): void {
    this.journal.define<Relocation>(RELOCATE_KIND, (entry) => this.repair(entry))
  }

  async rename(project: Project, folder: string, name: string): Promise<void> {
    await this.relocate(project, 'rename', folder, name)
    Object.assign(project, { folder, name })
  }

  async trash(project: Project, trashFolder: string): Promise<void> {
    const done = await this.relocate(project, 'trash', trashFolder, project.name)
    Object.assign(project, { trashFolder: done.from, folder: trashFolder, deleted: true, deletedAt: new Date() })
  }

  private async relocate(project: Project, purpose: Relocation['purpose'], to: string, name: string) {
    const root = this.storages.get(project.storage).root
    const intent: Relocation = { projectId: project.id, purpose, storage: project.storage, from: project.folder, to, names: [project.name, name], dev: null, ino: null }
    return this.journal.run(RELOCATE_KIND, intent, { scope: projectScope(project.id), exclusive: true }, async (entry) => {
      // alone in the project now: a rename that ran while this request waited moved the folder
      const current = await this.knex('projects').where({ id: project.id, deleted: false }).first('folder', 'name')
      if (!current) throw notFound('project', project.id)
      const id = await identityOf(path.join(root, current.folder))
      Object.assign(intent, { from: current.folder, names: [current.name, name], dev: id?.dev ?? null, ino: id?.ino ?? null })
      await this.journal.update(entry, intent)
      await this.writeRow(this.knex, intent, 'forward').catch((err) => {
        throw isUniqueViolation(err) ? conflict(`A project folder "${to}" exists on storage "${project.storage}"`, { errors: [{ param: 'name', message: 'is taken on this storage' }] }) : err
      })
      if (id) {
        await makeDirs(path.dirname(path.join(root, to)))
        if (purpose === 'rename')
          await moveExclusive(path.join(root, current.folder), path.join(root, to), true).catch((err) => {
            throw ['EEXIST', 'ENOTEMPTY'].includes(err.code) ? conflict(`The folder "${to}" exists already on storage "${project.storage}"`, { errors: [{ param: 'name', message: 'names a folder that exists on the storage' }] }) : err
          })
        // the trash name is the project's uuid: nobody else's
        else await rename(path.join(root, current.folder), path.join(root, to))
      }
      await this.journal.end(this.knex, entry)
      return { from: current.folder as string }
    })
  }

  private writeRow(knex: Knex, r: Relocation, direction: 'forward' | 'back') {
    const forward = direction === 'forward'
    const folder = forward ? r.to : r.from
    const changes =
      r.purpose === 'rename'
        ? { folder, name: r.names[forward ? 1 : 0] }
        : { folder, trash_folder: forward ? r.from : null, deleted: forward, deleted_at: forward ? new Date() : null }
    return knex('projects').where({ id: r.projectId }).update({ ...changes, updated_at: new Date() })
  }

  /** where the folder is decides: moved (or vanished before) keeps the new row, still in place gets the old row back */
  private async repair(entry: JournalEntry<Relocation>): Promise<void> {
    const r = entry.payload
    const root = this.storages.get(r.storage).root
    const stayed = sameFile(await identityOf(path.join(root, r.from)), r) && !sameFile(await identityOf(path.join(root, r.to)), r)
    if (stayed) {
      // the empty folder that claimed the new name just before the rename, unless another project's row names it
      const owner = await this.knex('projects').where({ storage: r.storage, folder: r.to }).whereNot({ id: r.projectId }).first('id')
      if (!owner) await rmdir(path.join(root, r.to)).catch(() => {})
    }
    await this.knex.transaction(async (trx) => {
      const row = await trx('projects').where({ id: r.projectId }).first('folder')
      if (row && stayed && row.folder === r.to) await this.writeRow(trx, r, 'back')
      await this.journal.end(trx, entry)
    })
  }
}
