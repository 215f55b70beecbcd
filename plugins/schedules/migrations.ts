import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-schedules',
    async up(knex) {
      await knex.schema.createTable('schedules', (t) => {
        t.increments('id')
        t.string('name', 255).notNullable().unique()
        t.string('cron', 200).notNullable()
        /** IANA name the cron expression is read in */
        t.string('time_zone', 64).notNullable()
        /** archive, backup, project_copy_to, tier */
        t.string('strategy_type', 40).notNullable()
        /** null once the strategy was deleted: the schedule stays and its runs fail saying so */
        t.integer('strategy_id').references('strategies.id').onDelete('SET NULL')
        /** tier: the named storage the selected projects move to */
        t.string('storage', 64)
        t.json('selection').notNullable()
        t.boolean('enabled').notNullable().defaultTo(true)
        /** the administrator whose jobs the runs queue */
        t.integer('user_id').references('users.id').onDelete('SET NULL')
        /** the slot the next run is due at; a process claims a run by moving it on in one conditional update */
        t.timestamp('next_run_at', { useTz: true })
        t.timestamp('last_run_at', { useTz: true })
        t.string('last_status', 20)
        t.integer('last_job_id')
        t.text('last_error')
        timestamps(t)
        t.index(['strategy_id'])
        t.index(['user_id'])
        t.index(['next_run_at'])
      })
      // what each run did: the projects it took, the jobs it queued, the projects it skipped and why
      await knex.schema.createTable('schedule_runs', (t) => {
        t.increments('id')
        t.integer('schedule_id').notNullable().references('schedules.id').onDelete('CASCADE')
        /** the slot this run was claimed for (a run after downtime: the missed slot) */
        t.timestamp('due_at', { useTz: true }).notNullable()
        t.timestamp('started_at', { useTz: true }).notNullable()
        t.timestamp('finished_at', { useTz: true })
        /** running, queued (every project got a job), partial (some were skipped), skipped (none got one), failed */
        t.string('status', 20).notNullable()
        t.integer('projects').notNullable().defaultTo(0)
        t.integer('queued').notNullable().defaultTo(0)
        t.integer('skipped').notNullable().defaultTo(0)
        /** [{project_id, job_id} | {project_id, skipped}] */
        t.json('outcomes').notNullable()
        t.text('error')
        timestamps(t)
        t.index(['schedule_id'])
      })
    },
  },
]
