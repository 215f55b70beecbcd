/**
 * Search and custom metadata benchmark.
 *
 *   npx tsc -p . && node dist/bench/search.js [--assets 100000] [--requests 200] [--only sqlite,postgresql]
 *     [--keep] [--reuse <database>] [--search-only]
 *
 * Seeding a million assets takes minutes, so PostgreSQL's seeded database can be kept and reused:
 *   --keep            leave the scratch PostgreSQL database in place after the run and print its name; its
 *                     data dir (the server's secret key, which seals rows of the database) is kept as
 *                     `$TMPDIR/mamkit-bench-<name>`
 *   --reuse <name>    run against that kept database (on the server of MAMKIT_BENCH_DATABASE_URL /
 *                     MAMKIT_TEST_DATABASE_URL) and its data dir without seeding: PostgreSQL only;
 *                     `--assets` is ignored (the database holds what its seeding run made)
 *   --search-only     time the searches only (no LIKE ceiling, bulk update or generator, which write)
 * e.g. seed once: `node dist/bench/search.js --assets 1000000 --only postgresql --keep --search-only`,
 * then `node dist/bench/search.js --only postgresql --reuse mamkit_t_… --search-only` per change.
 *
 * For each database (SQLite, and PostgreSQL when MAMKIT_BENCH_DATABASE_URL or MAMKIT_TEST_DATABASE_URL
 * names a server) a mamkit server runs in this process on a fresh data dir and database (the test
 * helpers' server; the HTTP client shares the process, so HTTP figures include its cost). It makes
 * 100 projects, a reader with read access to 10 of them, `--assets` asset rows spread over the
 * projects (names from a 2,000-word vocabulary, technical properties, a custom `client` value on a
 * third of them; every row goes through the index triggers), then times:
 *
 *   search           GET /search?term=… (a frequent word prefix, a rare word, a phrase, field:value)
 *                    as the administrator and as the reader (access filter in the statement)
 *   like             the ceiling for a name lookup: `lower(name) LIKE 'prefix%'` on an index made for it
 *   bulk             POST /assets/bulk_update_custom_metadata on 10,000 assets (a job), until it finished and
 *                    until the search index has the new values (PostgreSQL: the sweeper, after the commit)
 *   generator        50 concurrent POST /custom_metadata taking generator values: values/s
 *
 * Figures: p50/p99 per kind and the ratio of search to the LIKE lookup, within one run.
 */
import { randomUUID } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { keptDataDir, rng, searchTerms, vocabulary } from './search-data.js'
import { databaseKinds, scratchDatabase, startTestServer, type DbKind, type TestServer } from '../test/helpers/index.js'

const { values: args } = parseArgs({
  options: {
    assets: { type: 'string', default: '100000' },
    requests: { type: 'string', default: '200' },
    only: { type: 'string' },
    keep: { type: 'boolean', default: false },
    reuse: { type: 'string' },
    'search-only': { type: 'boolean', default: false },
  },
})
let ASSETS = Number(args.assets)
const REQUESTS = Number(args.requests)
const SERVER_URL = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}
const fmt = (ms: number) => `${ms.toFixed(ms < 10 ? 2 : 1)} ms`


async function time(n: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await fn(i)
    out.push(performance.now() - t0)
  }
  return out
}

/** the data dir kept beside a kept database (its secret key seals rows in the database) */

/** PostgreSQL's database for this run: a kept one (--reuse), or a scratch one dropped at the end unless --keep */
async function database(db: DbKind): Promise<{ databaseUrl?: string; dataDir?: string; drop(): Promise<void> }> {
  if (db === 'sqlite') return { databaseUrl: undefined, drop: async () => {} }
  if (args.reuse) {
    const url = new URL(SERVER_URL!)
    url.pathname = `/${args.reuse}`
    return { databaseUrl: url.toString(), dataDir: keptDataDir(args.reuse), drop: async () => {} }
  }
  const scratch = await scratchDatabase(db, SERVER_URL)
  if (!args.keep) return scratch
  const name = new URL(scratch.databaseUrl!).pathname.slice(1)
  await mkdir(keptDataDir(name), { recursive: true })
  return { databaseUrl: scratch.databaseUrl, dataDir: keptDataDir(name), drop: async () => console.log(`[${db}] kept database ${name} and data dir ${keptDataDir(name)} (--reuse ${name})`) }
}

