import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-templates',
    async up(knex) {
      await knex.schema.createTable('templates', (t) => {
        t.increments('id')
        t.string('name', 200).notNullable().unique()
        t.string('template_type', 100).notNullable()
        t.integer('position').notNullable().defaultTo(0)
        t.json('substitution_patterns').notNullable()
        t.string('folder', 255).notNullable().unique()
        timestamps(t)
      })
    },
  },
]
