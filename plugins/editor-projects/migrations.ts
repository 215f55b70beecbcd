import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-editor-projects-readings',
    async up(knex) {
      await knex.schema.createTable('editor_projects_readings', (t) => {
        t.increments('id')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE').unique()
        t.bigInteger('file_size').notNullable()
        t.bigInteger('file_mtime_ms').notNullable()
        t.string('state', 10).notNullable()
        // a job id, not a foreign key: finished jobs are pruned while the reading stays
        t.integer('job_id')
        t.string('format', 16)
        t.json('sequence_names')
        t.json('media')
        t.text('error')
        t.integer('error_status')
        timestamps(t)
      })
    },
  },
]
