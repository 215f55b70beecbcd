/**
 * Long "killed at any point" campaigns (issue 19): the seeded workload of
 * test/e2e/fault-kill.test.ts with many more kills, on SQLite and, when MAMKIT_BENCH_DATABASE_URL
 * (or MAMKIT_TEST_DATABASE_URL) names a PostgreSQL server, on a scratch database there. Prints each
 * campaign's seed, what was written, restart times and every invariant found broken.
 *
 *   npx tsc -p . && node dist/bench/faults.js [--kills 200] [--campaigns 3] [--seed N] [--run-ms 2000] [--budget-s S]
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { runKillCampaign } from '../test/helpers/kill-workload.js'
import { scratchDatabase } from '../core/testing/index.js'
import { killAll } from '../test/helpers/process.js'

const { values } = parseArgs({ options: { kills: { type: 'string' }, campaigns: { type: 'string' }, seed: { type: 'string' }, 'run-ms': { type: 'string' }, 'budget-s': { type: 'string' } } })
const kills = Number(values.kills ?? 100)
const campaigns = Number(values.campaigns ?? 1)
const pgUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
if (pgUrl) process.env.MAMKIT_TEST_DATABASE_URL = pgUrl
const kinds = pgUrl ? (['sqlite', 'postgresql'] as const) : (['sqlite'] as const)

let broken = 0
for (let c = 0; c < campaigns; c++) {
  for (const kind of kinds) {
    const seed = values.seed !== undefined ? Number(values.seed) + c : Math.floor(Math.random() * 2 ** 31)
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-bench-faults-'))
    const database = await scratchDatabase(kind)
    const started = Date.now()
    try {
      const budgetMs = values['budget-s'] === undefined ? undefined : Number(values['budget-s']) * 1000
      const result = await runKillCampaign({ seed, kills, budgetMs, dataDir, databaseUrl: database.databaseUrl, maxRunMs: Number(values['run-ms'] ?? 2000), log: (line) => process.stderr.write(`  ${line}\n`) })
      const sorted = [...result.restartMs].sort((a, b) => a - b)
      console.log(`[${kind}] seed ${seed}: ${result.kills} of ${kills} kills in ${Math.round((Date.now() - started) / 1000)} s; restart p50 ${sorted[Math.floor(sorted.length / 2)]} ms, max ${sorted.at(-1)} ms`)
      console.log(`  written (2xx): ${JSON.stringify(result.counts)}`)
      console.log(result.findings.length ? `  ${result.findings.length} findings:\n${result.findings.map((f) => `    ${f}`).join('\n')}` : '  no invariant broken')
      if (result.jobFailures.length) console.log(`  ${result.jobFailures.length} background job failures:\n${result.jobFailures.map((f) => `    ${f}`).join('\n')}`)
      broken += result.findings.length
    } finally {
      await killAll()
      await database.drop()
      await rm(dataDir, { recursive: true, force: true })
    }
  }
}
process.exitCode = broken ? 1 : 0
