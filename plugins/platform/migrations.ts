import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-settings-licenses-traffic',
    async up(knex) {
      await knex.schema.createTable('platform_settings', (t) => {
        t.increments('id')
        t.string('plugin', 100).notNullable().unique()
        t.text('value').notNullable()
        t.integer('updated_by_id')
        timestamps(t)
      })
      // the audit of setting changes; user ids stay when users are deleted (no foreign key)
      await knex.schema.createTable('platform_setting_changes', (t) => {
        t.increments('id')
        t.string('plugin', 100).notNullable()
        t.string('setting', 300).notNullable()
        t.text('old_value')
        t.text('new_value')
        t.integer('user_id')
        t.string('username', 200)
        t.timestamp('created_at', { useTz: true }).notNullable()
        t.index(['created_at'])
      })
      await knex.schema.createTable('platform_licenses', (t) => {
        t.increments('id')
        t.text('document').notNullable()
        t.integer('installed_by_id')
        timestamps(t)
      })
      await knex.schema.createTable('platform_traffic', (t) => {
        t.increments('id')
        t.string('instance', 100).notNullable()
        t.string('month', 7).notNullable()
        t.string('kind', 20).notNullable()
        t.bigInteger('bytes').notNullable().defaultTo(0)
        t.timestamp('updated_at', { useTz: true }).notNullable()
        t.unique(['instance', 'month', 'kind'])
      })
    },
  },
  {
    name: '0002-platform-library-ingests',
    async up(knex) {
      await knex.schema.createTable('platform_library_ingests', (t) => {
        t.increments('id')
        t.string('name', 200).notNullable().unique()
        t.string('storage', 64).notNullable()
        t.string('path', 4096).notNullable()
        t.integer('project_id').notNullable().references('projects.id').onDelete('CASCADE').index()
        t.string('mode', 10).notNullable()
        t.integer('stable_seconds').notNullable()
        t.integer('interval_seconds').notNullable()
        t.boolean('mxf_op_atom').notNullable()
        t.boolean('enabled').notNullable()
        t.timestamp('next_scan_at', { useTz: true }).notNullable()
        t.integer('scan_claims').notNullable().defaultTo(0)
        t.integer('scan_job_id')
        t.timestamp('last_scan_at', { useTz: true })
        t.text('last_error')
        t.integer('created_by_id')
        timestamps(t)
      })
      await knex.schema.createTable('platform_library_ingest_files', (t) => {
        t.increments('id')
        t.integer('ingest_id').notNullable().references('platform_library_ingests.id').onDelete('CASCADE')
        t.string('path', 1024).notNullable()
        t.bigInteger('size').notNullable()
        t.bigInteger('mtime').notNullable()
        t.string('group_key', 300)
        t.string('state', 12).notNullable()
        t.timestamp('first_seen_at', { useTz: true }).notNullable()
        t.timestamp('stable_since', { useTz: true }).notNullable()
        t.timestamp('claimed_until', { useTz: true })
        t.integer('asset_id')
        t.text('error')
        t.timestamp('updated_at', { useTz: true }).notNullable()
        t.unique(['ingest_id', 'path'])
      })
    },
  },
]
