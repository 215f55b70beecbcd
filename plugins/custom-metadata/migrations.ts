import { timestamps, type Migration } from '../../core/index.js'
export const migrations: Migration[] = [
  {
    name: '0001-custom-metadata',
    async up(knex) {
      await knex.schema.createTable('custom_metadata_sets', (t) => {
        t.increments('id')
        t.string('name', 255).notNullable()
        t.string('applies_to', 10).notNullable()
        t.boolean('root').notNullable().defaultTo(true)
        t.integer('parent_id').references('custom_metadata_sets.id').onDelete('CASCADE')
        t.integer('position').notNullable().defaultTo(0)
        // a set that belongs to one project or asset (received from another site); null: global
        t.integer('scope_project_id').references('projects.id').onDelete('CASCADE')
        t.integer('scope_asset_id').references('assets.id').onDelete('CASCADE')
        timestamps(t)
        t.index(['parent_id'])
        t.index(['scope_project_id'])
        t.index(['scope_asset_id'])
      })
      await knex.schema.createTable('custom_metadata_fields', (t) => {
        t.increments('id')
        t.integer('custom_metadata_set_id').notNullable().references('custom_metadata_sets.id').onDelete('CASCADE')
        t.string('name', 255).notNullable()
        t.string('type', 20).notNullable()
        t.boolean('mandatory').notNullable().defaultTo(false)
        t.integer('maxlen')
        t.text('pattern')
        t.double('min')
        t.double('max')
        t.boolean('integer').notNullable().defaultTo(false)
        t.integer('position').notNullable().defaultTo(0)
        t.boolean('use_in_project_name').notNullable().defaultTo(false)
        // the generator's counter: taken with an update in the transaction that stores the value
        t.integer('counter').notNullable().defaultTo(0)
        timestamps(t)
        t.unique(['custom_metadata_set_id', 'name'])
      })
      await knex.schema.createTable('select_field_options', (t) => {
        t.increments('id')
        t.integer('custom_metadata_field_id').notNullable().references('custom_metadata_fields.id').onDelete('CASCADE')
        t.string('name', 255).notNullable()
        t.integer('position').notNullable().defaultTo(0)
        t.integer('custom_metadata_sub_set_id').references('custom_metadata_sets.id').onDelete('SET NULL')
        t.boolean('safe_search').notNullable().defaultTo(false)
        timestamps(t)
        t.unique(['custom_metadata_field_id', 'name'])
        t.index(['custom_metadata_sub_set_id'])
      })
      await knex.schema.createTable('custom_metadata_values', (t) => {
        t.increments('id')
        t.integer('custom_metadata_field_id').notNullable().references('custom_metadata_fields.id').onDelete('CASCADE')
        t.string('owner_type', 20).notNullable()
        t.integer('owner_id').notNullable()
        // foreign keys for the owners that have tables here: purging a project or destroying an asset removes its values
        t.integer('project_id').references('projects.id').onDelete('CASCADE')
        t.integer('asset_id').references('assets.id').onDelete('CASCADE')
        /** canonical JSON of the value (select: option id, multi-select: sorted ids, user: user id) */
        t.text('value').notNullable()
        /** the value as words (option names, user name): what search and project names read */
        t.text('text_value').notNullable()
        /** generator values: unique per field (nulls never collide) */
        t.string('unique_key', 255)
        t.integer('updated_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        // named: the default names pass PostgreSQL's 63 characters
        t.unique(['custom_metadata_field_id', 'owner_type', 'owner_id'], { indexName: 'custom_metadata_values_field_owner_unique' })
        t.unique(['custom_metadata_field_id', 'unique_key'], { indexName: 'custom_metadata_values_field_key_unique' })
        t.index(['owner_type', 'owner_id'])
        t.index(['project_id'])
        t.index(['asset_id'])
        t.index(['updated_by_id'])
      })
      await knex.schema.createTable('custom_metadata_history', (t) => {
        t.increments('id')
        t.string('owner_type', 20).notNullable()
        t.integer('owner_id').notNullable()
        t.integer('project_id').references('projects.id').onDelete('CASCADE')
        t.integer('asset_id').references('assets.id').onDelete('CASCADE')
        t.integer('custom_metadata_field_id').references('custom_metadata_fields.id').onDelete('SET NULL')
        t.string('field_name', 255).notNullable()
        t.text('old_value')
        t.text('new_value')
        t.integer('user_id').references('users.id').onDelete('SET NULL')
        t.timestamp('created_at', { useTz: true }).notNullable()
        t.index(['owner_type', 'owner_id', 'id'])
        t.index(['project_id'])
        t.index(['asset_id'])
        t.index(['custom_metadata_field_id'])
        t.index(['user_id'])
      })
    },
  },
]