async function run(db: DbKind) {
  const scratch = await database(db)
  const s: TestServer = await startTestServer({ db, runJobs: true, databaseUrl: scratch.databaseUrl, dataDir: scratch.dataDir })
  const knex = s.runtime.db.knex
  const reuse = db === 'postgresql' && args.reuse !== undefined
  // a kept-alive socket the server closed during a pause (index builds, ANALYZE) resets once: ask again
  const ask: TestServer['request'] = (method, path, options) => s.request(method, path, options).catch(() => s.request(method, path, options))
  try {
    const r = rng(42)
    const words = vocabulary(2000, r)
    const reader = await s.createUser('bench-reader')
    let setId: number
    let assetIds: number[]
    if (reuse) {
      // a kept database (--reuse): what its seeding run made
      setId = Number((await knex('custom_metadata_sets').where('name', 'Bench').first('id')).id)
      assetIds = (await knex('assets').orderBy('id').select('id')).map((x: any) => Number(x.id))
      ASSETS = assetIds.length
      console.log(`[${db}] reusing ${args.reuse}: ${ASSETS} assets`)
    } else {
      // 100 projects (rows written directly: the bench is about search), 10 readable by the reader
      const now = new Date()
      const projectIds: number[] = []
      for (let i = 0; i < 100; i++) {
        const [row] = await knex('projects')
          .insert({ uuid: randomUUID(), name: `Project ${i} ${words[i]}`, storage: 'default', folder: `p${i}`, is_library_project: false, encoding_priority: 0, custom_metadata: '{}', size: 0, deleted: false, created_at: now, updated_at: now })
          .returning('id')
        projectIds.push(Number((row as any)?.id ?? row))
      }
      const [team] = await knex('teams').insert({ name: 'bench readers', quota: null, quota_mail_sent: false, space_used: 0, created_at: now, updated_at: now }).returning('id')
      const teamId = Number((team as any)?.id ?? team)
      await knex('team_memberships').insert({ team_id: teamId, user_id: reader.id, created_at: now })
      for (const id of projectIds.slice(0, 10)) await knex('access_rights').insert({ team_id: teamId, object_type: 'project', object_id: id, read: true, write: false, created_at: now, updated_at: now })
      const set = await ask('POST', '/custom_metadata_sets', { token: s.admin.token, json: { name: 'Bench', applies_to: 'both' } })
      const client = await ask('POST', '/custom_metadata_fields', { token: s.admin.token, json: { name: 'client', type: 'text', custom_metadata_set_id: set.body.custommetadataset.id } })
      setId = set.body.custommetadataset.id
      const clientId = client.body.custommetadatafield.id

      const t0 = performance.now()
      const codecs = ['prores', 'h264', 'dnxhd', 'hevc']
      for (let i = 0; i < ASSETS; i += 1000) {
        const rows: Array<Record<string, unknown>> = []
        for (let j = i; j < Math.min(ASSETS, i + 1000); j++) {
          const w = () => words[Math.floor(Math.pow(r(), 2) * words.length)] // skewed: low ranks are frequent
          const name = `${w()}_${w()}_${String(j).padStart(6, '0')}.mov`
          const folder = `${w()}/${w()}`
          rows.push({
            uuid: randomUUID(),
            project_id: projectIds[j % 100],
            path: `${folder}/${name}`,
            folder,
            name,
            type: 'video',
            analysis_state: 'done',
            proxy_state: 'none',
            metadata: JSON.stringify({ video_codec: codecs[j % 4], reel_name: `A${String(j % 500).padStart(3, '0')}`, width: 1920, height: 1080 }),
            proxies: '[]',
            created_at: now,
            updated_at: now,
          })
        }
        await knex.transaction(async (trx) => {
          for (let k = 0; k < rows.length; k += 250) await trx('assets').insert(rows.slice(k, k + 250))
        })
        // the rate per 20,000 shows whether inserting slows as the index grows
        if ((i + 1000) % 20_000 === 0) console.log(`[${db}] ${i + 1000} assets, ${Math.round((i + 1000) / ((performance.now() - t0) / 1000))}/s so far`)
      }
      const insertMs = performance.now() - t0
      // a third of the assets get a client
      const t1 = performance.now()
      assetIds = (await knex('assets').orderBy('id').select('id')).map((x: any) => Number(x.id))
      for (let i = 0; i < assetIds.length; i += 3000) {
        const batch = assetIds.slice(i, i + 3000).filter((_, k) => k % 3 === 0)
        await knex.transaction(async (trx) => {
          for (let k = 0; k < batch.length; k += 250)
            await trx('custom_metadata_values').insert(
              batch.slice(k, k + 250).map((id, n) => ({ custom_metadata_field_id: clientId, owner_type: 'asset', owner_id: id, asset_id: id, value: JSON.stringify(`Client ${words[(id + n) % 300]}`), text_value: `Client ${words[(id + n) % 300]}`, created_at: now, updated_at: now })),
            )
        })
      }
      const valuesMs = performance.now() - t1
      console.log(`[${db}] ${ASSETS} assets indexed in ${(insertMs / 1000).toFixed(1)} s (${Math.round(ASSETS / (insertMs / 1000))}/s); ${Math.ceil(ASSETS / 3)} custom values in ${(valuesMs / 1000).toFixed(1)} s`)
      if (db === 'postgresql') await knex.raw('ANALYZE')
    }

    const terms = searchTerms(words)
    const rare = terms['rare word']
    const rows: string[] = []
    for (const [label, term] of Object.entries(terms)) {
      for (const [who, token] of [['admin', s.admin.token], ['reader (10 %)', reader.token]] as const) {
        let hits = 0
        const xs = await time(REQUESTS, async () => {
          const reply = await ask('GET', '/search', { token, query: { term, per_page: '50' } })
          if (reply.status !== 200) throw new Error(`${reply.status} ${reply.text}`)
          hits = reply.body.assets.length
        })
        rows.push(`| ${label} \`${term}\` | ${who} | ${fmt(pct(xs, 50))} | ${fmt(pct(xs, 99))} | ${hits} |`)
      }
    }
    console.log(`\n[${db}] search at ${ASSETS} assets, ${REQUESTS} sequential requests each`)
    console.log('| term | as | p50 | p99 | hits (page of 50) |\n|---|---|---|---|---|\n' + rows.join('\n'))
    if (args['search-only']) return
    // the ceiling: an indexed prefix LIKE on the name, straight through knex (no HTTP)
    // SQLite's LIKE uses an index only on a NOCASE column; PostgreSQL's needs text_pattern_ops on lower(name)
    await knex.raw(db === 'postgresql' ? 'CREATE INDEX IF NOT EXISTS bench_assets_name ON assets (lower(name) text_pattern_ops)' : 'CREATE INDEX IF NOT EXISTS bench_assets_name ON assets (name COLLATE NOCASE)')
    await knex.raw(db === 'postgresql' ? 'ANALYZE assets' : 'ANALYZE')
    const like = await time(REQUESTS, () => knex('assets').whereRaw(db === 'postgresql' ? 'lower(name) like ?' : 'name like ?', [`${rare}%`]).limit(50).select('id', 'name'))
    const service = s.runtime.container.resolve<any>('search.service')
    const direct = await time(REQUESTS, () => service.search({ userId: s.admin.id, isAdmin: true, capabilities: new Set() }, { term: rare, per_page: 50 }))
    const baseline = await time(REQUESTS, () => ask('GET', '/session/user_id', { token: s.admin.token }))
    console.log(`| baseline GET /session/user_id | admin | ${fmt(pct(baseline, 50))} | ${fmt(pct(baseline, 99))} | |`)
    console.log(`search service, rare word, no HTTP: p50 ${fmt(pct(direct, 50))} p99 ${fmt(pct(direct, 99))}; indexed LIKE '${rare}%' on name: p50 ${fmt(pct(like, 50))} p99 ${fmt(pct(like, 99))} (ratio p50 ${(pct(direct, 50) / pct(like, 50)).toFixed(1)}×)`)

    // bulk update of 10,000 assets (a job) until it finished
    const ids = assetIds.slice(0, 10_000)
    const b0 = performance.now()
    const job = await ask('POST', '/assets/bulk_update_custom_metadata', { token: s.admin.token, json: { asset_ids: ids, custom_metadata: { client: 'Bulk Client' } } })
    if (job.status !== 202) throw new Error(`bulk: ${job.status} ${job.text}`)
    for (;;) {
      const st = await ask('GET', `/status/${job.body.job.id}`, { token: s.admin.token })
      if (st.body.job.state === 'finished') break
      if (['failed', 'cancelled'].includes(st.body.job.state)) throw new Error(JSON.stringify(st.body.job))
      await new Promise((res) => setTimeout(res, 20))
    }
    const bulkMs = performance.now() - b0
    // PostgreSQL: above 1,000 assets the documents are rebuilt by the sweeper after the commit; until it is done, search answers the old values
    const clean = async () => {
      if (db === 'postgresql') while (Number((await knex('search_dirty').count({ n: '*' }))[0].n) > 0) await new Promise((res) => setTimeout(res, 20))
    }
    await clean()
    const indexedMs = performance.now() - b0
    const svc = s.runtime.container.resolve<any>('custom-metadata.service')
    const changes = await svc.resolve(knex, { type: 'asset', id: 0 }, { client: 'Bulk Again' })
    const d0 = performance.now()
    await knex.transaction((trx) => svc.bulkApply(trx, s.admin.id, ids, changes))
    const directBulk = performance.now() - d0
    await clean()
    const directIndexed = performance.now() - d0
    // how much of the write is the search index: the documents of the same 10,000 rebuilt alone
    let refresh = ''
    if (db === 'postgresql') {
      const r0 = performance.now()
      await knex.raw('SELECT mamkit_search_assets(?::integer[])', [ids])
      refresh = `; the index refresh of their documents alone ${((performance.now() - r0) / 1000).toFixed(2)} s`
    }
    console.log(
      `bulk update of 10,000 assets: ${(bulkMs / 1000).toFixed(2)} s over HTTP until the job finished, ${(indexedMs / 1000).toFixed(2)} s until the index had the new values; ` +
        `the write alone ${(directBulk / 1000).toFixed(2)} s, ${(directIndexed / 1000).toFixed(2)} s until indexed${refresh}`,
    )

    // generator contention: 50 concurrent takers, 4 rounds
    const made = await knex('custom_metadata_fields').where('name', 'number').first('id') // a reused database has it
    const genId = made
      ? Number(made.id)
      : (await ask('POST', '/custom_metadata_fields', { token: s.admin.token, json: { name: 'number', type: 'generator', pattern: 'EP-{counter:6}', custom_metadata_set_id: setId } })).body.custommetadatafield.id
    const g0 = performance.now()
    let taken = 0
    for (let round = 0; round < 4; round++) {
      const replies = await Promise.all(
        assetIds.slice(round * 50, round * 50 + 50).map((id) => ask('POST', '/custom_metadata', { token: s.admin.token, json: { custom_metadatum: { custom_metadata_field_id: genId, asset_id: id } } })),
      )
      taken += replies.filter((x) => x.status === 201).length
    }
    const genMs = performance.now() - g0
    console.log(`generator: ${taken} values taken by 50 concurrent requests at a time in ${(genMs / 1000).toFixed(2)} s: ${Math.round(taken / (genMs / 1000))} values/s\n`)
  } finally {
    await s.close()
    await scratch.drop()
  }
}

const kinds: DbKind[] = SERVER_URL ? ['sqlite', 'postgresql'] : databaseKinds()
for (const db of kinds.filter((d) => (args.reuse ? d === 'postgresql' : !args.only || args.only.split(',').includes(d)))) await run(db)
