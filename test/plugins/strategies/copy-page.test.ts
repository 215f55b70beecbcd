/**
 * A page of small files in one worker task (Copier.copyPage, the core's copy-page worker): copied,
 * hashed, read back or sized, flushed and named in one round trip, byte-identical, with the same
 * sums as the per-file path; every file the task does not copy (a symbolic link, a missing or large
 * original, checksums that do not hold, a name taken) goes the per-file way and fails or succeeds
 * exactly as it did there; a stopped page leaves the files it did not reach uncopied.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { Copier, IN_THREAD_BELOW } from '../../../plugins/strategies/copier.js'
import { DiskTarget } from '../../../plugins/strategies/targets/disk.js'
import { FileError, copyVerified, type CopyOptions, type TransmissionCheck } from '../../../plugins/strategies/transfer.js'
import { copyPage } from '../../../core/storage/copy-page.js'
import { targetRoot } from './fixtures.js'

const dir = await targetRoot(t)
const sumsOf = (b: Buffer) => ({ size: b.length, sha256: createHash('sha256').update(b).digest('hex'), crc32: crc32(b).toString(16).padStart(8, '0') })
const copier = new Copier(2)
t.teardown(() => copier.close())
const options = (check: TransmissionCheck, more: Partial<CopyOptions> = {}): CopyOptions => ({ check, signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare, copyPage: copier.copyPage, ...more })

async function project(name: string, files: Record<string, Buffer>) {
  const root = path.join(dir, name)
  for (const [rel, bytes] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, rel)), { recursive: true })
    await writeFile(path.join(root, rel), bytes)
  }
  return root
}

t.test('a page of small files in one worker task: byte-identical copies, their sums, one round trip, no temporaries left', async (t) => {
  for (const check of ['none', 'size', 'checksum', 'fingerprint'] as const) {
    const files: Record<string, Buffer> = {}
    for (let i = 0; i < 20; i++) files[`d${i % 3}/f${i}.bin`] = randomBytes(i * 997)
    const root = await project(`page-${check}`, files)
    const target = new DiskTarget(path.join(dir, `page-${check}-target`))
    const before = copier.inWorkers
    const done = await copyVerified(target, Object.keys(files).map((rel) => ({ item: rel, root, path: rel, key: `k/${rel}`, size: files[rel].length })), options(check))
    t.equal(copier.inWorkers, before + 1, `${check}: one worker task for the page`)
    t.equal(done.length, 20)
    for (const o of done) {
      t.notOk(o.error, `${check}: ${o.item} copied`)
      if (o.error) continue
      t.same(o.sums, sumsOf(files[o.item]), `${check}: ${o.item} has the original's SHA-256 and CRC-32`)
      t.equal(o.mtimeMs, Math.floor((await stat(path.join(root, o.item))).mtimeMs))
      t.ok((await readFile(path.join(dir, `page-${check}-target`, 'k', o.item))).equals(files[o.item]), `${check}: ${o.item} byte-identical`)
    }
    for (const d of ['d0', 'd1', 'd2']) t.same((await readdir(path.join(dir, `page-${check}-target`, 'k', d))).filter((n) => n.startsWith('.')), [], `${check}: no temporary left in ${d}`)
  }
})

t.test('what the page does not copy goes the per-file way and fails as it did there', async (t) => {
  const outside = path.join(dir, 'secret.bin')
  await writeFile(outside, randomBytes(100))
  const large = randomBytes(IN_THREAD_BELOW + 5)
  const root = await project('odd', { 'ok.bin': randomBytes(300), 'large.bin': large, 'known.bin': randomBytes(50), 'link-in.bin': randomBytes(10) })
  await symlink(outside, path.join(root, 'escape.bin'))
  await symlink(path.join(root, 'ok.bin'), path.join(root, 'inside-link.bin'))
  const known = await stat(path.join(root, 'known.bin'))
  const wrong = { sums: { size: 50, sha256: '0'.repeat(64), crc32: '00000000' }, size: 50, mtimeMs: Math.floor(known.mtimeMs) }
  const target = new DiskTarget(path.join(dir, 'odd-target'))
  const files = [
    { item: 'ok.bin', root, path: 'ok.bin', key: 'k/ok.bin' },
    // listed small, large by now: the page leaves it to the Copier's worker
    { item: 'large.bin', root, path: 'large.bin', key: 'k/large.bin', size: 10 },
    { item: 'escape.bin', root, path: 'escape.bin', key: 'k/escape.bin' },
    { item: 'inside-link.bin', root, path: 'inside-link.bin', key: 'k/inside-link.bin' },
    { item: 'gone.bin', root, path: 'gone.bin', key: 'k/gone.bin' },
    { item: 'no-folder.bin', root, path: 'nowhere/no-folder.bin', key: 'k/no-folder.bin' },
    { item: 'known.bin', root, path: 'known.bin', key: 'k/known.bin', known: wrong },
  ]
  const paged = await copyVerified(target, files, options('fingerprint'))
  const perFile = await copyVerified(new DiskTarget(path.join(dir, 'odd-target-2')), files, options('fingerprint', { copyPage: undefined }))
  const byItem = (list: typeof paged) => Object.fromEntries(list.map((o) => [o.item, o.error ? { error: o.error.message, file: o.error instanceof FileError } : { sums: o.sums }]))
  t.same(byItem(paged), byItem(perFile), 'the same outcome per file as without the page task')
  t.match(byItem(paged)['escape.bin'], { error: /leads outside its storage/ })
  t.match(byItem(paged)['gone.bin'], { error: 'gone.bin vanished before it was copied' })
  t.match(byItem(paged)['known.bin'], { error: 'known.bin changed while it was copied' })
  t.same(byItem(paged)['large.bin'], { sums: sumsOf(large) })
  t.notOk(await target.head('k/known.bin'), 'nothing under the name of a file whose checksums did not hold')
})

t.test('a rerun keeps a copy that checks out against the known checksums, and replaces one that does not', async (t) => {
  const bytes = randomBytes(2000)
  const root = await project('rerun', { 'a.bin': bytes, 'b.bin': bytes })
  const st = await stat(path.join(root, 'a.bin'))
  const stb = await stat(path.join(root, 'b.bin'))
  const targetDir = path.join(dir, 'rerun-target')
  await mkdir(path.join(targetDir, 'k'), { recursive: true })
  await writeFile(path.join(targetDir, 'k', 'a.bin'), bytes)
  const corrupt = Buffer.from(bytes)
  corrupt[7] ^= 1
  await writeFile(path.join(targetDir, 'k', 'b.bin'), corrupt)
  const known = (s: typeof st) => ({ sums: sumsOf(bytes), size: bytes.length, mtimeMs: Math.floor(s.mtimeMs) })
  const done = await copyVerified(
    new DiskTarget(targetDir),
    [
      { item: 'a', root, path: 'a.bin', key: 'k/a.bin', known: known(st) },
      { item: 'b', root, path: 'b.bin', key: 'k/b.bin', known: known(stb) },
    ],
    options('fingerprint', { reuse: true }),
  )
  t.same(Object.fromEntries(done.map((o) => [o.item, !o.error && o.reused])), { a: true, b: false }, 'the intact copy kept, the corrupt one sent again')
  t.ok((await readFile(path.join(targetDir, 'k', 'b.bin'))).equals(bytes), 'the corrupt copy replaced by the original bytes')
})

t.test('a stopped page copies nothing more and rejects; restore by link never over an existing name', async (t) => {
  const files: Record<string, Buffer> = {}
  for (let i = 0; i < 30; i++) files[`f${i}.bin`] = randomBytes(100)
  const root = await project('stop', files)
  const abort = new AbortController()
  abort.abort()
  await t.rejects(copyVerified(new DiskTarget(path.join(dir, 'stop-target')), Object.keys(files).map((rel) => ({ item: rel, root, path: rel, key: rel })), options('size', { signal: abort.signal })), { name: 'AbortError' })
  t.same(await readdir(path.join(dir, 'stop-target')).catch(() => []), [], 'nothing written')

  // the worker itself: a stop flag set before the task leaves every file uncopied; a link never replaces a name
  const stop = new Int32Array(new SharedArrayBuffer(4))
  Atomics.store(stop, 0, 1)
  const stopped = await copyPage({ files: [{ from: path.join(root, 'f0.bin'), temp: path.join(dir, '.t0'), to: path.join(dir, 'f0.copy') }], place: 'rename', readBack: false, below: IN_THREAD_BELOW, syncsAtOnce: 8, stop })
  t.same(stopped, { outcomes: [{ copied: false }], stopped: true })
  await writeFile(path.join(dir, 'taken.bin'), 'someone else')
  const linked = await copyPage({
    files: [
      { from: path.join(root, 'f1.bin'), temp: path.join(dir, '.t1'), to: path.join(dir, 'taken.bin') },
      { from: path.join(root, 'f2.bin'), temp: path.join(dir, '.t2'), to: path.join(dir, 'f2.restored'), expected: sumsOf(files['f2.bin']) },
      { from: path.join(root, 'f3.bin'), temp: path.join(dir, '.t3'), to: path.join(dir, 'f3.restored'), expected: sumsOf(files['f2.bin']) },
    ],
    place: 'link',
    readBack: false,
    below: IN_THREAD_BELOW,
    syncsAtOnce: 8,
  })
  t.same(linked.outcomes.map((o) => o.copied), [false, true, false], 'a taken name and checksums that do not hold are not copied')
  t.equal(await readFile(path.join(dir, 'taken.bin'), 'utf8'), 'someone else', 'the existing file untouched')
  t.ok((await readFile(path.join(dir, 'f2.restored'))).equals(files['f2.bin']))
  t.same((await readdir(dir)).filter((n) => n.startsWith('.t') || n === 'f3.restored'), [], 'no temporaries, nothing under the name that did not check out')
})

t.test('a page of originals removed in one worker task: only plain files with the size and time they were copied with', async (t) => {
  const root = await project('release', { 'same.bin': randomBytes(10), 'grown.bin': randomBytes(10), 'linked.bin': randomBytes(10) })
  const at = async (rel: string) => {
    const st = await stat(path.join(root, rel))
    return { path: path.join(root, rel), size: 10, mtimeMs: Math.floor(st.mtimeMs) }
  }
  const same = await at('same.bin')
  const grown = await at('grown.bin')
  await writeFile(path.join(root, 'grown.bin'), randomBytes(11))
  const linked = await at('linked.bin')
  await rm(linked.path)
  await symlink(same.path, linked.path)
  const removals = await copier.removePage!([same, grown, linked, { path: path.join(root, 'none.bin'), size: 1, mtimeMs: 0 }, { path: path.join(root, 'grown.bin', 'under-a-file'), size: 1, mtimeMs: 0 }])
  t.same(removals, ['removed', 'changed', 'changed', 'missing', 'failed'])
  t.same((await readdir(root)).sort(), ['grown.bin', 'linked.bin'], 'the changed file and the symbolic link stay')
})
