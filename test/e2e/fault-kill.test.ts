/**
 * Killed at any point (issue 19): a seeded workload of writes against a real `mamkit serve`,
 * SIGKILLed at 20 random moments (fewer when a loaded machine spends the time budget first) and restarted, with the invariants checked after every restart
 * (test/helpers/kill-workload.ts). The seed is printed; MAMKIT_FAULT_SEED repeats a run, and
 * bench/faults.ts runs long campaigns.
 */
import t from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { databaseKinds, scratchDatabase } from '../helpers/index.js'
import { killAll } from '../helpers/process.js'
import { runKillCampaign } from '../helpers/kill-workload.js'

// real servers, restarts and a full burst on a shared 2-core machine: longer than tap's default
t.setTimeout(Number(process.env.MAMKIT_FAULT_TIMEOUT_MS ?? 600_000))

const KILLS = Number(process.env.MAMKIT_FAULT_KILLS ?? 20)
/**
 * Each database's campaign stops killing after this long (then its last round and checks run):
 * both databases' campaigns fit tap's 600 s per file on a loaded CI machine, where a restart takes
 * 2-3 times what it does idle. A run that made fewer than KILLS kills says how many it made.
 */
const BUDGET_MS = Number(process.env.MAMKIT_FAULT_BUDGET_MS ?? 120_000)
/** at load 28 (CI with every suite at once) a restart took 18-30 s: 3-7 kills fit the budget */
const MIN_KILLS = Math.min(KILLS, Number(process.env.MAMKIT_FAULT_MIN_KILLS ?? 2))

t.teardown(killAll)

for (const db of databaseKinds()) {
  t.test(`SIGKILL at ${KILLS} random points, restart, invariants hold [${db}]`, async (t) => {
    const seed = Number(process.env.MAMKIT_FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31))
    t.comment(`seed ${seed} (repeat with MAMKIT_FAULT_SEED=${seed})`)
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-faultkill-'))
    const database = await scratchDatabase(db)
    t.teardown(async () => {
      await killAll()
      await database.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    const started = Date.now()
    const result = await runKillCampaign({ seed, kills: KILLS, budgetMs: BUDGET_MS, dataDir, databaseUrl: database.databaseUrl, maxRunMs: 1200 })
    t.comment(`seed ${seed}: ${result.kills} of ${KILLS} kills in ${Math.round((Date.now() - started) / 1000)} s (budget ${BUDGET_MS / 1000} s)`)
    t.comment(`writes answered 2xx: ${JSON.stringify(result.counts)}`)
    t.comment(`restarts: median ${result.restartMs.sort((a, b) => a - b)[Math.floor(result.restartMs.length / 2)]} ms`)
    t.ok(result.kills >= MIN_KILLS, `at least ${MIN_KILLS} kills within the budget (made ${result.kills})`)
    t.same(result.findings, [], `no invariant broken over ${result.kills} kills (seed ${seed})`)
    // (the proxy jobs that failed here were random `.bin` uploads that ffprobe read as BinText art,
    // not the kills: assets/probe.ts no longer calls text art video)
    t.same(result.jobFailures, [], `no background job failed for another reason (seed ${seed})`)
    t.ok((result.counts.upload ?? 0) > 0 && (result.counts['project created'] ?? 0) > 0, 'the workload wrote')
  })
}
