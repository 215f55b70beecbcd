import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-status-flags',
    async up(knex) {
      await knex.schema.createTable('status_flags', (t) => {
        t.increments('id')
        t.string('name', 100).notNullable()
        t.string('color', 7).notNullable()
        // purging a project removes the flags that came with it
        t.integer('scope_project_id').references('projects.id').onDelete('CASCADE')
        t.integer('position').notNullable().defaultTo(0)
        timestamps(t)
        t.index(['scope_project_id', 'position'])
      })
      await knex.schema.createTable('project_status_flags', (t) => {
        t.increments('id')
        t.integer('project_id').notNullable().references('projects.id').onDelete('CASCADE')
        t.integer('status_flag_id').notNullable().references('status_flags.id').onDelete('CASCADE')
        t.integer('set_by_id').references('users.id').onDelete('SET NULL')
        t.timestamp('created_at', { useTz: true }).notNullable()
        t.unique(['project_id', 'status_flag_id'])
        t.index(['status_flag_id'])
      })
    },
  },
  {
    // deleting a user clears who set a flag: without this index, by reading every flag set on every project
    name: '0002-set-by-index',
    async up(knex) {
      await knex.schema.alterTable('project_status_flags', (t) => t.index(['set_by_id']))
    },
  },
]
