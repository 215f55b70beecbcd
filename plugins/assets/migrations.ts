import { timestamps, type Migration } from '../../core/index.js'

export const migrations: Migration[] = [
  {
    name: '0001-assets',
    async up(knex) {
      await knex.schema.createTable('assets', (t) => {
        t.increments('id')
        t.string('uuid', 36).notNullable().unique()
        t.integer('project_id').notNullable().references('projects.id').onDelete('CASCADE')
        t.text('path').notNullable()
        t.text('folder').notNullable()
        t.text('name').notNullable()
        t.string('type', 10).notNullable()
        t.bigInteger('size').notNullable().defaultTo(0)
        t.timestamp('mtime', { useTz: true })
        t.bigInteger('inode')
        t.bigInteger('device')
        t.boolean('online').notNullable().defaultTo(true)
        t.string('analysis_state', 12).notNullable()
        t.string('proxy_state', 12).notNullable()
        t.json('metadata').notNullable()
        t.double('duration')
        t.text('description')
        t.string('crc32', 8)
        t.string('sha256', 64)
        t.timestamp('hashed_at', { useTz: true })
        t.text('proxy_key_enc')
        t.integer('proxy_version').notNullable().defaultTo(0)
        t.json('proxies').notNullable()
        t.text('proxy_error')
        t.text('analysis_error')
        t.timestamp('metadata_changed_at', { useTz: true })
        timestamps(t)
        // listing a folder of a project in name order is the hot read (GET /projects/:id/assets)
        t.index(['project_id', 'folder', 'name'])
        t.index(['sha256'])
        t.index(['inode', 'device'])
      })
      // a path is one asset per project; text columns need an explicit unique index
      await knex.schema.alterTable('assets', (t) => t.unique(['project_id', 'path']))
    },
  },
  {
    name: '0002-asset-states',
    async up(knex) {
      await knex.schema.createTable('asset_states', (t) => {
        t.increments('id')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.integer('user_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('kind', 20).notNullable()
        t.integer('job_id')
        t.string('file', 255)
        t.double('size')
        t.timestamp('expires_at', { useTz: true })
        t.boolean('purged').notNullable().defaultTo(false)
        timestamps(t)
        t.index(['expires_at'])
      })
    },
  },
  {
    // packages are no longer copied into <dataDir>/downloads (`file`, `purged` stay unused): a highres
    // zip is laid out at download time from the original and the CRC-32 recorded here
    name: '0003-asset-state-source',
    async up(knex) {
      await knex.schema.alterTable('asset_states', (t) => {
        t.string('crc32', 8)
        t.bigInteger('source_size')
        t.timestamp('source_mtime', { useTz: true })
      })
    },
  },
  {
    name: '0004-asset-shares',
    async up(knex) {
      await knex.schema.createTable('asset_shares', (t) => {
        t.increments('id')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.integer('shared_by_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('email', 254).notNullable()
        t.text('message')
        // SHA-256 hex of the link's token; the token itself is only in the mail
        t.string('token_hash', 64).notNullable().unique()
        t.timestamp('expires_at', { useTz: true }).notNullable()
        t.timestamp('revoked_at', { useTz: true })
        t.integer('access_count').notNullable().defaultTo(0)
        t.timestamp('last_accessed_at', { useTz: true })
        timestamps(t)
        // GET /assets/:id/shares lists by asset, newest first
        t.index(['asset_id', 'created_at'])
      })
    },
  },
  {
    // deleting an asset or a user deletes its prepared downloads and shares: without these, by
    // reading every row (a project purge deletes thousands of assets)
    name: '0005-foreign-key-indexes',
    async up(knex) {
      await knex.schema.alterTable('asset_states', (t) => {
        t.index(['asset_id'])
        t.index(['user_id'])
      })
      await knex.schema.alterTable('asset_shares', (t) => t.index(['shared_by_id']))
    },
  },
  {
    // proxy_state `none` is final: assets that will never get a proxy no longer stay `pending` (data only)
    name: '0006-proxy-state-none',
    async up(knex) {
      await knex('assets').where({ proxy_state: 'pending', analysis_state: 'ready', type: 'other' }).update({ proxy_state: 'none', proxy_error: 'not audio, video or a still image: no proxy is made' })
      await knex('assets').where({ proxy_state: 'pending', analysis_state: 'failed' }).update({ proxy_state: 'none', proxy_error: 'the analysis failed' })
    },
  },
]
