import { link, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, waitForAsset, createProject, type TestServer } from '../../../core/testing/index.js'
import { exists, listTree, row } from '../projects/fixtures.js'
import type { StorageJournal } from '../../../core/storage/journal.js'

/** inject_uploads claims names atomically, checks every part first, takes empty files, and honours Idempotency-Key (issue 18 items 2, 5, 7, 17) */

const count = async (s: TestServer, table: string, where: Record<string, unknown> = {}) => Number((await s.runtime.db.knex(table).where(where).count({ n: '*' }))[0].n)
const hidden = async (dir: string) => (await readdir(dir).catch(() => [] as string[])).filter((n) => n.startsWith('.'))

onEachDatabase(t, '20 concurrent uploads of one file name: every request gets its own name and keeps its bytes', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Same name' })
  const bodies = Array.from({ length: 20 }, (_, i) => `bytes of request ${i} `.repeat(i + 1))
  const replies = await Promise.all(bodies.map((data) => upload(s, s.user.token, p.id, [{ name: 'same.mov', data }], { path: 'Media' })))
  t.same(replies.map((r) => r.status), Array(20).fill(201), 'all 201')
  const names = replies.map((r) => r.body.assets[0].name)
  t.same([...names].sort(), ['same.mov', ...Array.from({ length: 19 }, (_, i) => `same (${i + 2}).mov`)].sort(), 'twenty different names')
  for (const [i, r] of replies.entries()) {
    const asset = r.body.assets[0]
    t.equal(await readFile(path.join(p.path, asset.path), 'utf8'), bodies[i], `${asset.name} holds the bytes of its own request`)
    t.equal(asset.size, Buffer.byteLength(bodies[i]))
    t.match(await row(s, 'assets', { id: asset.id }), { path: asset.path, name: asset.name, folder: 'Media' })
  }
  t.equal(await count(s, 'assets', { project_id: p.id }), 20, 'one row per file')
  t.same(await hidden(path.join(p.path, 'Media')), [], 'no temporary files left in the folder')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), bodies.reduce((n, b) => n + Buffer.byteLength(b), 0), 'the project size counts every upload once')
  t.equal(await count(s, 'storage_journal'), 0, 'no journal entry left')
})

onEachDatabase(t, 'every part is checked before any is written: over-long names are 422 naming the part', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Long names' })
  const long = `${'x'.repeat(252)}.mov` // 256 bytes
  const alone = await upload(s, s.user.token, p.id, [{ name: long, data: 'long' }])
  assertProblem(t, alone, 422, ['file'])
  t.match(alone.body.detail, /256 bytes/)
  const beside = await upload(s, s.user.token, p.id, [{ name: 'good.txt', data: 'good' }, { name: `${'é'.repeat(128)}.mov`, data: 'long' }, { name: 'also-good.txt', data: 'good' }])
  assertProblem(t, beside, 422, ['file'])
  t.match(beside.body.detail, /"é{40}…" has a file name of 260 bytes/, 'the part is named by its file name')
  t.same(await listTree(p.path), [], 'the good files were not written either')
  t.equal(await count(s, 'assets', { project_id: p.id }), 0)

  // 255 bytes is allowed; its clash still fits (the base is shortened for the counter)
  const max = `${'y'.repeat(251)}.mov`
  t.equal((await upload(s, s.user.token, p.id, [{ name: max, data: '1' }])).status, 201)
  const second = await upload(s, s.user.token, p.id, [{ name: max, data: '2' }])
  t.equal(second.status, 201)
  const name = second.body.assets[0].name
  t.equal(Buffer.byteLength(name), 255)
  t.match(name, /^y+ \(2\)\.mov$/)
  t.equal(await readFile(path.join(p.path, name), 'utf8'), '2')
})

