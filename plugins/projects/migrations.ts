import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-projects',
    async up(knex) {
      await knex.schema.createTable('projects', (t) => {
        t.increments('id')
        t.string('uuid', 36).notNullable().unique()
        t.string('name', 255).notNullable()
        t.string('alternative_name', 255)
        t.text('description')
        t.string('storage', 64).notNullable()
        t.string('folder', 255).notNullable()
        t.integer('template_id')
        t.boolean('is_library_project').notNullable().defaultTo(false)
        t.integer('encoding_priority').notNullable().defaultTo(0)
        t.json('custom_metadata').notNullable()
        t.bigInteger('quota')
        t.bigInteger('size').notNullable().defaultTo(0)
        t.timestamp('size_calculated_at', { useTz: true })
        t.integer('parent_id').references('projects.id').onDelete('SET NULL')
        t.integer('frozen_by_id').references('users.id').onDelete('SET NULL')
        t.timestamp('frozen_at', { useTz: true })
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        t.string('created_by_edit', 200)
        t.integer('last_opened_by_id').references('users.id').onDelete('SET NULL')
        t.string('last_opened_by_edit', 200)
        t.timestamp('last_used_at', { useTz: true })
        t.boolean('deleted').notNullable().defaultTo(false)
        t.timestamp('deleted_at', { useTz: true })
        t.string('trash_folder', 255)
        timestamps(t)
        t.index(['deleted', 'name'])
        t.unique(['storage', 'folder'])
      })
    },
  },
  {
    // deleting a project or a user clears these references to it: without the indexes, by reading
    // every project
    name: '0002-foreign-key-indexes',
    async up(knex) {
      await knex.schema.alterTable('projects', (t) => {
        t.index(['parent_id'])
        t.index(['frozen_by_id'])
        t.index(['created_by_id'])
        t.index(['last_opened_by_id'])
      })
    },
  },
]
