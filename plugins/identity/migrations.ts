import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-teams-rights-settings',
    async up(knex) {
      await knex.schema.createTable('teams', (t) => {
        t.increments('id')
        t.string('name', 200).notNullable().unique()
        t.bigInteger('quota')
        t.boolean('quota_mail_sent').notNullable().defaultTo(false)
        t.bigInteger('space_used').notNullable().defaultTo(0)
        t.integer('owner_id').references('users.id').onDelete('CASCADE').unique()
        timestamps(t)
      })
      await knex.schema.createTable('team_memberships', (t) => {
        t.increments('id')
        t.integer('team_id').notNullable().references('teams.id').onDelete('CASCADE')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.timestamp('created_at', { useTz: true }).notNullable()
        t.unique(['team_id', 'user_id'])
        t.index(['user_id'])
      })
      await knex.schema.createTable('access_rights', (t) => {
        t.increments('id')
        t.integer('team_id').notNullable().references('teams.id').onDelete('CASCADE')
        t.string('object_type', 50).notNullable()
        t.integer('object_id').notNullable()
        t.boolean('read').notNullable()
        t.boolean('write').notNullable()
        timestamps(t)
        t.unique(['object_type', 'object_id', 'team_id'])
        t.index(['team_id'])
      })
      await knex.schema.createTable('user_settings', (t) => {
        t.integer('user_id').primary().references('users.id').onDelete('CASCADE')
        t.json('settings').notNullable()
        t.string('background_file', 300)
        t.timestamp('updated_at', { useTz: true }).notNullable()
      })
      await knex.schema.createTable('invitations', (t) => {
        t.increments('id')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('token_hash', 64).notNullable().unique()
        t.timestamp('expires_at', { useTz: true }).notNullable()
        t.timestamp('accepted_at', { useTz: true })
        timestamps(t)
      })
      await knex.schema.createTable('proof_keys', (t) => {
        t.increments('id')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('code_challenge', 128).notNullable().unique()
        t.timestamp('expires_at', { useTz: true }).notNullable()
        t.timestamp('used_at', { useTz: true })
        timestamps(t)
      })
    },
  },
  {
    // 0001 declared the primary key apart from the column, so SQLite's schema calls `user_id` nullable
    // (PostgreSQL makes key columns NOT NULL): rebuilt with the column NOT NULL, rows kept, for the
    // schema to say on both databases what the entity says
    name: '0002-user-settings-user-not-null',
    async up(knex, dialect) {
      if (dialect !== 'sqlite') return // PostgreSQL makes primary key columns NOT NULL
      await knex.schema.createTable('user_settings_rebuilt', (t) => {
        t.integer('user_id').notNullable().primary().references('users.id').onDelete('CASCADE')
        t.json('settings').notNullable()
        t.string('background_file', 300)
        t.timestamp('updated_at', { useTz: true }).notNullable()
      })
      await knex.raw('insert into user_settings_rebuilt (user_id, settings, background_file, updated_at) select user_id, settings, background_file, updated_at from user_settings')
      await knex.schema.dropTable('user_settings')
      await knex.schema.renameTable('user_settings_rebuilt', 'user_settings')
    },
  },
  {
    // deleting a user deletes its invitations and proof keys: without these, by reading every row
    name: '0003-user-foreign-key-indexes',
    async up(knex) {
      await knex.schema.alterTable('invitations', (t) => t.index(['user_id']))
      await knex.schema.alterTable('proof_keys', (t) => t.index(['user_id']))
    },
  },
]