onEachDatabase(t, 'a 0-byte file is registered and analysed like any other', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Empty files' })
  const reply = await upload(s, s.user.token, p.id, [{ name: 'empty.txt', data: '' }, { name: 'full.txt', data: 'full' }])
  t.equal(reply.status, 201, reply.text)
  const empty = reply.body.assets.find((a: any) => a.name === 'empty.txt')
  t.match(empty, { size: 0, path: 'empty.txt', online: true })
  t.equal((await readFile(path.join(p.path, 'empty.txt'))).length, 0)
  t.equal(Number((await row(s, 'assets', { id: empty.id })).size), 0)
  t.match(await waitForAsset(s, s.user.token, empty.id), { analysis_state: 'ready', type: 'other' }, 'analysis ends, it does not stay pending')
})

onEachDatabase(t, 'an offline asset keeps its name: an upload of that name gets the next one', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Offline' })
  const first = await upload(s, s.user.token, p.id, [{ name: 'gone.mov', data: 'old' }])
  const old = first.body.assets[0]
  t.equal((await s.request('PUT', `/assets/${old.id}`, { token: s.user.token, json: { description: 'the old clip' } })).status, 200)
  await rm(path.join(p.path, 'gone.mov'))
  const again = await upload(s, s.user.token, p.id, [{ name: 'gone.mov', data: 'new' }])
  t.equal(again.status, 201)
  t.match(again.body.assets, [{ name: 'gone (2).mov' }])
  t.not(again.body.assets[0].id, old.id, 'a new asset, not the old identity')
  t.match(await row(s, 'assets', { id: old.id }), { path: 'gone.mov', description: 'the old clip' })
})

onEachDatabase(t, 'Idempotency-Key: a repeated upload answers the stored result instead of uploading twice', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Retries' })
  const send = (key: string | undefined, data: string, token = s.user.token, fields: Record<string, string> = {}) => {
    const form = new FormData()
    for (const [k, v] of Object.entries(fields)) form.append(k, v)
    form.append('file', new Blob([data]), 'take.mov')
    return s.request('POST', `/projects/${p.id}/inject_uploads`, { token, multipart: form, headers: key ? { 'Idempotency-Key': key } : {} })
  }
  const first = await send('key-1', 'take one')
  t.equal(first.status, 201)
  t.notOk(first.headers.get('idempotent-replayed'))
  const repeat = await send('key-1', 'take one')
  t.equal(repeat.status, 201)
  t.equal(repeat.headers.get('idempotent-replayed'), 'true')
  t.same(repeat.body, first.body, 'the stored answer')
  t.same(await listTree(p.path), ['take.mov'], 'one file')
  t.equal(await count(s, 'assets', { project_id: p.id }), 1)

  // another request under the same key: 422, nothing written
  assertProblem(t, await send('key-1', 'a longer, different take'), 422, ['Idempotency-Key'])
  assertProblem(t, await send('key-1', 'take one', s.user.token, { path: 'Elsewhere' }), 422, ['Idempotency-Key'])
  t.same(await listTree(p.path), ['take.mov'])
  // keys belong to their user
  const other = await s.createUser('colleague', { admin: true })
  t.equal((await send('key-1', 'take one', other.token)).status, 201)
  t.same(await listTree(p.path), ['take (2).mov', 'take.mov'])
  assertProblem(t, await send('x'.repeat(256), 'take one'), 422, ['Idempotency-Key'])
  assertProblem(t, await send('with space', 'take one'), 422, ['Idempotency-Key'])

  // concurrent repeats: one upload; the others replay it or are told to retry (409 with Retry-After)
  const burst = await Promise.all(Array.from({ length: 6 }, () => send('key-2', 'take two')))
  const created = burst.filter((r) => r.status === 201)
  t.ok(created.length >= 1)
  for (const r of created) t.same(r.body, created[0].body, 'every 201 is the one answer')
  for (const r of burst.filter((r) => r.status !== 201)) {
    assertProblem(t, r, 409)
    t.equal(r.headers.get('retry-after'), '1')
  }
  t.equal((await send('key-2', 'take two')).headers.get('idempotent-replayed'), 'true')
  t.same(await listTree(p.path), ['take (2).mov', 'take (3).mov', 'take.mov'], 'one file for the burst')

  // a failed request stores nothing: the same key works once the request is right
  assertProblem(t, await send('key-3', 'take three', s.user.token, { path: 'take.mov' }), 422, ['path'])
  t.equal((await send('key-3', 'take three')).status, 201)
  t.equal((await send('key-3', 'take three')).headers.get('idempotent-replayed'), 'true')

  // keys expire after 24 hours: then the same key is a new request
  await s.runtime.db.knex('idempotency_keys').where({ key: 'key-1' }).update({ expires_at: new Date(Date.now() - 1000) })
  const expired = await send('key-1', 'take one')
  t.equal(expired.status, 201)
  t.notOk(expired.headers.get('idempotent-replayed'))
  t.equal(await count(s, 'idempotency_keys', { key: 'key-1' }), 2, "the expired key was replaced (and the colleague's kept)")

  // addassets takes the header too
  const add = (key: string) => s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: ['take.mov'] }, headers: { 'Idempotency-Key': key } })
  const added = await add('add-1')
  t.equal(added.status, 201)
  const replayed = await add('add-1')
  t.equal(replayed.headers.get('idempotent-replayed'), 'true')
  t.same(replayed.body, added.body)
  t.ok(await exists(path.join(p.path, 'take.mov')))
})

