import { timestamps, type Migration } from '../db/migrator.js'

export const coreMigrations: Migration[] = [
  {
    name: '0001-auth-jobs-features',
    async up(knex) {
      await knex.schema.createTable('roles', (t) => {
        t.increments('id')
        t.string('name', 200).notNullable().unique()
        t.json('role_matrix').notNullable()
        t.boolean('builtin').notNullable().defaultTo(false)
        timestamps(t)
      })
      await knex.schema.createTable('users', (t) => {
        t.increments('id')
        t.string('username', 200).notNullable().unique()
        t.string('password_hash', 300)
        t.string('firstname', 200)
        t.string('lastname', 200)
        t.string('email', 320)
        t.integer('role_id').notNullable().references('roles.id')
        timestamps(t)
      })
      await knex.schema.createTable('api_keys', (t) => {
        t.increments('id')
        t.string('name', 200).notNullable()
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('secret_hash', 64).notNullable()
        t.timestamp('last_used_at', { useTz: true })
        t.timestamp('expires_at', { useTz: true })
        timestamps(t)
        t.index(['user_id'])
      })
      await knex.schema.createTable('auth_tokens', (t) => {
        t.increments('id')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('secret_hash', 64).notNullable()
        t.string('name', 200)
        t.timestamp('last_seen_at', { useTz: true })
        t.timestamp('expires_at', { useTz: true }).notNullable()
        t.timestamp('revoked_at', { useTz: true })
        timestamps(t)
        t.index(['user_id'])
      })
      await knex.schema.createTable('jobs', (t) => {
        t.increments('id')
        t.string('type', 100).notNullable()
        t.string('kind', 20).notNullable()
        t.string('state', 20).notNullable()
        t.text('payload')
        t.text('result')
        t.text('error')
        t.float('progress').notNullable().defaultTo(0)
        t.integer('attempts').notNullable().defaultTo(0)
        t.integer('max_attempts').notNullable()
        t.integer('priority').notNullable().defaultTo(0)
        t.timestamp('run_at', { useTz: true }).notNullable()
        t.timestamp('lease_until', { useTz: true })
        t.string('locked_by', 100)
        t.boolean('cancel_requested').notNullable().defaultTo(false)
        t.integer('user_id')
        t.integer('project_id')
        t.integer('edit_id')
        t.integer('asset_id')
        t.integer('success').notNullable().defaultTo(0)
        t.integer('failure').notNullable().defaultTo(0)
        t.timestamp('started_at', { useTz: true })
        t.timestamp('finished_at', { useTz: true })
        timestamps(t)
        // the claim query: runnable jobs by state, then due time
        t.index(['state', 'run_at'])
        t.index(['state', 'lease_until'])
      })
      await knex.schema.createTable('features', (t) => {
        t.increments('id')
        t.string('name', 100).notNullable().unique()
        t.boolean('active').notNullable()
        timestamps(t)
      })
    },
  },
  {
    name: '0002-auth-token-app',
    async up(knex) {
      // which client opened a login session (the desktop app, a browser, a script), shown in session lists
      await knex.schema.alterTable('auth_tokens', (t) => {
        t.string('app', 200)
      })
    },
  },
  {
    // the claim reads queued jobs in priority order: with this index it stops after the jobs it takes
    // instead of sorting every queued row (quadratic over a 10,000-file ingest)
    name: '0003-jobs-claim-index',
    async up(knex) {
      await knex.raw('create index jobs_claim_index on jobs (state, priority desc, id)')
    },
  },
  {
    // deleting a role checks that no user has it: without this index, by reading every user
    name: '0004-users-role-index',
    async up(knex) {
      await knex.schema.alterTable('users', (t) => t.index(['role_id']))
    },
  },
  {
    // answers kept for retried requests (core/idempotency): a client that lost the answer repeats
    // the request under the same Idempotency-Key and gets the stored one instead of a second effect
    name: '0005-idempotency-keys',
    async up(knex) {
      await knex.schema.createTable('idempotency_keys', (t) => {
        t.increments('id')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('key', 255).notNullable()
        t.string('route', 300).notNullable()
        t.string('fingerprint', 64).notNullable()
        t.string('state', 10).notNullable()
        t.integer('status')
        t.text('body')
        t.string('owner', 100).notNullable()
        t.timestamp('lease_until', { useTz: true }).notNullable()
        t.timestamp('expires_at', { useTz: true }).notNullable()
        timestamps(t)
        t.unique(['user_id', 'key', 'route'])
        t.index(['expires_at'])
      })
    },
  },
  {
    // intents of file operations that must end together with rows (core/storage/journal.ts): written
    // before the file system changes, removed in the transaction that writes the rows
    name: '0006-storage-journal',
    async up(knex) {
      await knex.schema.createTable('storage_journal', (t) => {
        t.increments('id')
        t.string('kind', 100).notNullable()
        t.string('scope', 200)
        t.boolean('exclusive').notNullable().defaultTo(false)
        t.text('payload').notNullable()
        t.string('owner', 100).notNullable()
        t.timestamp('lease_until', { useTz: true }).notNullable()
        timestamps(t)
        t.index(['scope'])
        t.index(['lease_until'])
      })
    },
  },
  {
    // the transactional outbox (core/outbox.ts): catalogue events written with the change that caused
    // them, handed to notifications and webhooks by the fan-out job
    name: '0007-event-outbox',
    async up(knex) {
      await knex.schema.createTable('event_outbox', (t) => {
        t.increments('id')
        t.string('event_id', 36).notNullable().unique()
        t.string('name', 100).notNullable()
        t.string('subject_type', 50).notNullable()
        t.integer('subject_id').notNullable()
        t.integer('actor_id')
        t.text('payload').notNullable()
        t.timestamp('created_at', { useTz: true }).notNullable()
        t.timestamp('dispatched_at', { useTz: true })
        t.integer('attempts').notNullable().defaultTo(0)
        t.string('locked_by', 100)
        t.timestamp('lease_until', { useTz: true })
        t.text('error')
        t.index(['dispatched_at', 'id'])
      })
    },
  },
  {
    // The claim walks queued jobs in priority order and the sweep finds running ones whose lease
    // lapsed: both read only the runnable few, so partial indexes hold only those rows and finished
    // jobs (nearly all of the table, after a while) no longer cost an index write per state change.
    // They replace the indexes over every row that 0001 and 0003 made for the same queries.
    name: '0008-jobs-runnable-indexes',
    async up(knex) {
      await knex.raw(`create index jobs_queued_index on jobs (priority desc, id) where state = 'queued'`)
      await knex.raw(`create index jobs_running_index on jobs (lease_until) where state = 'running'`)
      await knex.raw('drop index jobs_claim_index')
      await knex.raw('drop index jobs_state_run_at_index')
      await knex.raw('drop index jobs_state_lease_until_index')
    },
  },
]
