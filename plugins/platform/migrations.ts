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
]
