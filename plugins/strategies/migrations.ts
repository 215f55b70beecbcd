import { timestamps, type Migration } from '../../core/index.js'
export const migrations: Migration[] = [
  {
    name: '0001-strategies',
    async up(knex) {
      // one table for the four kinds of strategy: they share every column but a few
      await knex.schema.createTable('strategies', (t) => {
        t.increments('id')
        /** archive, backup, asset_copy_to, project_copy_to */
        t.string('kind', 20).notNullable()
        t.string('name', 255).notNullable()
        /** a directory (disk) or s3://bucket/prefix */
        t.text('destination').notNullable()
        /** disk or s3 */
        t.string('target_kind', 10).notNullable()
        /** S3 settings; the secret key sealed (core/crypto.ts) */
        t.json('target').notNullable()
        t.string('format', 20).notNullable().defaultTo('plain')
        t.boolean('admin_only').notNullable().defaultTo(false)
        t.json('includes').notNullable()
        t.string('transmission_check', 12).notNullable().defaultTo('fingerprint')
        t.boolean('enabled').notNullable().defaultTo(true)
        t.string('strategy_type', 40).notNullable().defaultTo('manual')
        /** project copy-to: media, project_files, both */
        t.string('contents', 20).notNullable().defaultTo('both')
        t.boolean('delete_project').notNullable().defaultTo(false)
        /** backups kept per project (retention); 0: all */
        t.integer('keep').notNullable().defaultTo(0)
        t.boolean('incremental').notNullable().defaultTo(false)
        timestamps(t)
        t.unique(['kind', 'name'])
      })
      // one archive state per project: the unique key is what makes two archive requests meet
      await knex.schema.createTable('archive_states', (t) => {
        t.increments('id')
        t.integer('project_id').notNullable().unique().references('projects.id').onDelete('CASCADE')
        t.integer('archive_strategy_id').references('strategies.id').onDelete('SET NULL')
        /** the archive lives here while it moves (move_archive): the new strategy */
        t.integer('next_strategy_id').references('strategies.id').onDelete('SET NULL')
        t.integer('user_id').references('users.id').onDelete('SET NULL')
        /** archive, unarchive, move */
        t.string('direction', 10).notNullable()
        t.string('stage', 20).notNullable()
        /** queued, copying, verifying, releasing, archived, restoring, online, failed, cancelled */
        t.string('state', 20).notNullable()
        t.float('progress').notNullable().defaultTo(0)
        t.text('error')
        t.boolean('cancelled').notNullable().defaultTo(false)
        t.boolean('exclude_linked_files').notNullable().defaultTo(false)
        /** the folder (or key prefix) below the target's destination that holds this archive */
        t.string('archive_key', 255).notNullable()
        t.integer('job_id')
        t.integer('files_total').notNullable().defaultTo(0)
        t.integer('files_done').notNullable().defaultTo(0)
        t.integer('files_failed').notNullable().defaultTo(0)
        t.bigInteger('bytes_total').notNullable().defaultTo(0)
        t.bigInteger('bytes_released').notNullable().defaultTo(0)
        t.timestamp('started_at', { useTz: true })
        t.timestamp('finished_at', { useTz: true })
        timestamps(t)
        t.index(['archive_strategy_id'])
      })
      // each file of an archive: what was copied, its checksums, and how far it got
      await knex.schema.createTable('archive_files', (t) => {
        t.increments('id')
        t.integer('project_id').notNullable().references('projects.id').onDelete('CASCADE')
        t.integer('asset_id')
        t.text('path').notNullable()
        t.bigInteger('size').notNullable().defaultTo(0)
        t.bigInteger('mtime_ms')
        t.string('sha256', 64)
        t.string('crc32', 8)
        /** pending, copied, verified, released, restored, failed, excluded */
        t.string('state', 12).notNullable()
        t.text('error')
        timestamps(t)
        t.unique(['project_id', 'path'])
        t.index(['project_id', 'state'])
      })
      // copies made by copy_to and backups: what went where (incremental backups compare against these)
      await knex.schema.createTable('strategy_copies', (t) => {
        t.increments('id')
        t.integer('strategy_id').references('strategies.id').onDelete('SET NULL')
        t.integer('project_id').references('projects.id').onDelete('SET NULL')
        t.integer('job_id')
        t.string('key', 255).notNullable()
        t.integer('files').notNullable().defaultTo(0)
        t.bigInteger('bytes').notNullable().defaultTo(0)
        t.json('manifest').notNullable()
        t.string('state', 12).notNullable()
        timestamps(t)
        t.index(['strategy_id', 'project_id'])
      })
    },
  },
  {
    name: '0002-tier-claims',
    async up(knex) {
      // one move to another storage per project at a time: the unique key is what makes two tier requests meet
      await knex.schema.createTable('tier_claims', (t) => {
        t.increments('id')
        t.integer('project_id').notNullable().unique().references('projects.id').onDelete('CASCADE')
        t.string('storage', 64).notNullable()
        /** the job that moves it; null for the moment between the claim and the enqueue */
        t.integer('job_id')
        timestamps(t)
      })
    },
  },
]
