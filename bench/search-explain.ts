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
import { mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { startTestServer } from '../test/helpers/index.js'

const { values: args } = parseArgs({ options: { reuse: { type: 'string' }, plans: { type: 'boolean', default: false }, repeat: { type: 'string', default: '5' }, only: { type: 'string' } } })
const SERVER_URL = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
if (!SERVER_URL || !args.reuse) throw new Error('needs MAMKIT_BENCH_DATABASE_URL and --reuse <database kept by search.js --keep>')
const url = new URL(SERVER_URL)
url.pathname = `/${args.reuse}`

// the data dir search.js --keep kept beside the database (its secret key seals rows of the database)
const dataDir = path.join(tmpdir(), `mamkit-bench-${args.reuse}`)
await mkdir(dataDir, { recursive: true })
const s = await startTestServer({ db: 'postgresql', databaseUrl: url.toString(), dataDir })
const client = new pg.Client({ connectionString: url.toString() })
await client.connect()
try {
  const knex = s.runtime.db.knex
  const service = s.runtime.container.resolve<any>('search.service')
  const reader = (await knex('users').where('username', 'bench-reader').first('id')).id
  // the same terms as search.ts (its vocabulary: the same seed)
  const SYLLABLES = ['ka', 'ri', 'mo', 'te', 'lu', 'san', 'vor', 'pel', 'di', 'xen', 'qua', 'bo', 'ner', 'fi', 'gal', 'tor']
  let x = 42
  const r = () => ((x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff)
  const set = new Set<string>()
  while (set.size < 2000) set.add(Array.from({ length: 2 + Math.floor(r() * 3) }, () => SYLLABLES[Math.floor(r() * SYLLABLES.length)]).join(''))
  const words = [...set]
  const terms: Record<string, string> = { 'frequent prefix': words[0].slice(0, 4), 'rare word': words[1900], phrase: `"${words[0]} ${words[1]}"`, 'field:value': `client:client ${words[5]}`, 'word + property': `${words[3]} reel_name:A01` }
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
