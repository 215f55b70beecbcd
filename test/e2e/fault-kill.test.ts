/**
 * Killed at any point (issue 19): a seeded workload of writes against a real `mamkit serve`,
 * SIGKILLed at 20 random moments and restarted, with the invariants checked after every restart
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
    const result = await runKillCampaign({ seed, kills: KILLS, dataDir, databaseUrl: database.databaseUrl, maxRunMs: 1200 })
    t.comment(`writes answered 2xx: ${JSON.stringify(result.counts)}`)
    t.comment(`restarts: median ${result.restartMs.sort((a, b) => a - b)[Math.floor(result.restartMs.length / 2)]} ms`)
    t.same(result.findings, [], `no invariant broken over ${KILLS} kills (seed ${seed})`)
    // (the proxy jobs that failed here were random `.bin` uploads that ffprobe read as BinText art,
    // not the kills: assets/probe.ts no longer calls text art video)
    t.same(result.jobFailures, [], `no background job failed for another reason (seed ${seed})`)
    t.ok((result.counts.upload ?? 0) > 0 && (result.counts['project created'] ?? 0) > 0, 'the workload wrote')
  })
}
