/**
 * SIGKILL of a real `mamkit serve` while it archives and while it restores: after each kill every
 * file is online, or its verified copy is on the target (never neither), and a restart finishes
 * the job without losing or corrupting a byte.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { databaseKinds, request, scratchDatabase } from '../../helpers/index.js'
import { killAll, login, serveProcess, waitFor } from '../../helpers/process.js'
import { writeTree } from '../projects/fixtures.js'

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const read = (p: string) => readFile(p).catch(() => null)

t.teardown(killAll)

for (const db of databaseKinds()) {
  t.test(`kill -9 while archiving and while restoring [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-crash-'))
    const scratch = await scratchDatabase(db)
    t.teardown(async () => {
      await killAll()
      await scratch.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    let server = await serveProcess(dataDir, scratch.databaseUrl)
    const token = await login(server.url)
    const call = (method: string, p: string, json?: unknown) => request(server.url, method, p, { token, json })

    // many files (so a kill lands between them) and a few larger ones
    const files: Record<string, Buffer> = {}
    for (let i = 0; i < 150; i++) files[`Media/f${String(i).padStart(3, '0')}.bin`] = randomBytes(32 * 1024 + i)
    for (let i = 0; i < 3; i++) files[`Big/b${i}.bin`] = randomBytes(4 * 1024 * 1024 + i)
    const sums = Object.fromEntries(Object.entries(files).map(([k, v]) => [k, sha(v)]))
    const created = await call('POST', '/projects', { name: 'Crashing' })
    t.equal(created.status, 201, created.text)
    const id = created.body.project.id
    const root = (await call('GET', `/projects/${id}`)).body.project.path
    await writeTree(root, files)
    t.equal((await call('POST', `/projects/${id}/addassets`, { paths: Object.keys(files) })).status, 201)
    const dest = path.join(dataDir, 'targets', 'tape')
    const strategy = await call('POST', '/archive_strategies', { archive_strategy: { name: 'Tape', destination: dest, transmission_check: 'fingerprint' } })
    t.equal(strategy.status, 201, strategy.text)

    const stateOf = async () => (await call('GET', `/projects/${id}`)).body?.project?.archive_strategy_state
    /** every file is whole online or whole (and right) on the target */
    const neverLost = async (key: string, when: string) => {
      let online = 0
      let copied = 0
      for (const [f, sum] of Object.entries(sums)) {
        const here = await read(path.join(root, f))
        if (here && sha(here) === sum) online++
        else {
          t.notOk(here, `${when}: ${f} is not left half-written online`)
          const there = await read(path.join(dest, key, 'files', f))
          t.ok(there && sha(there) === sum, `${when}: ${f} is gone online, so its copy is on the target and right`)
          copied++
        }
      }
      t.ok(true, `${when}: ${online} online, ${copied} only on the target`)
      return { online, copied }
    }

    // 1. kill while copying
    const archived = await call('PUT', `/projects/${id}/archive`, { strategy: strategy.body.archivestrategy.id })
    t.equal(archived.status, 202, archived.text)
    // killed once the first copies are on the target (the archive job is queued behind the 153 analyses)
    await waitFor('copying', async () => (await stateOf()) === 'copying' && (await import('node:fs/promises')).readdir(dest).then((e) => e.length > 0, () => false), 120_000)
    await new Promise((r) => setTimeout(r, 200))
    server.child.kill('SIGKILL')
    await server.exited
    const key = await (async () => {
      // the key is the single folder the target holds
      const { readdir } = await import('node:fs/promises')
      const entries = await readdir(dest).catch(() => [])
      return entries[0]
    })()
    t.ok(key, 'the archive folder exists')
    const after1 = await neverLost(key, 'killed while copying')
    t.equal(after1.copied, 0, 'nothing was released while copying')

    // 2. restart: the job resumes; kill again as soon as originals are being released
    server = await serveProcess(dataDir, scratch.databaseUrl)
    const releasing = await waitFor(
      'releasing',
      async () => {
        const s = await stateOf()
        if (s === 'archived') return s
        return s === 'releasing' && Object.keys(files).some((f) => !require_exists(root, f)) ? s : false
      },
      60_000,
    )
    if (releasing === 'releasing') {
      server.child.kill('SIGKILL')
      await server.exited
      await neverLost(key, 'killed while releasing')
      server = await serveProcess(dataDir, scratch.databaseUrl)
    } else t.comment('the archive finished before the kill could land in the release')
    await waitFor('archived', async () => (await stateOf()) === 'archived', 60_000)
    const done = await neverLost(key, 'archived')
    t.equal(done.online, 0, 'every original released once the archive finished')

    // 3. restore, killed halfway
    t.equal((await call('PUT', `/projects/${id}/unarchive`)).status, 202)
    await waitFor('some restored', async () => Object.keys(files).some((f) => require_exists(root, f)) || (await stateOf()) === 'online', 60_000)
    server.child.kill('SIGKILL')
    await server.exited
    await neverLost(key, 'killed while restoring')
    server = await serveProcess(dataDir, scratch.databaseUrl)
    await waitFor('online', async () => (await stateOf()) === 'online', 60_000)
    for (const [f, sum] of Object.entries(sums)) {
      const b = await read(path.join(root, f))
      if (!b || sha(b) !== sum) t.fail(`${f} restored byte-identical`)
    }
    t.ok(true, 'every file restored byte-identical')
    const { readdir } = await import('node:fs/promises')
    const leftovers = (await readdir(path.join(root, 'Media'))).filter((n) => n.startsWith('.'))
    t.same(leftovers, [], 'no temporary restore files left behind')
    const assets = (await call('GET', `/projects/${id}/assets`, undefined)).body
    t.ok(assets, 'assets still listed')
  })
}

import { existsSync } from 'node:fs'
function require_exists(root: string, f: string) {
  return existsSync(path.join(root, f))
}
