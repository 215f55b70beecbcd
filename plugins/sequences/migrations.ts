import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-sequences',
    async up(knex) {
      await knex.schema.createTable('preditor_sequences', (t) => {
        t.increments('id')
        t.string('uuid', 36).notNullable().unique()
        t.integer('project_id').notNullable().references('projects.id').onDelete('CASCADE')
        t.string('name', 255).notNullable()
        // the rate as an exact fraction (30000/1001), drop-frame counting, start timecode in frames
        t.integer('rate_num').notNullable()
        t.integer('rate_den').notNullable()
        t.boolean('drop_frame').notNullable().defaultTo(false)
        t.integer('start_frame').notNullable().defaultTo(0)
        t.integer('width')
        t.integer('height')
        // the editing lock (PUT /open): one user at a time
        t.integer('locked_by_id').references('users.id').onDelete('SET NULL')
        t.timestamp('locked_at', { useTz: true })
        // where an imported sequence came from: the file format, and the asset when the file was one
        t.string('source_format', 10)
        t.integer('source_asset_id').references('assets.id').onDelete('SET NULL')
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        // names are unique within a project; lookups by project use this index
        t.unique(['project_id', 'name'])
        t.index(['locked_by_id'])
        t.index(['source_asset_id'])
        t.index(['created_by_id'])
      })
      await knex.schema.createTable('preditor_sequence_clips', (t) => {
        t.increments('id')
        t.integer('sequence_id').notNullable().references('preditor_sequences.id').onDelete('CASCADE')
        t.string('kind', 5).notNullable()
        t.integer('track').notNullable()
        // frames at the sequence's rate: the record position, the source's in and (exclusive) out
        t.integer('record_frame').notNullable()
        t.integer('source_in').notNullable()
        t.integer('source_out').notNullable()
        // the source's start timecode in frames (source timecode = source_start + source_in)
        t.integer('source_start').notNullable().defaultTo(0)
        t.string('name', 255).notNullable()
        t.string('reel', 64)
        t.text('url')
        // null: an offline clip (no MAM asset conformed, or its asset was deleted)
        t.integer('asset_id').references('assets.id').onDelete('SET NULL')
        timestamps(t)
        // named: the generated name is longer than PostgreSQL's 63 characters
        t.index(['sequence_id', 'kind', 'track', 'record_frame'], 'preditor_sequence_clips_timeline_index')
        t.index(['asset_id'])
      })
      await knex.schema.createTable('preditor_sequence_markers', (t) => {
        t.increments('id')
        t.integer('sequence_id').notNullable().references('preditor_sequences.id').onDelete('CASCADE')
        t.integer('frame').notNullable()
        t.integer('duration').notNullable().defaultTo(0)
        t.string('name', 255).notNullable()
        t.text('comment').notNullable()
        t.string('color', 20).notNullable()
        timestamps(t)
        t.index(['sequence_id', 'frame'])
      })
    },
  },
]
