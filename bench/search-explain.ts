/**
 * The SQL behind the search bench's terms, with PostgreSQL's `EXPLAIN (ANALYZE, BUFFERS)` of each
 * statement, against a database search.ts kept (`--keep`):
 *
 *   npx tsc -p . && MAMKIT_BENCH_DATABASE_URL=postgres://… node dist/bench/search-explain.js --reuse mamkit_t_… [--plans] [--repeat 5]
 *
 * For each term of search.ts, as the administrator and as the reader of 10 % of the projects, it runs
 * the search service once while recording the statements it sends, then runs each statement on
 * `search_documents` `--repeat` times under EXPLAIN ANALYZE and prints the median execution time
 * (and, with `--plans`, the last plan). The server's migrations run at start, as in the bench.
 */
import { parseArgs } from 'node:util'
import pg from 'pg'
import { searchTerms, seedWords, startOnKept } from './search-data.js'

const { values: args } = parseArgs({ options: { reuse: { type: 'string' }, plans: { type: 'boolean', default: false }, repeat: { type: 'string', default: '5' }, only: { type: 'string' } } })

const { server: s, databaseUrl } = await startOnKept(args.reuse)
const client = new pg.Client({ connectionString: databaseUrl })
await client.connect()
try {
  const knex = s.runtime.db.knex
  const service = s.runtime.container.resolve<any>('search.service')
  const reader = (await knex('users').where('username', 'bench-reader').first('id')).id
  // the same terms as search.ts (its vocabulary: the same seed)
  const words = seedWords()
  const terms = searchTerms(words)
  const seen: Array<{ sql: string; bindings: unknown[] }> = []
  const record = (q: { sql: string; bindings?: unknown[] }) => {
    if (/search_documents/.test(q.sql) && /^\s*(with|select)/i.test(q.sql)) seen.push({ sql: q.sql, bindings: q.bindings ?? [] })
  }
  knex.on('query', record)
  for (const [label, term] of Object.entries(terms)) {
    if (args.only && !args.only.split(',').includes(label)) continue
    for (const [who, principal] of [
      ['admin', { userId: s.admin.id, isAdmin: true, capabilities: new Set() }],
      ['reader', { userId: reader, isAdmin: false, capabilities: new Set() }],
    ] as const) {
      seen.length = 0
      const t0 = performance.now()
      const out = await service.search(principal, { term, per_page: 50 })
      const ms = performance.now() - t0
      console.log(`\n## ${label} \`${term}\` as ${who}: ${out.assets.length} assets, ${out.projects.length} projects, service ${ms.toFixed(1)} ms, ${seen.length} statements on search_documents`)
      for (const q of [...seen]) {
        const times: number[] = []
        let plan = ''
        for (let i = 0; i < Number(args.repeat); i++) {
          const res = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.sql}`, q.bindings as any[])
          const lines = res.rows.map((row: any) => row['QUERY PLAN'] as string)
          times.push(Number(/Execution Time: ([\d.]+)/.exec(lines.join('\n'))?.[1]))
          plan = lines.join('\n')
        }
        times.sort((a, b) => a - b)
        console.log(`- ${times[Math.floor(times.length / 2)].toFixed(1)} ms (min ${times[0].toFixed(1)}): ${q.sql.slice(0, 160).replace(/\s+/g, ' ')}…`)
        if (args.plans) console.log('```\n' + q.sql + '\n' + JSON.stringify(q.bindings) + '\n' + plan + '\n```')
      }
    }
  }
  knex.off('query', record)
} finally {
  await client.end()
  await s.close()
}
