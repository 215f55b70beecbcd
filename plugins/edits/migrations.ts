import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-edits',
    async up(knex) {
      await knex.schema.createTable('edits', (t) => {
        t.increments('id')
        t.string('name', 100).notNullable().unique()
        t.text('comment')
        t.text('password_sealed').notNullable()
        timestamps(t)
      })
      await knex.schema.createTable('edit_sessions', (t) => {
        t.increments('id')
        t.integer('edit_id').notNullable().references('edits.id').onDelete('CASCADE')
        t.integer('project_id').notNullable().references('projects.id').onDelete('CASCADE')
        t.string('kind', 20).notNullable()
        t.integer('parent_id').references('projects.id').onDelete('CASCADE')
        t.text('link').notNullable()
        t.string('state', 20).notNullable()
        t.text('error')
        t.integer('mounted_by_id').references('users.id').onDelete('SET NULL')
        t.timestamp('mounted_at', { useTz: true }).notNullable()
        t.integer('opened_by_id').references('users.id').onDelete('SET NULL')
        t.timestamp('opened_at', { useTz: true })
        timestamps(t)
        t.unique(['edit_id', 'project_id', 'kind'])
        t.index(['project_id'])
        t.index(['parent_id'])
      })
      // at most one edit has a project open for write, even when two open it at the same instant
      // (same partial-index syntax on SQLite and PostgreSQL)
      await knex.raw('create unique index edit_sessions_one_writer on edit_sessions (project_id) where opened_at is not null')
    },
  },
  {
    // deleting a user clears who mounted or opened a project: without these, by reading every session
    name: '0002-foreign-key-indexes',
    async up(knex) {
      await knex.schema.alterTable('edit_sessions', (t) => {
        t.index(['mounted_by_id'])
        t.index(['opened_by_id'])
      })
    },
  },
]
