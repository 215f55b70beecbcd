import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { MamRuntime } from '../../core/runtime.js'
import { builtinPlugins } from '../../plugins/index.js'
import { databaseKinds, scratchDatabase } from '../../core/testing/index.js'

/**
 * Entities and migrations describe each table twice; this keeps them saying the same thing. An
 * empty database migrated by every built-in plugin (a plugin added to `builtinPlugins` is checked
 * too) must be what the ORM expects from the entities: any SQL the schema generator would run is
 * drift, whether an index, a default, a length, a foreign key rule or a table without an entity.
 */
for (const db of databaseKinds()) {
  t.test(`a freshly migrated database is what the entities describe [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-drift-'))
    const scratch = await scratchDatabase(db)
    t.teardown(async () => {
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const runtime = await MamRuntime.create({
      plugins: builtinPlugins,
      config: { dataDir, logLevel: 'silent', databaseUrl: scratch.databaseUrl },
      runJobs: false,
    })
    try {
      const sql = await runtime.db.orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false })
      t.equal(sql.trim(), '', `the ORM would change the migrated schema:\n${sql}`)
    } finally {
      await runtime.close()
    }
  })
}
