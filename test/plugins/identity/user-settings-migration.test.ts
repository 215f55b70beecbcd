import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { openDatabase } from '../../../core/db/orm.js'
import { migrate } from '../../../core/db/migrator.js'
import { coreMigrations } from '../../../core/system/migrations.js'
import { migrations as identityMigrations } from '../../../plugins/identity/migrations.js'
import { databaseKinds, scratchDatabase } from '../../../core/testing/index.js'

/**
 * 0002-user-settings-user-not-null rebuilds `user_settings` on SQLite, where 0001 declared the
 * primary key apart from its column and so left the column nullable in the schema: the rebuilt table
 * declares it NOT NULL (as PostgreSQL does) and keeps the rows, the key and the foreign key.
 */
for (const db of databaseKinds()) {
  t.test(`user_settings: user_id NOT NULL, rows and keys kept [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-settings-'))
    const scratch = await scratchDatabase(db)
    const database = await openDatabase({ dataDir, databaseUrl: scratch.databaseUrl, entities: [] })
    t.teardown(async () => {
      await database.close()
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const { knex } = database
    const upTo = (count: number) => [
      { plugin: 'core', migrations: coreMigrations },
      { plugin: 'identity', migrations: identityMigrations.slice(0, count) },
    ]
    await migrate(database, upTo(1))
    const now = new Date()
    const [role] = await knex('roles').insert({ name: 'User', role_matrix: '{}', builtin: false, created_at: now, updated_at: now }).returning('id')
    const roleId = typeof role === 'object' ? role.id : role
    for (const username of ['ann', 'bob']) await knex('users').insert({ username, role_id: roleId, created_at: now, updated_at: now })
    const [ann, bob] = await knex('users').orderBy('id').select('id')
    await knex('user_settings').insert({ user_id: ann.id, settings: JSON.stringify({ theme: 'dark' }), background_file: 'ann.jpg', updated_at: now })

    const applied = await migrate(database, upTo(identityMigrations.length))
    t.ok(applied.includes('identity/0002-user-settings-user-not-null'), 'the rebuild ran')

    const rows = await knex('user_settings').select('*')
    t.equal(rows.length, 1, 'the existing row is kept')
    t.equal(Number(rows[0].user_id), Number(ann.id))
    t.same(typeof rows[0].settings === 'string' ? JSON.parse(rows[0].settings) : rows[0].settings, { theme: 'dark' })
    t.equal(rows[0].background_file, 'ann.jpg')

    const nullable =
      db === 'sqlite'
        ? (await knex.raw("select \"notnull\" = 0 as nullable from pragma_table_info('user_settings') where name = 'user_id'"))[0].nullable === 1
        : (await knex('information_schema.columns').where({ table_name: 'user_settings', column_name: 'user_id' }).first('is_nullable')).is_nullable === 'YES'
    t.equal(nullable, false, 'user_id is declared NOT NULL')
    await t.rejects(knex('user_settings').insert({ user_id: ann.id, settings: '{}', updated_at: now }), 'still one row per user')
    await knex('user_settings').insert({ user_id: bob.id, settings: '{}', updated_at: now })

    await knex('users').where({ id: ann.id }).delete()
    t.same((await knex('user_settings').select('user_id')).map((r: { user_id: number }) => Number(r.user_id)), [Number(bob.id)], 'deleting a user still deletes its settings')
  })
}
