import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-webhooks',
    async up(knex) {
      await knex.schema.createTable('webhooks', (t) => {
        t.increments('id')
        t.string('url', 2000).notNullable()
        // JSON array of event names, or ["*"]
        t.text('events').notNullable()
        // the signing secret, sealed under the server key (core/crypto.ts)
        t.text('secret').notNullable()
        t.boolean('active').notNullable().defaultTo(true)
        t.integer('consecutive_failures').notNullable().defaultTo(0)
        t.string('disabled_reason', 500)
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        t.index(['created_by_id'])
      })
      await knex.schema.createTable('webhook_deliveries', (t) => {
        t.increments('id')
        t.integer('webhook_id').notNullable().references('webhooks.id').onDelete('CASCADE')
        t.string('event_id', 36).notNullable()
        // the event id for the first delivery; a manual redelivery adds its own key
        t.string('dedup_key', 80).notNullable()
        t.string('event_name', 100).notNullable()
        t.text('body').notNullable()
        // pending | succeeded | failed | cancelled
        t.string('state', 20).notNullable()
        t.integer('attempts').notNullable().defaultTo(0)
        t.integer('response_code')
        t.integer('duration_ms')
        t.text('error')
        t.timestamp('next_attempt_at', { useTz: true })
        t.timestamp('first_attempt_at', { useTz: true })
        t.timestamp('last_attempt_at', { useTz: true })
        t.integer('redelivery_of')
        t.string('locked_by', 100)
        t.timestamp('lease_until', { useTz: true })
        timestamps(t)
        t.unique(['webhook_id', 'dedup_key'])
        t.index(['webhook_id', 'id'])
        t.index(['next_attempt_at'])
      })
    },
  },
]
