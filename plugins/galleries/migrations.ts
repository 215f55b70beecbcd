import { timestamps, type Migration } from '../../core/index.js'
export const migrations: Migration[] = [
  {
    name: '0001-galleries',
    async up(knex) {
      await knex.schema.createTable('gallery_style_presets', (t) => {
        t.increments('id')
        t.string('name', 255).notNullable().unique()
        // colours, font, watermark text/position/opacity: one JSON document, validated by the route schema
        t.text('style').notNullable()
        // stored image variants by kind (`logo`, `background`) → { original, variants }; files under <dataDir>/gallery-presets/<id>
        t.text('images').notNullable()
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
      })
      await knex.schema.createTable('galleries', (t) => {
        t.increments('id')
        t.string('uuid', 36).notNullable().unique()
        t.string('name', 255).notNullable().unique()
        t.text('description')
        // a preset in use cannot be deleted (409): RESTRICT backs the service's check against races
        t.integer('gallery_style_preset_id').references('gallery_style_presets.id').onDelete('RESTRICT')
        // the hidden project that holds files uploaded straight into the gallery (created on first upload)
        t.integer('uploads_project_id').references('projects.id').onDelete('SET NULL')
        t.integer('created_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        t.index(['gallery_style_preset_id'])
      })
      // virtual folders: rows, never directories; the root ('') is implicit
      await knex.schema.createTable('gallery_folders', (t) => {
        t.increments('id')
        t.integer('gallery_id').notNullable().references('galleries.id').onDelete('CASCADE')
        t.string('path', 1024).notNullable()
        timestamps(t)
        t.unique(['gallery_id', 'path'])
      })
      await knex.schema.createTable('gallery_entries', (t) => {
        t.increments('id')
        t.integer('gallery_id').notNullable().references('galleries.id').onDelete('CASCADE')
        // removing the asset from its project removes it from every gallery
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.string('folder', 1024).notNullable()
        t.string('name', 255).notNullable()
        t.boolean('uploaded').notNullable().defaultTo(false)
        t.string('label', 255)
        t.string('color', 20)
        t.integer('rating')
        t.boolean('selected').notNullable().defaultTo(false)
        t.text('client_note')
        t.integer('added_by_id').references('users.id').onDelete('SET NULL')
        timestamps(t)
        t.unique(['gallery_id', 'asset_id'])
        // the listing of a folder in name order, and names unique within a folder
        t.unique(['gallery_id', 'folder', 'name'])
        t.index(['asset_id'])
      })
      await knex.schema.createTable('gallery_shares', (t) => {
        t.increments('id')
        t.integer('gallery_id').notNullable().references('galleries.id').onDelete('CASCADE')
        t.integer('shared_by_id').notNullable().references('users.id').onDelete('CASCADE')
        t.string('email', 254).notNullable()
        t.text('message')
        // only the SHA-256 of the link's token: a copy of the database opens no link
        t.string('token_hash', 64).notNullable().unique()
        t.string('purpose', 20).notNullable() // `share` or `review`
        t.boolean('allow_download').notNullable().defaultTo(false)
        t.boolean('allow_approval').notNullable().defaultTo(false)
        t.timestamp('expires_at', { useTz: true }).notNullable()
        t.timestamp('revoked_at', { useTz: true })
        t.integer('access_count').notNullable().defaultTo(0)
        t.timestamp('last_accessed_at', { useTz: true })
        timestamps(t)
        t.index(['gallery_id'])
        t.index(['shared_by_id', 'created_at'])
      })
      await knex.schema.createTable('review_requests', (t) => {
        t.increments('id')
        t.integer('gallery_id').notNullable().references('galleries.id').onDelete('CASCADE')
        t.integer('requested_by_id').references('users.id').onDelete('SET NULL')
        t.string('rule', 3).notNullable() // `all` or `any`
        t.text('comment')
        // open → completed (every covered asset decided) | cancelled (DELETE) | forced (force-approve)
        t.string('state', 12).notNullable()
        t.integer('closed_by_id').references('users.id').onDelete('SET NULL')
        t.timestamp('closed_at', { useTz: true })
        timestamps(t)
        t.index(['gallery_id', 'state'])
      })
      // what a request covers: single assets, or gallery folders (every asset in them, also ones added later)
      await knex.schema.createTable('review_request_items', (t) => {
        t.increments('id')
        t.integer('request_id').notNullable().references('review_requests.id').onDelete('CASCADE')
        t.integer('asset_id').references('assets.id').onDelete('CASCADE')
        t.string('folder', 1024)
        t.index(['request_id'])
        t.index(['asset_id'])
      })
      await knex.schema.createTable('review_approvers', (t) => {
        t.increments('id')
        t.integer('request_id').notNullable().references('review_requests.id').onDelete('CASCADE')
        t.integer('user_id').references('users.id').onDelete('CASCADE')
        t.string('email', 254)
        t.integer('share_id').references('gallery_shares.id').onDelete('SET NULL')
        timestamps(t)
        t.unique(['request_id', 'user_id'])
        t.unique(['request_id', 'email'])
      })
      // one row per approver and asset once the approver decided; no row means pending
      await knex.schema.createTable('review_statuses', (t) => {
        t.increments('id')
        t.integer('request_id').notNullable().references('review_requests.id').onDelete('CASCADE')
        t.integer('approver_id').notNullable().references('review_approvers.id').onDelete('CASCADE')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.string('status', 16).notNullable()
        t.text('comment')
        timestamps(t)
        t.unique(['approver_id', 'asset_id'])
        t.index(['request_id', 'asset_id'])
      })
      // every change, kept: requests, decisions, cancellations and force-approvals with who did them
      await knex.schema.createTable('review_history', (t) => {
        t.increments('id')
        t.integer('gallery_id').notNullable().references('galleries.id').onDelete('CASCADE')
        t.integer('request_id').references('review_requests.id').onDelete('SET NULL')
        t.integer('asset_id').references('assets.id').onDelete('SET NULL')
        t.string('action', 20).notNullable()
        t.string('status', 16)
        t.text('comment')
        t.integer('actor_user_id').references('users.id').onDelete('SET NULL')
        t.string('actor_email', 254)
        t.timestamp('created_at', { useTz: true }).notNullable()
        t.index(['gallery_id', 'asset_id'])
      })
    },
  },
  {
    name: '0002-gallery-watermarks',
    async up(knex) {
      // watermarked proxies for guests: one cached file per gallery, asset, proxy kind and burnt-in text
      await knex.schema.createTable('gallery_watermarks', (t) => {
        t.increments('id')
        t.integer('gallery_id').notNullable().references('galleries.id').onDelete('CASCADE')
        t.integer('asset_id').notNullable().references('assets.id').onDelete('CASCADE')
        t.string('kind', 20).notNullable()
        // SHA-256 of the rendering (text, position, opacity): the cache key beside gallery, asset and kind
        t.string('text_hash', 64).notNullable()
        // { text, position, opacity } as burnt in, for the job
        t.text('spec').notNullable()
        // the plain proxy it was made from (file name, size, mtime): a re-encoded asset makes it stale
        t.string('source', 300).notNullable()
        // new → pending (a job builds it) → ready | failed
        t.string('state', 12).notNullable()
        // bumped on every claim: a job finishing an older build never overwrites a newer one
        t.integer('build').notNullable().defaultTo(0)
        t.integer('job_id')
        // the encrypted file's name in the asset's proxy folder
        t.string('file', 255)
        t.text('error')
        timestamps(t)
        t.unique(['gallery_id', 'asset_id', 'kind', 'text_hash'])
        t.index(['asset_id'])
      })
    },
  },
]
