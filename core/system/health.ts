import { stat } from 'node:fs/promises'
import type { Database } from '../db/orm.js'
import { MIGRATIONS_TABLE } from '../db/migrator.js'
import type { PluginDefinition } from '../plugin/contract.js'
import type { JobRunner } from '../jobs/runner.js'
import type { StorageRegistry } from '../storage/storages.js'
import type { MamConfig } from '../config.js'

export interface CheckResult {
  ok: boolean
  /** a short reason, never a path, address or secret (the answer is public) */
  detail?: string
}

/**
 * Readiness of this process (GET /readyz): the database answers, every migration of the loaded
 * plugins is applied, the job runner claims rounds (when this process runs jobs) and every storage
 * root is a reachable folder. Each check has a time limit, so a hung mount or database is a
 * failed check, not a hung probe.
 */
export class HealthChecks {
  constructor(
    private readonly db: Database,
    private readonly plugins: readonly PluginDefinition[],
    private readonly runner: Pick<JobRunner, 'state'>,
    private readonly storages: StorageRegistry,
    private readonly config: MamConfig,
    private readonly runsJobs: boolean,
  ) {}

  async ready(timeoutMs = 2000): Promise<{ ready: boolean; checks: Record<string, CheckResult> }> {
    const [database, migrations, storages] = await Promise.all([
      limited(this.database(), timeoutMs),
      limited(this.migrations(), timeoutMs),
      limited(this.storageRoots(), timeoutMs),
    ])
    const checks = { database, migrations, jobs: this.jobs(), storages }
    return { ready: Object.values(checks).every((c) => c.ok), checks }
  }

  private async database(): Promise<CheckResult> {
    await this.db.knex.raw('select 1')
    return { ok: true }
  }

  private async migrations(): Promise<CheckResult> {
    const rows: Array<{ plugin: string; name: string }> = await this.db.knex(MIGRATIONS_TABLE).select('plugin', 'name')
    const done = new Set(rows.map((r) => `${r.plugin}/${r.name}`))
    const pending = this.plugins.flatMap((p) => (p.migrations ?? []).map((m) => `${p.name}/${m.name}`)).filter((id) => !done.has(id))
    return pending.length ? { ok: false, detail: `${pending.length} pending (run mamkit migrate)` } : { ok: true }
  }

  private jobs(): CheckResult {
    if (!this.runsJobs) return { ok: true, detail: 'jobs run in other processes' }
    const { started, lastRoundAt } = this.runner.state()
    if (!started) return { ok: false, detail: 'stopped' }
    // a round runs at least every poll interval; three missed ones mean the loop is stuck
    const late = Date.now() - lastRoundAt > Math.max(3 * this.config.jobs.pollMs, 10_000)
    return lastRoundAt > 0 && late ? { ok: false, detail: 'no claim round lately' } : { ok: true }
  }

  private async storageRoots(): Promise<CheckResult> {
    const missing: string[] = []
    for (const storage of this.storages.list()) {
      const info = await stat(storage.root).catch(() => undefined)
      if (!info?.isDirectory()) missing.push(storage.name)
    }
    return missing.length ? { ok: false, detail: `not mounted: ${missing.join(', ')}` } : { ok: true }
  }
}

async function limited(check: Promise<CheckResult>, ms: number): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, detail: `no answer within ${ms} ms` }), ms)
  })
  try {
    return await Promise.race([check.catch(() => ({ ok: false, detail: 'failed' })), timeout])
  } finally {
    clearTimeout(timer)
  }
}
