import { lstat, rm, rmdir } from 'node:fs/promises'
import path from 'node:path'
import type { Logger } from 'pino'
import type { EntityManager, Knex, JournalEntry, Outbox, Principal, StorageJournal, StorageRegistry } from '../../core/index.js'
import { projectCreated } from './events.js'
import { Project } from './entities.js'
import type { ProjectCreateHooks } from './create-hooks.js'
import type { NewProject } from './service.js'

export const CREATE_KIND = 'projects.create'

/** a project being created: its tree is staged below the storage's trash folder, then renamed into place */
export interface CreateIntent {
  storage: string
  folder: string
  /** relative to the storage root */
  staging: string
  uuid: string
  /** who creates it, and the input as the create hooks' `prepare` left it: a repair runs their `created` step */
  createdBy?: number
  input?: NewProject
}

export interface CreationRepairDeps {
  knex: Knex
  storages: StorageRegistry
  journal: StorageJournal
  outbox?: Outbox
  hooks: ProjectCreateHooks
  /** a fresh EntityManager (the hooks get the project as an entity) */
  em: () => EntityManager
  /** the creator as a principal (AuthService.principalFor); null when the user is gone */
  principalFor: (userId: number) => Promise<Principal | null>
  log: Pick<Logger, 'warn'>
}

const exists = (p: string) => lstat(p).then(() => true, () => false)

/**
 * Undoes a creation that did not finish (a crash, a lost race for the name, a folder that appeared
 * meanwhile): while the staged tree has not been renamed into place, the row (if written) and the
 * staging folder go, and nothing else: a loser never touches the winner's folder. A creation whose
 * tree is in place is complete; its journal entry still open means its last transaction (which
 * runs the create hooks' `created` step and publishes project.created) never committed, so the
 * repair runs that step and publishes the event with the entry's end, as the creation would have.
 */
export function repairCreation({ knex, storages, journal, outbox, hooks, em, principalFor, log }: CreationRepairDeps) {
  return async (entry: JournalEntry<CreateIntent>) => {
    const { storage, folder, staging, uuid, createdBy, input } = entry.payload
    const root = storages.get(storage).root
    const placed = !(await exists(path.join(root, staging)))
    if (!placed) {
      await rm(path.join(root, staging), { recursive: true, force: true })
      // the empty folder that claimed the name just before the rename, unless it is another project's
      // (a winner's row is written before its folder, so a folder nobody's row names is not a winner's)
      const owner = await knex('projects').where({ storage, folder }).whereNot({ uuid }).first('id')
      if (!owner) await rmdir(path.join(root, folder)).catch(() => {})
    }
    // read before the transaction: SQLite has one connection, which the transaction holds
    const finish = placed && input && createdBy !== undefined ? { project: await em().findOne(Project, { uuid }), principal: await principalFor(createdBy) } : null
    await knex.transaction(async (trx) => {
      if (!placed) {
        const row = await trx('projects').where({ uuid }).first('id')
        if (row) {
          await trx('access_rights').where({ object_type: 'project', object_id: row.id }).delete()
          await trx('projects').where({ id: row.id }).delete()
        }
      } else {
        const row = await trx('projects').where({ uuid }).first('id', 'name', 'storage', 'created_by_id')
        // entries written before the intent carried the input have nothing to hand the hooks
        if (row && finish?.project && finish.principal) {
          // in a savepoint: a hook that refuses now (as it may have refused in the request) leaves the
          // project without its rows, as before hooks ran here, instead of a repair that fails forever
          await trx
            .transaction((savepoint) => hooks.created(savepoint, finish.project!, finish.principal!, input!))
            .catch((err) => log.warn({ err, project_id: Number(row.id) }, "a create hook refused while a project's creation was repaired; the project stays without what the hook adds"))
        }
        const own = row?.created_by_id == null ? undefined : await trx('teams').where({ owner_id: row.created_by_id }).first('id')
        if (row && own)
          await outbox?.publish(trx, projectCreated, { project_id: Number(row.id), name: row.name, storage: row.storage, created_by_id: Number(row.created_by_id), team_id: Number(own.id) }, { subjectId: Number(row.id), actorId: Number(row.created_by_id) })
      }
      await journal.end(trx, entry)
    })
  }
}
