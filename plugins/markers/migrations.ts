import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-marker-descriptions',
    async up(knex) {
      await knex.schema.createTable('marker_descriptions', (t) => {
        t.increments('id')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.integer('parent_id').references('marker_descriptions.id').onDelete('CASCADE')
        t.integer('in_frame').notNullable()
        t.integer('out_frame').notNullable()
        t.integer('rate_num').notNullable()
        t.integer('rate_den').notNullable()
        t.text('text').notNullable()
        t.string('color', 20).notNullable()
        t.string('track', 20)
        t.string('author', 255)
        t.string('guid', 128)
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        t.integer('updated_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        t.index(['asset_id', 'in_frame', 'id'])
        t.index(['parent_id'])
        t.index(['created_by_id'])
        t.index(['updated_by_id'])
        t.unique(['asset_id', 'guid'])
      })
    },
  },
]
