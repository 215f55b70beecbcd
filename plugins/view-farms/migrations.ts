import { timestamps, type Migration } from '../../core/index.js'

export const NODES = 'view_farm_nodes'

export const migrations: Migration[] = [
  {
    name: '0001-view-farms-nodes',
    async up(knex) {
      // one row per job-running mamkit process: what the farm asks of it (name, state, concurrency,
      // accepted job types, restart generation) and what the process reports on each heartbeat
      await knex.schema.createTable(NODES, (t) => {
        t.increments('id')
        t.string('name', 100).notNullable()
        t.string('host_name', 255).notNullable()
        /** the runner's worker id (host:pid:random): every claim token of the process starts with it */
        t.string('worker_id', 100).notNullable().unique()
        t.integer('pid').notNullable()
        t.timestamp('process_started_at', { useTz: true }).notNullable()
        t.string('version', 40).notNullable()
        /** every job type the process can run (JSON list) */
        t.json('available_job_types').notNullable()
        /** the types it may claim (JSON list); null: all it can run */
        t.json('job_types')
        /** jobs at once as the farm set it; null: the process's own setting (MAMKIT_JOB_CONCURRENCY) */
        t.integer('concurrency')
        /** reported: the process's own setting, so a restart with another setting takes effect */
        t.integer('configured_concurrency').notNullable()
        /** asked of the node: running, paused (pause_all) or stopped */
        t.string('state', 10).notNullable().defaultTo('running')
        /** bumped by POST restart; the process reloads its runner when it sees a higher one */
        t.integer('restart_generation').notNullable().defaultTo(0)
        /** reported by the process: claiming, draining, idle, restarting, exited */
        t.string('activity', 12).notNullable()
        /** reported: the jobs it runs now (JSON list) */
        t.json('running_jobs').notNullable()
        t.timestamp('heartbeat_at', { useTz: true }).notNullable()
        t.timestamp('restarted_at', { useTz: true })
        timestamps(t)
        // a restarted process takes over the newest offline node of its host
        t.index(['host_name', 'heartbeat_at'])
      })
    },
  },
]
