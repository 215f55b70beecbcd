import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { Knex } from '../../../core/index.js'
import { databaseKinds, startTestServer, type TestServer } from '../../helpers/index.js'
import { createProject } from '../projects/fixtures.js'

/**
 * PostgreSQL's lexicon of the words' index (plugins/search/migrations.ts, 0008 PG_LEXICON): `search_lexemes`
 * has no unique key on purpose, so two transactions that add the same brand-new word never wait on each
 * other; the word is then there twice, and the lookup's DISTINCT folds it.
 */

/** an asset inserted as the server's writers do: the triggers on `assets` write its search document, and the document's statement its lexemes */
async function asset(db: Knex, projectId: number, path: string): Promise<number> {
  const now = new Date()
  const [row] = await db('assets')
    .insert({ uuid: randomUUID(), project_id: projectId, path, folder: path.slice(0, path.lastIndexOf('/')), name: path.split('/').pop()!, type: 'video', analysis_state: 'done', proxy_state: 'none', metadata: '{}', proxies: '[]', created_at: now, updated_at: now })
    .returning('id')
  return Number((row as any)?.id ?? row)
}

/** `promise`, or a rejection after `ms`: a statement that waits on another transaction fails the test instead of hanging it */
function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)))
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

const name = 'search: two transactions add the same new word to the lexicon without waiting on each other; both found once, a rolled-back word not at all'

for (const db of ['sqlite', 'postgresql'] as const) {
  const skip =
    db === 'sqlite'
      ? 'PostgreSQL only: SQLite has no lexicon (search_lexemes is 0008 on PostgreSQL; FTS5 looks prefixes up itself) and one writer at a time, so two transactions cannot write at once'
      : !databaseKinds().includes('postgresql')
        ? 'PostgreSQL only: set MAMKIT_TEST_DATABASE_URL'
        : false
  t.test(`${name} [${db}]`, { skip }, async (t) => {
    const s: TestServer = await startTestServer({ db })
    t.teardown(() => s.close())
    const knex = s.runtime.db.knex
    const project = await createProject(s, s.user, { name: 'Lexicon races' })
    // through the word index, where a prefix is searched as the lexicon's exact lexemes (as search.test.ts's prefix test:
    // this small database would otherwise test each document, and no word is frequent in a table never analyzed)
    const service = s.runtime.container.resolve<any>('search.service')
    ;[service.fewDocuments, service.frequentShare] = [0, Infinity]
    const bindings: unknown[] = []
    const spy = (q: { sql: string; bindings?: unknown[] }) => void (/search_documents/.test(q.sql) && bindings.push(...(q.bindings ?? [])))
    knex.on('query', spy)
    t.teardown(() => void knex.off('query', spy))
    const find = async (term: string) => {
      bindings.length = 0
      const r = await s.request('GET', '/search', { token: s.user.token, query: { term, per_page: '200' } })
      t.equal(r.status, 200, `GET /search?term=${term}`, { body: r.text })
      return (r.body.assets as Array<{ id: number }>).map((a) => a.id).sort((a, b) => a - b)
    }
    const word = 'vorquendil'
    const rolledBack = 'vorquendilzap'
    const count = async (lexeme: string, conn: Knex = knex) => Number((await conn('search_lexemes').where({ lexeme }).count({ n: '*' }))[0].n)
    t.equal(await count(word), 0, 'a word no document had')

    const first = await knex.transaction()
    const second = await knex.transaction()
    try {
      const a = await asset(first, project.id, `races/${word}_a.mov`)
      t.same([await count(word, first), await count(word)], [1, 0], 'the first transaction has added the word, not committed')
      // a wait on the first transaction's lexeme would end here, as an error (lock_timeout) or the guard's rejection
      await second.raw(`SET LOCAL lock_timeout = '10s'`)
      const b = await within(5000, asset(second, project.id, `races/${word}_b.mov`), 'the second transaction\'s insert')
      t.notOk(first.isCompleted(), 'the second transaction wrote the same new word while the first is open, without waiting')
      await within(5000, second.commit(), 'the second transaction\'s commit')
      t.notOk(first.isCompleted(), 'and committed it while the first is still open')
      t.equal(await count(word), 1, 'the word in the lexicon once: the second transaction\'s')
      t.same(await find(word.slice(0, 6)), [b], 'the second asset found by the prefix, the first not committed yet')
      await first.commit()
      const n = await count(word)
      t.ok(n === 1 || n === 2, `the word in the lexicon once or twice (${n})`)

      t.same(await find(word.slice(0, 6)), [a, b].sort((x, y) => x - y), 'both assets found by the prefix, each once')
      t.ok(bindings.some((b) => String(b).includes(`'${word}'`)), `the prefix searched as the lexicon's exact lexeme ${word}`)
      t.same(await find(word), [a, b].sort((x, y) => x - y), 'and by the whole word')

      // a third transaction writes the word and a new one, then rolls back: neither its asset nor its new word is found
      const third = await knex.transaction()
      await asset(third, project.id, `races/${word} ${rolledBack}.mov`)
      await third.rollback()
      t.equal(await count(rolledBack), 0, 'the rolled-back word is not in the lexicon')
      t.same(await find(rolledBack), [], 'the rolled-back word finds no document')
      t.same(await find(`${word}z`), [], 'nor does its prefix')
      t.same(await find(word.slice(0, 6)), [a, b].sort((x, y) => x - y), 'the shared prefix still finds the two committed assets, each once')
    } finally {
      // the first before the second: a second still waiting on the first goes on once the first is gone
      for (const trx of [first, second]) if (!trx.isCompleted()) await trx.rollback().catch(() => {})
    }
  })
}
