/**
 * The committed API report (core/api-report.api.md) matches the public entry points as they are
 * now, so that a change of the partner contract shows in review (issue 9, "Write it down").
 */
import t from 'tap'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { apiReport, REPORT, ROOT } from '../tools/api-report.js'

t.test('core/api-report.api.md is up to date', async (t) => {
  const committed = await readFile(REPORT, 'utf8').catch(() => '')
  const built = apiReport()
  t.ok(built.includes('## mamkit (core/index.ts)') && built.includes('function definePlugin'), 'the report lists the core entry')
  if (committed === built) return t.pass('the report matches the sources')
  const a = committed.split('\n')
  const b = built.split('\n')
  const changed: string[] = []
  for (let i = 0; i < Math.max(a.length, b.length) && changed.length < 20; i++) if (a[i] !== b[i]) changed.push(`line ${i + 1}:\n  committed: ${a[i] ?? '(none)'}\n  built:     ${b[i] ?? '(none)'}`)
  t.fail(`${path.relative(ROOT, REPORT)} is stale: the public API changed. Run \`npm run api-report\`, review the diff of the file and commit it with your change.\n${changed.join('\n')}`)
})
