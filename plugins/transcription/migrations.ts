import { timestamps, type Migration } from '../../core/index.js'
export const migrations: Migration[] = [
  {
    name: '0001-transcriptions',
    async up(knex) {
      await knex.schema.createTable('transcriptions', (t) => {
        t.increments('id')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.string('engine', 40).notNullable()
        t.string('language', 20).notNullable()
        t.string('state', 20).notNullable().defaultTo('queued')
        t.text('error')
        t.integer('job_id')
        t.integer('open_asset_id').unique()
        t.integer('duration_ms')
        t.integer('chunks')
        t.integer('revision').notNullable().defaultTo(0)
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        t.index(['asset_id'])
        t.index(['created_by_id'])
      })
      await knex.schema.createTable('transcription_sentences', (t) => {
        t.increments('id')
        t.integer('transcription_id').notNullable().references('transcriptions.id').onDelete('CASCADE')
        t.integer('start_ms').notNullable()
        t.integer('end_ms').notNullable()
        t.text('text').notNullable()
        t.string('speaker', 100).notNullable()
        t.text('words').notNullable()
        timestamps(t)
        t.index(['transcription_id', 'start_ms', 'id'])
      })
    },
  },
]
