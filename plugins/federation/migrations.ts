import { timestamps, type Migration } from '../../core/index.js'

export const TABLES = {
  state: 'federation_crdt_state',
  seq: 'federation_seq',
  site: 'federation_site',
  peers: 'federation_peers',
  invites: 'federation_invites',
  transports: 'federation_transports',
} as const

export const migrations: Migration[] = [
  {
    name: '0001-federation',
    async up(knex) {
      // one row per replicated record (FEDERATION.md §4); `state` is the RFC 8785 text (PostgreSQL jsonb would re-order it)
      await knex.schema.createTable(TABLES.state, (t) => {
        t.increments('id')
        t.string('uuid', 36).notNullable().unique()
        t.string('type', 40).notNullable()
        t.string('origin_site', 36).notNullable()
        t.string('owner_site', 36).notNullable()
        t.text('state').notNullable()
        // 16 hex characters: the SQLite driver reads 64-bit integers as doubles, so the 8 bytes are kept as text
        t.string('checksum', 16).notNullable()
        t.integer('bucket').notNullable()
        t.bigInteger('local_seq').notNullable()
        t.boolean('deleted').notNullable().defaultTo(false)
        t.integer('schema_v').notNullable().defaultTo(1)
        // local only, never shipped: the row this record is materialised into, and the values last
        // read from or written to it (a local edit is the difference from them)
        t.integer('local_id')
        t.text('local_values')
        t.index(['bucket', 'uuid', 'checksum'])
        t.index(['local_seq'])
        t.index(['type', 'deleted'])
        t.index(['type', 'local_id'])
      })
      // commit-ordered change counter (§5.1): taken at the end of each transaction under the row lock
      await knex.schema.createTable(TABLES.seq, (t) => {
        t.increments('id')
        t.bigInteger('n').notNullable()
      })
      await knex(TABLES.seq).insert({ n: 0 })
      // this site's identity; the private key sealed with the server key (SECURITY.md)
      await knex.schema.createTable(TABLES.site, (t) => {
        t.increments('id')
        t.string('site_uuid', 36).notNullable().unique()
        t.string('federation_uuid', 36)
        t.string('name', 200).notNullable()
        t.string('base_url', 500)
        t.integer('incarnation').notNullable().defaultTo(1)
        t.text('public_key').notNullable()
        t.text('private_key_sealed').notNullable()
        timestamps(t)
      })
      // the other sites: the materialised site records plus this site's view of the link
      await knex.schema.createTable(TABLES.peers, (t) => {
        t.increments('id')
        t.string('site_uuid', 36).notNullable().unique()
        t.string('name', 200).notNullable()
        t.string('base_url', 500)
        t.text('public_key').notNullable()
        t.string('replica', 20)
        t.string('status', 20).notNullable()
        t.boolean('pull_only').notNullable().defaultTo(false)
        t.string('introduced_by', 36)
        t.bigInteger('sent_acked_seq').notNullable().defaultTo(0)
        t.bigInteger('recv_seq').notNullable().defaultTo(0)
        t.string('last_root', 16)
        t.integer('clock_offset_ms')
        t.timestamp('last_ok_at', { useTz: true })
        t.text('last_error')
        timestamps(t)
      })
      // single-use invites; the secret sealed (it keys the joiner's proof)
      await knex.schema.createTable(TABLES.invites, (t) => {
        t.increments('id')
        t.string('token_id', 32).notNullable().unique()
        t.text('secret_sealed').notNullable()
        t.string('name', 200).notNullable()
        t.string('base_url', 500)
        t.integer('created_by_id').references('users.id').onDelete('SET NULL').index()
        t.timestamp('expires_at', { useTz: true }).notNullable()
        t.timestamp('used_at', { useTz: true })
        t.string('joiner_site', 36)
        t.string('nonce', 64)
        timestamps(t)
      })
      // receive records of transports (§6.7), idempotent on (from_site, content_sha256)
      await knex.schema.createTable(TABLES.transports, (t) => {
        t.increments('id')
        t.string('uuid', 36).notNullable().unique()
        t.string('from_site', 36).notNullable()
        t.string('kind', 20).notNullable()
        t.string('subject', 36)
        t.string('content_sha256', 64).notNullable()
        t.text('manifest').notNullable()
        t.string('status', 20).notNullable()
        t.text('error')
        t.timestamp('applied_at', { useTz: true })
        timestamps(t)
        t.unique(['from_site', 'content_sha256'])
      })
    },
  },
]
