/**
 * Files and rows after SIGKILL of a real `mamkit serve` at a random moment, restarted on the same
 * data dir and database (SECURITY.md "Faults the test suite can inject"; issue 18 items 1 and 5):
 * uploads and folder moves in flight are repaired so that every row names an existing file with
 * its own content and every file has a row; uploads retried under their Idempotency-Key end up
 * stored exactly once.
 */
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { databaseKinds, request, scratchDatabase } from '../../core/testing/index.js'
import { killAll, login, serveProcess, waitFor, type ServerProcess } from '../helpers/process.js'
import { openDatabase } from '../../core/db/orm.js'
import { writeTree } from '../plugins/projects/fixtures.js'

// each round is a kill and a restart (a few seconds of server start on a busy machine)
const ROUNDS = 3
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex')

/** every file below `root` (hidden ones too), relative */
async function filesBelow(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile()).map((e) => path.relative(root, path.join(e.parentPath ?? (e as any).path, e.name)).split(path.sep).join('/'))
}

const repairsLogged = (server: ServerProcess) => (server.output().match(/repairing a file operation that a crash cut short/g) ?? []).length

for (const db of databaseKinds()) {
  t.test(`files and rows stay together across SIGKILL and restart [${db}]`, async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mamkit-storagecrash-'))
    const database = await scratchDatabase(db)
    t.teardown(async () => {
      await killAll()
      await database.drop()
      await rm(dataDir, { recursive: true, force: true })
    })
    let server = await serveProcess(dataDir, database.databaseUrl)
    // the server's database read beside it (a plain connection: no migrations, repairs or jobs)
    const { knex, close } = await openDatabase({ dataDir, databaseUrl: database.databaseUrl, entities: [] })
    t.teardown(close)
    const journaled = async (kind: string) => Number((await knex('storage_journal').where({ kind }).count({ n: '*' }))[0].n)
    const journalEmpty = () => waitFor('the journal to be repaired', async () => Number((await knex('storage_journal').count({ n: '*' }))[0].n) === 0, 60_000)
    const rowsOf = (projectId: number) => knex('assets').where({ project_id: projectId }).select('id', 'path', 'online', 'description')
    /** SIGKILL at a random moment while an operation of `kind` is between its journal entry and its commit */
    const killDuring = async (kind: string) => {
      await sleep(Math.random() * 200)
      await waitFor(`a ${kind} in flight`, async () => (await journaled(kind)) > 0, 20_000)
      await sleep(Math.random() * 10)
      await restart()
    }

    /** every row names an existing file (with `contentOf(row)` when given) and every file has a row; no temporary files */
    async function assertConsistent(t: any, projectId: number, root: string, contentOf?: (row: any) => string | undefined) {
      const rows = await rowsOf(projectId)
      const files = await filesBelow(root)
      t.same(files.filter((f) => path.posix.basename(f).startsWith('.')), [], 'no temporary files in the project')
      t.same(rows.map((r: any) => r.path).sort(), files.sort(), `${files.length} files, each with its row, and no row without its file`)
      t.ok(rows.every((r: any) => Boolean(r.online)), 'every row is online')
      if (contentOf) {
        const wrong = []
        for (const r of rows) if ((await readFile(path.join(root, r.path), 'utf8').catch(() => null)) !== contentOf(r)) wrong.push(r.path)
        t.same(wrong, [], 'every row names its own file')
      }
    }

    const token = await login(server.url)
    const api = (method: string, route: string, options: Parameters<typeof request>[3] = {}) => request(server.url, method, route, { token, ...options })
    const restart = async () => {
      server.child.kill('SIGKILL')
      t.same(await server.exited, { code: null, signal: 'SIGKILL' })
      server = await serveProcess(dataDir, database.databaseUrl)
      await journalEmpty()
    }

    await t.test('uploads: a kill leaves no file without its row, retries store each upload once', async (t) => {
      const project = (await api('POST', '/projects', { json: { name: 'Crash uploads' } })).body.project
      const sent: Array<{ key: string; files: Array<{ name: string; data: Buffer }> }> = []
      let repairs = 0
      for (let round = 0; round < ROUNDS; round++) {
        const batch = Array.from({ length: 20 }, (_, i) => ({
          key: `round-${round}-${i}`,
          files: [
            { name: 'clip.mov', data: randomBytes(16_384 + Math.floor(Math.random() * 500_000)) },
            { name: `part-${i}.bin`, data: randomBytes(1000) },
          ],
        }))
        sent.push(...batch)
        const post = (req: (typeof batch)[number]) => {
          const form = new FormData()
          form.append('path', `Round ${round}`)
          for (const f of req.files) form.append('file', new Blob([new Uint8Array(f.data)]), f.name)
          return request(server.url, 'POST', `/projects/${project.id}/inject_uploads`, { token, multipart: form, headers: { 'Idempotency-Key': req.key } })
        }
        const inFlight = batch.map((req) => post(req).catch(() => null))
        await killDuring('assets.ingest')
        const answered = (await Promise.all(inFlight)).filter((r) => r?.status === 201).length
        repairs += repairsLogged(server)
        await assertConsistent(t, project.id, project.path)
        // the clients that lost their answer retry under the same key (409 while the dead process's key lease runs)
        const retried = await Promise.all(
          batch.map((req) =>
            waitFor(`the retry of ${req.key}`, async () => {
              const r = await post(req)
              if (r.status !== 201 && r.status !== 409) t.comment(`${req.key}: ${r.status} ${r.text}`)
              if (r.status === 409) await sleep(Number(r.headers.get('retry-after') ?? 1) * 1000)
              return r.status === 201 && r
            }),
          ),
        )
        t.same(retried.map((r) => r.body.assets.length), Array(batch.length).fill(2), 'every retry answers with both files')
        t.comment(`round ${round}: ${answered} of ${batch.length} answered before the kill`)
        await assertConsistent(t, project.id, project.path)
        const stored = new Map<string, number>()
        for (const f of await filesBelow(project.path)) {
          const h = sha(await readFile(path.join(project.path, f)))
          stored.set(h, (stored.get(h) ?? 0) + 1)
        }
        const copies = sent.flatMap((req) => req.files.map((f) => stored.get(sha(f.data)) ?? 0))
        t.same(copies, copies.map(() => 1), `each of ${copies.length} uploaded files is stored exactly once`)
      }
      t.comment(`${repairs} cut-short uploads repaired over ${ROUNDS} kills`)
      t.ok(repairs > 0, 'some kills hit uploads in the middle')
    })

    await t.test('folder moves: a kill leaves every row on its own file', async (t) => {
      const project = (await api('POST', '/projects', { json: { name: 'Crash moves' } })).body.project
      const root = project.path
      const files: Record<string, string> = {}
      for (let i = 0; i < 150; i++) files[`Loose/file ${i}.txt`] = `loose file ${i}`
      for (let i = 0; i < 20; i++) files[`Tree/A/B/deep ${i}.txt`] = `deep file ${i}`
      await writeTree(root, files)
      const added = await api('POST', `/projects/${project.id}/addassets`, { json: { paths: Object.keys(files) } })
      t.equal(added.status, 201)
      const contentById = new Map<number, string>(added.body.assets.map((a: any) => [a.id, files[a.path]]))
      for (const a of added.body.assets.slice(0, 10)) await api('PUT', `/assets/${a.id}`, { json: { description: `about ${a.name}` } })
      const described = new Map<number, string>(added.body.assets.slice(0, 10).map((a: any) => [a.id, `about ${a.name}`]))
      let repairs = 0
      for (let round = 0; round < ROUNDS; round++) {
        // round and round through three folders, file by file (long moves), and a folder renamed between them, until the kill ends the loop
        const url = server.url
        const FOLDERS = ['Loose', 'Elsewhere', 'Third']
        const drive = async () => {
          for (let i = 0; ; i++) {
            const [from, to] = [FOLDERS[i % 3], FOLDERS[(i + 1) % 3]]
            const names = await readdir(path.join(root, from)).catch(() => [] as string[])
            if (names.length) await request(url, 'PUT', `/projects/${project.id}/move_contents`, { token, json: { source: names.map((n) => `${from}/${n}`), destination: to } })
            const tree = (await readdir(path.join(root, 'Tree'))).find((n) => n.startsWith('A'))!
            await request(url, 'PUT', `/projects/${project.id}/rename_folder`, { token, json: { path: `Tree/${tree}`, name: `A${(Number(tree.slice(1) || 1) % 3) + 1}` } })
          }
        }
        const driving = drive().catch(() => {})
        await killDuring('projects.move')
        await driving
        repairs += repairsLogged(server)
        await assertConsistent(t, project.id, root, (r) => contentById.get(Number(r.id)))
        t.equal((await rowsOf(project.id)).length, Object.keys(files).length, 'no row lost or added')
        for (const r of await rowsOf(project.id)) if (described.has(Number(r.id))) t.equal(r.description, described.get(Number(r.id)))
      }
      t.comment(`${repairs} cut-short moves repaired over ${ROUNDS} kills`)
      t.ok(repairs > 0, 'some kills hit moves in the middle')
    })

    server.child.kill('SIGTERM')
    t.same(await server.exited, { code: 0, signal: null }, 'SIGTERM: clean exit')
  })
}
