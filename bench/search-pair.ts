/**
 * Two builds' search statements, paired on one database search.ts kept (`--keep`). Each build records the
 * statements its service sends on `search_documents` for the bench's terms, as the administrator and as the
 * reader of 10 % of the projects; then one run replays both recordings alternately under EXPLAIN ANALYZE:
 *
 *   node <main's dist>/bench/search-pair.js --reuse mamkit_t_… --record /tmp/main.json
 *   node dist/bench/search-pair.js --reuse mamkit_t_… --record /tmp/branch.json
 *   node dist/bench/search-pair.js --reuse mamkit_t_… --compare /tmp/main.json,/tmp/branch.json [--repeat 11] [--only 'field:value']
 *
 * For each term and user it prints the sum over the request's statements of their EXPLAIN ANALYZE execution
 * times, median and minimum of `--repeat` alternating rounds, each build's buffers, and whether both builds'
 * pages held the same ids in the same order (recorded with the service's answer).
 */
import { readFile, writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { searchTerms, seedWords, startOnKept } from './search-data.js'

interface Recorded {
  key: string
  ids: string
  statements: Array<{ sql: string; bindings: unknown[] }>
}

const { values: args } = parseArgs({ options: { reuse: { type: 'string' }, record: { type: 'string' }, compare: { type: 'string' }, repeat: { type: 'string', default: '11' }, only: { type: 'string' } } })
if (!args.record === !args.compare) throw new Error('give --record <file> or --compare <a.json>,<b.json>')
const { server: s } = await startOnKept(args.reuse)
try {
  const knex = s.runtime.db.knex
  if (args.record) {
    const service = s.runtime.container.resolve<any>('search.service')
    const reader = (await knex('users').where('username', 'bench-reader').first('id')).id
    const out: Recorded[] = []
    let seen: Recorded['statements'] = []
    const record = (q: { sql: string; bindings?: unknown[] }) => {
      if (/search_documents/.test(q.sql) && /^\s*(with|select)/i.test(q.sql) && !/^\s*explain/i.test(q.sql)) seen.push({ sql: q.sql, bindings: q.bindings ?? [] })
    }
    knex.on('query', record)
    for (const [label, term] of Object.entries(searchTerms(seedWords())))
      for (const [who, principal] of [
        ['admin', { userId: s.admin.id, isAdmin: true, capabilities: new Set() }],
        ['reader', { userId: reader, isAdmin: false, capabilities: new Set() }],
      ] as const) {
        // a first call fills the service's estimates (EXPLAIN, kept a minute), the second is recorded
        await service.search(principal, { term, per_page: 50 })
        const statements: Recorded['statements'] = (seen = [])
        const r = await service.search(principal, { term, per_page: 50 })
        seen = []
        out.push({ key: `${label} \`${term}\` ${who}`, ids: r.assets.map((a: any) => a.id).join(','), statements })
      }
    knex.off('query', record)
    await writeFile(args.record, JSON.stringify(out))
  } else {
    const [a, b] = await Promise.all(args.compare!.split(',').map(async (f) => JSON.parse(await readFile(f, 'utf8')) as Recorded[]))
    const explain = async (st: Recorded['statements'][number]) => {
      const res = await knex.raw(`EXPLAIN (ANALYZE, BUFFERS) ${st.sql.replace(/\$\d+/g, '?')}`, st.bindings as any[])
      const plan = res.rows.map((x: any) => x['QUERY PLAN']).join('\n')
      return { ms: Number(/Execution Time: ([\d.]+)/.exec(plan)?.[1]), buffers: Number(/Buffers: shared hit=(\d+)/.exec(plan)?.[1] ?? 0) }
    }
    const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
    console.log(`| term, user | A median (min) | B median (min) | buffers A → B | same page |\n|---|---|---|---|---|`)
    for (const ra of a) {
      const rb = b.find((r) => r.key === ra.key)
      if (!rb || (args.only && !args.only.split(',').some((o) => ra.key.startsWith(o)))) continue
      const times: [number[], number[]] = [[], []]
      const buffers = [0, 0]
      for (let i = 0; i < Number(args.repeat); i++)
        for (const [n, r] of [ra, rb].entries()) {
          let ms = 0
          buffers[n] = 0
          for (const st of r.statements) {
            const e = await explain(st)
            ms += e.ms
            buffers[n] += e.buffers
          }
          times[n].push(ms)
        }
      const cell = (xs: number[]) => `${med(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}) ms`
      console.log(`| ${ra.key} | ${cell(times[0])} | ${cell(times[1])} | ${buffers[0]} → ${buffers[1]} | ${ra.ids === rb.ids} |`)
    }
    console.log(`load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  }
} finally {
  await s.close()
}
