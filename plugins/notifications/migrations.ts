import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-notifications',
    async up(knex) {
      await knex.schema.createTable('notifications', (t) => {
        t.increments('id')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        // the outbox event it came from: a repeated fan-out finds it and writes nothing
        t.string('event_id', 36).notNullable()
        t.string('kind', 100).notNullable()
        t.string('subject_type', 50).notNullable()
        t.integer('subject_id').notNullable()
        t.integer('actor_id')
        t.string('title', 500).notNullable()
        t.text('payload').notNullable()
        // false: the user takes this kind by email only (the row drives the email, the list hides it)
        t.boolean('in_app').notNullable()
        t.boolean('read').notNullable().defaultTo(false)
        t.timestamp('read_at', { useTz: true })
        // immediately | hourly | daily; null: no email
        t.string('email', 20)
        // when the email is due; cleared once it went out (the send job reads due rows by it)
        t.timestamp('email_due_at', { useTz: true })
        t.timestamp('emailed_at', { useTz: true })
        timestamps(t)
        t.unique(['user_id', 'event_id'])
        t.index(['user_id', 'in_app', 'id'])
        t.index(['user_id', 'in_app', 'read', 'id'])
        t.index(['email_due_at'])
      })
      // a user's choice per event kind
      await knex.schema.createTable('notification_settings', (t) => {
        t.increments('id')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('kind', 100).notNullable()
        t.boolean('in_app').notNullable()
        t.string('email', 20).notNullable()
        timestamps(t)
        t.unique(['user_id', 'kind'])
      })
      // the administrators' defaults per event kind
      await knex.schema.createTable('notification_defaults', (t) => {
        t.increments('id')
        t.string('kind', 100).notNullable().unique()
        t.boolean('in_app').notNullable()
        t.string('email', 20).notNullable()
        timestamps(t)
      })
    },
  },
]
