/**
 * The reader's frequent word, both plans of the first window on a database search.ts kept (`--keep`):
 *
 *   npx tsc -p . && MAMKIT_BENCH_DATABASE_URL=postgres://… node dist/bench/search-walk.js --reuse mamkit_t_… [--term diga] [--repeat 9]
 *
 * As the bench's reader (10 % of the projects), it records the asset statement the service sends with the
 * readable walk off (`frequentShare` Infinity: the one statement) and on (service.ts readableWalk), checks
 * that both pages hold the same ids in the same order, then runs both statements under EXPLAIN (ANALYZE,
 * BUFFERS) alternately, `--repeat` times each, with a service call after each: medians, minima, buffers.
 */
import { parseArgs } from 'node:util'
import { loadavg } from 'node:os'
import { startOnKept } from './search-data.js'

const { values: args } = parseArgs({ options: { reuse: { type: 'string' }, term: { type: 'string', default: 'diga' }, repeat: { type: 'string', default: '9' } } })
const { server: s } = await startOnKept(args.reuse)
try {
  const knex = s.runtime.db.knex
  const service = s.runtime.container.resolve<any>('search.service')
  const reader = (await knex('users').where('username', 'bench-reader').first('id')).id
  const principal = { userId: reader, isAdmin: false, capabilities: new Set() }
  const modes = { plain: Infinity, walk: service.frequentShare as number }
  const stmts: Record<string, { sql: string; bindings: unknown[]; ids: string }> = {}
  for (const [mode, share] of Object.entries(modes)) {
    service.frequentShare = share
    let seen: { sql: string; bindings: unknown[] } | null = null
    const rec = (q: { sql: string; bindings?: unknown[] }) => {
      if (!seen && /search_documents/.test(q.sql) && /^with/i.test(q.sql) && q.bindings?.[0] === 'asset') seen = { sql: q.sql, bindings: q.bindings ?? [] }
    }
    knex.on('query', rec)
    const r = await service.search(principal, { term: args.term, per_page: 50 })
    knex.off('query', rec)
    if (!seen) throw new Error('no asset statement seen')
    stmts[mode] = { ...(seen as { sql: string; bindings: unknown[] }), ids: r.assets.map((a: any) => a.id).join(',') }
  }
  console.log(`\`${args.term}\` as the reader: the same ${stmts.plain.ids.split(',').length} ids in the same order both ways: ${stmts.plain.ids === stmts.walk.ids}; readable walk taken: ${/LATERAL/.test(stmts.walk.sql)}`)
  const times: Record<string, number[]> = { plain: [], walk: [] }
  const calls: Record<string, number[]> = { plain: [], walk: [] }
  const buffers: Record<string, string> = {}
  for (let i = 0; i < Number(args.repeat); i++)
    for (const [mode, share] of Object.entries(modes)) {
      const res = await knex.raw(`EXPLAIN (ANALYZE, BUFFERS) ${stmts[mode].sql.replace(/\$\d+/g, '?')}`, stmts[mode].bindings as any[])
      const plan = res.rows.map((x: any) => x['QUERY PLAN']).join('\n')
      times[mode].push(Number(/Execution Time: ([\d.]+)/.exec(plan)?.[1]))
      buffers[mode] = /Buffers: shared hit=(\d+)/.exec(plan)?.[1] ?? '?'
      service.frequentShare = share
      const t0 = performance.now()
      await service.search(principal, { term: args.term, per_page: 50 })
      calls[mode].push(performance.now() - t0)
    }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  for (const mode of Object.keys(modes))
    console.log(`${mode}: EXPLAIN median ${med(times[mode]).toFixed(1)} ms (min ${Math.min(...times[mode]).toFixed(1)}), buffers ${buffers[mode]}; service median ${med(calls[mode]).toFixed(1)} ms (min ${Math.min(...calls[mode]).toFixed(1)})`)
  console.log(`load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
} finally {
  await s.close()
}
