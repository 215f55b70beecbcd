/**
 * Where one search request's time goes, against a database search.ts kept (`--keep`):
 *
 *   npx tsc -p . && MAMKIT_BENCH_DATABASE_URL=postgres://… node dist/bench/search-phases.js --reuse mamkit_t_… [--repeat 30] [--only 'field:value,…']
 *
 * For each term of search.ts, as the administrator and as the reader of 10 % of the projects, it runs
 * `GET /search` (per_page 50, as the bench) `--repeat` times after two warm-up calls, recording every
 * statement the request sends (knex's `query` / `query-response` events, so a statement's time is from
 * the pool's send to its rows back, wait for a connection included) and sorting them into phases:
 * `lexeme estimate` (field:value's EXPLAIN), `fields` (custom field names), `ids` (the statements on
 * `search_documents`: the windows), `assets`, `values`, `spoken`, `projects`, `other`. It prints the
 * median per phase (a phase's statements summed per request; the two lists' ids run side by side, so
 * phases can sum past the wall time), the service call's wall time (`service`), the request's
 * (`http`, server and client in this process) and what is left of http outside the service (routing,
 * auth, JSON).
 */
import { parseArgs } from 'node:util'
import { searchTerms, seedWords, startOnKept } from './search-data.js'

const { values: args } = parseArgs({ options: { reuse: { type: 'string' }, repeat: { type: 'string', default: '30' }, only: { type: 'string' } } })

const { server: s } = await startOnKept(args.reuse)
const median = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b)
  return v.length ? v[Math.floor(v.length / 2)] : 0
}
const p99 = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b)
  return v.length ? v[Math.min(v.length - 1, Math.floor(0.99 * v.length))] : 0
}
try {
  const knex = s.runtime.db.knex
  const service = s.runtime.container.resolve<any>('search.service')
  // the reader the bench made (createUser finds it and gives it a token)
  const readerToken = (await s.createUser('bench-reader')).token
  const words = seedWords()
  const terms = searchTerms(words)
  const phaseOf = (sql: string): string => {
    if (/^explain/i.test(sql)) return 'lexeme estimate'
    if (/from "custom_metadata_fields"/i.test(sql)) return 'fields'
    if (/search_documents/.test(sql)) return 'ids'
    if (/from "assets"/i.test(sql)) return 'assets'
    if (/from "custom_metadata_values"/i.test(sql)) return 'values'
    if (/from "search_texts"/i.test(sql)) return 'spoken'
    if (/from "projects"/i.test(sql)) return 'projects'
    if (process.env.SHOW_OTHER) console.log('other:', sql.slice(0, 200))
    return 'other'
  }
  const started = new Map<string, { at: number; phase: string }>()
  let current: Map<string, number> | null = null
  let count = 0
  const onQuery = (q: { __knexQueryUid: string; sql: string }) => started.set(q.__knexQueryUid, { at: performance.now(), phase: phaseOf(q.sql) })
  const onResponse = (_: unknown, q: { __knexQueryUid: string }) => {
    const st = started.get(q.__knexQueryUid)
    if (!st || !current) return
    started.delete(q.__knexQueryUid)
    current.set(st.phase, (current.get(st.phase) ?? 0) + performance.now() - st.at)
    count++
  }
  knex.on('query', onQuery)
  knex.on('query-response', onResponse)
  // the service is timed by wrapping its search
  let serviceMs = 0
  const search = service.search.bind(service)
  service.search = async (...a: unknown[]) => {
    const t0 = performance.now()
    try {
      return await search(...a)
    } finally {
      serviceMs = performance.now() - t0
    }
  }
  const who: Array<[string, string | undefined]> = [
    ['admin', s.admin.token],
    ['reader', readerToken],
  ]
  console.log(`load ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  console.log('| term | who | http p50/p99 | service p50/p99 | http − service | statements | phases (median ms per request) |')
  console.log('|---|---|---|---|---|---|---|')
  for (const [label, term] of Object.entries(terms)) {
    if (args.only && !args.only.split(',').includes(label)) continue
    for (const [name, token] of who) {
      if (!token) continue
      const http: number[] = []
      const svc: number[] = []
      const phases = new Map<string, number[]>()
      let statements = 0
      for (let i = 0; i < Number(args.repeat) + 2; i++) {
        current = new Map()
        count = 0
        const t0 = performance.now()
        const res = await s.request('GET', '/search', { token, query: { term, per_page: '50' } })
        const ms = performance.now() - t0
        if (res.status !== 200) throw new Error(`${res.status} ${res.text}`)
        if (i < 2) continue
        http.push(ms)
        svc.push(serviceMs)
        statements = count
        for (const [phase, t] of current) phases.set(phase, [...(phases.get(phase) ?? []), t])
      }
      current = null
      const shown = [...phases].map(([phase, ts]) => `${phase} ${median(ts).toFixed(1)}`).join(', ')
      const rest = http.map((h, i) => h - svc[i])
      console.log(`| ${label} \`${term}\` | ${name} | ${median(http).toFixed(1)} / ${p99(http).toFixed(1)} | ${median(svc).toFixed(1)} / ${p99(svc).toFixed(1)} | ${median(rest).toFixed(1)} | ${statements} | ${shown} |`)
    }
  }
  knex.off('query', onQuery)
  knex.off('query-response', onResponse)
} finally {
  await s.close()
}