/** the entry a process that died during an upload leaves (lease long lapsed) */
async function deadIngest(s: TestServer, payload: Record<string, unknown>) {
  const past = new Date(Date.now() - 60_000)
  await s.runtime.db.knex('storage_journal').insert({
    kind: 'assets.ingest',
    scope: `project:${payload.projectId}`,
    exclusive: false,
    payload: JSON.stringify(payload),
    owner: 'a-process-that-died',
    lease_until: past,
    created_at: past,
    updated_at: past,
  })
}

onEachDatabase(t, 'an upload cut short by a crash is undone from its temporary files, and nothing else', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Cut short' })
  const theirs = (await upload(s, s.user.token, p.id, [{ name: 'clip.mov', data: 'theirs' }])).body.assets[0]
  const file = (name: string) => path.join(p.path, name)
  // the dead request placed two temporary files and claimed a name for the first; a file of the
  // same content under the next name is someone else's (another inode)
  await writeFile(file('.mamkit-ingest-dead-0'), 'mine 0')
  await link(file('.mamkit-ingest-dead-0'), file('clip (2).mov'))
  await writeFile(file('.mamkit-ingest-dead-1'), 'mine 1')
  await writeFile(file('clip (3).mov'), 'mine 0')
  await deadIngest(s, { projectId: p.id, folder: '', token: 'dead', count: 2 })
  const journal = s.runtime.container.resolve<StorageJournal>('storageJournal')
  t.equal(await journal.reconcile(), 1)
  t.same(await listTree(p.path), ['clip (3).mov', 'clip.mov'], "the request's files went, the others stayed")
  t.equal(await readFile(file('clip.mov'), 'utf8'), 'theirs')

  // committed before the crash: the rows stay and their analysis is queued
  await writeFile(file('.mamkit-ingest-late-0'), 'late')
  const queued = () => count(s, 'jobs', { type: 'assets.analyse', asset_id: theirs.id })
  const before = await queued()
  await deadIngest(s, { projectId: p.id, folder: '', token: 'late', count: 1, assetIds: [theirs.id] })
  t.equal(await journal.reconcile(), 1)
  t.equal(await queued(), before + 1, 'analysis queued again')
  t.same(await listTree(p.path), ['clip (3).mov', 'clip.mov'], 'the temporary file is gone')
  t.equal(await count(s, 'storage_journal'), 0)
})
