/**
 * The Copier: one pass that writes and hashes, large files in worker threads by descriptor, small
 * ones in the caller's thread; a stopped copy settles only once the worker has let go of the
 * descriptors; the errno of a failed write crosses from the worker (a full target is a 507 by it).
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, open, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { Copier, IN_THREAD_BELOW } from '../../../plugins/strategies/copier.js'
import { DiskTarget } from '../../../plugins/strategies/targets/disk.js'
import { COMPARE_FROM, FileError, copyVerified, verify } from '../../../plugins/strategies/transfer.js'
import { compareInThread } from '../../../plugins/strategies/compare.js'
import type { Target } from '../../../plugins/strategies/targets/types.js'
import { targetRoot } from './fixtures.js'

const dir = await targetRoot(t)
const sumsOf = (b: Buffer) => ({ size: b.length, sha256: createHash('sha256').update(b).digest('hex'), crc32: crc32(b).toString(16).padStart(8, '0') })
const copier = new Copier(2)
t.teardown(() => copier.close())

t.test('a large file is copied and hashed in a worker thread, the same bytes as hashed', async (t) => {
  const bytes = randomBytes(IN_THREAD_BELOW * 3 + 17)
  await writeFile(path.join(dir, 'large.src'), bytes)
  const from = await open(path.join(dir, 'large.src'), 'r')
  const to = await open(path.join(dir, 'large.dst'), 'wx')
  const before = copier.inWorkers
  const sums = await copier.copy(from, to, bytes.length)
  await from.close()
  await to.close()
  t.same(sums, sumsOf(bytes), 'SHA-256, CRC-32 and size of the original')
  t.ok((await readFile(path.join(dir, 'large.dst'))).equals(bytes), 'the copy is byte-identical')
  t.equal(copier.inWorkers, before + 1, 'done in a worker thread')

  const again = await open(path.join(dir, 'large.dst'), 'r')
  t.same(await copier.copy(again, null, bytes.length), sumsOf(bytes), 'a read-back (no destination) hashes the same')
  t.same(await copier.copy(again, null, bytes.length, undefined, true), { ...sumsOf(bytes), crc32: '' }, "a verification's read-back: size and SHA-256 alone")
  await again.close()
})

t.test('fingerprint: the read-back of a copy that differs in one byte fails, large (worker) or small (in thread)', async (t) => {
  const target = new DiskTarget(path.join(dir, 'fp-target'))
  for (const size of [IN_THREAD_BELOW * 3 + 5, 4096]) {
    const bytes = randomBytes(size)
    const key = `p/f${size}.bin`
    await target.put(key, Readable.from([bytes]), sumsOf(bytes))
    await verify(target, key, sumsOf(bytes), 'fingerprint', undefined, copier.copy)
    t.pass(`${size} bytes: the intact copy checks out`)
    // one byte flipped in the middle, the size unchanged: only reading the bytes back can tell
    const file = path.join(dir, 'fp-target', 'p', `f${size}.bin`)
    const handle = await open(file, 'r+')
    const at = Math.floor(size / 2)
    await handle.write(Buffer.from([bytes[at] ^ 1]), 0, 1, at)
    await handle.close()
    await verify(target, key, sumsOf(bytes), 'size', undefined, copier.copy)
    t.pass('the size check alone cannot see it')
    const err = await verify(target, key, sumsOf(bytes), 'fingerprint', undefined, copier.copy).then(() => null, (e) => e)
    t.ok(err instanceof FileError, 'fingerprint fails')
    t.match(err?.message, new RegExp(`read back hashes to [0-9a-f]{64} \\(${size} bytes\\), the original to ${sumsOf(bytes).sha256}`))

    // the same check by comparison with the original (what an archive does for a large file on disk)
    const root = path.join(dir, 'fp-originals')
    await mkdir(root, { recursive: true })
    await writeFile(path.join(root, `f${size}.bin`), bytes)
    const original = { root, path: `f${size}.bin`, stats: await stat(path.join(root, `f${size}.bin`)), compare: copier.compare }
    const workers = copier.inWorkers
    const byComparison = await verify(target, key, sumsOf(bytes), 'fingerprint', undefined, copier.copy, original).then(() => null, (e) => e)
    t.ok(byComparison instanceof FileError, 'fingerprint by comparison fails too')
    if (size >= COMPARE_FROM) {
      t.match(byComparison?.message, `read back differs from the original at byte ${at} (the original has ${size} bytes, SHA-256 ${sumsOf(bytes).sha256})`)
      t.equal(copier.inWorkers, workers + 1, 'compared in a worker thread, not hashed')
    } else t.match(byComparison?.message, /read back hashes to/, 'a small copy is still hashed')
  }
})

t.test('compare: equal files, a byte that differs, a file shorter than the other, empty files', async (t) => {
  const bytes = randomBytes(IN_THREAD_BELOW * 2 + 3)
  const put = async (name: string, b: Buffer) => {
    await writeFile(path.join(dir, name), b)
    return open(path.join(dir, name), 'r')
  }
  const a = await put('cmp.a', bytes)
  const same = await put('cmp.same', bytes)
  const flipped = Buffer.from(bytes)
  flipped[IN_THREAD_BELOW + 9] ^= 0x80
  const other = await put('cmp.other', flipped)
  const short = await put('cmp.short', bytes.subarray(0, IN_THREAD_BELOW))
  const e1 = await put('cmp.e1', Buffer.alloc(0))
  const e2 = await put('cmp.e2', Buffer.alloc(0))
  for (const [how, compare] of [['worker', copier.compare], ['in thread', compareInThread]] as const) {
    t.same(await compare(a, same), { size: bytes.length, differsAt: -1 }, `${how}: equal`)
    t.same(await compare(a, other), { size: IN_THREAD_BELOW + 9, differsAt: IN_THREAD_BELOW + 9 }, `${how}: the first byte that differs`)
    t.same(await compare(a, short), { size: IN_THREAD_BELOW, differsAt: IN_THREAD_BELOW }, `${how}: a shorter copy differs where it ends`)
    t.same(await compare(short, a), { size: IN_THREAD_BELOW, differsAt: IN_THREAD_BELOW }, `${how}: a longer copy too`)
    t.same(await compare(e1, e2), { size: 0, differsAt: -1 }, `${how}: two empty files are equal`)
    const abort = new AbortController()
    abort.abort()
    await t.rejects(compare(a, same, abort.signal), { name: 'AbortError' }, `${how}: an aborted signal stops it`)
  }
  for (const h of [a, same, other, short, e1, e2]) await h.close()
})

/** a disk target whose batch runs `meanwhile` once its objects are committed, before copyVerified verifies them */
function committing(target: DiskTarget, meanwhile: () => Promise<void>): Target {
  return Object.assign(Object.create(target) as DiskTarget, {
    batch: () => {
      const batch = target.batch()
      return Object.assign(Object.create(batch), {
        putFile: batch.putFile!.bind(batch),
        commit: async () => {
          const failed = await batch.commit()
          await meanwhile()
          return failed
        },
      })
    },
  })
}

t.test('fingerprint of a large file by comparison: a copy corrupted, or an original changed, between the copy and the check fails the file', async (t) => {
  const root = path.join(dir, 'cv-src')
  await mkdir(root, { recursive: true })
  const bytes = randomBytes(IN_THREAD_BELOW * 3 + 11)
  const disk = new DiskTarget(path.join(dir, 'cv-target'))
  const options = { check: 'fingerprint' as const, signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare }
  const flipAt = async (file: string, at: number) => {
    const h = await open(file, 'r+')
    const b = Buffer.alloc(1)
    await h.read(b, 0, 1, at)
    await h.write(Buffer.from([b[0] ^ 1]), 0, 1, at)
    await h.close()
  }

  await writeFile(path.join(root, 'intact.bin'), bytes)
  const before = copier.inWorkers
  const [ok] = await copyVerified(disk, [{ item: 1, root, path: 'intact.bin', key: 'k/intact.bin' }], options)
  t.notOk(ok.error, 'an intact copy checks out')
  t.same(ok.error ? null : ok.sums, sumsOf(bytes), 'the stored sums: SHA-256 and CRC-32 of the original')
  t.equal(copier.inWorkers, before + 2, 'copied, then compared, each in a worker thread')

  await writeFile(path.join(root, 'changed.bin'), bytes)
  const changedOriginal = committing(disk, () => flipAt(path.join(root, 'changed.bin'), 12345))
  const [changed] = await copyVerified(changedOriginal, [{ item: 2, root, path: 'changed.bin', key: 'k/changed.bin' }], options)
  t.ok(changed.error instanceof FileError, 'an original written to after its copy fails the verification')
  t.match(changed.error?.message, 'changed.bin changed after it was copied, before its copy was verified')

  await writeFile(path.join(root, 'corrupt.bin'), bytes)
  const corrupted = committing(disk, () => flipAt(path.join(dir, 'cv-target', 'k', 'corrupt.bin'), IN_THREAD_BELOW * 2 + 1))
  const [bad] = await copyVerified(corrupted, [{ item: 3, root, path: 'corrupt.bin', key: 'k/corrupt.bin' }], options)
  t.ok(bad.error instanceof FileError, 'a copy that differs from its original in one byte fails the verification')
  t.match(bad.error?.message, `the copy of k/corrupt.bin read back differs from the original at byte ${IN_THREAD_BELOW * 2 + 1}`)
})

t.test('a small file is copied in the calling thread', async (t) => {
  const bytes = randomBytes(4096)
  await writeFile(path.join(dir, 'small.src'), bytes)
  const from = await open(path.join(dir, 'small.src'), 'r')
  const to = await open(path.join(dir, 'small.dst'), 'wx')
  const before = copier.inWorkers
  t.same(await copier.copy(from, to, bytes.length), sumsOf(bytes))
  await from.close()
  await to.close()
  t.ok((await readFile(path.join(dir, 'small.dst'))).equals(bytes))
  t.equal(copier.inWorkers, before, 'no worker round trip')
})

t.test('copyThreads 0: a large file too is copied in the calling thread', async (t) => {
  const inThread = new Copier(0)
  t.teardown(() => inThread.close())
  const bytes = randomBytes(IN_THREAD_BELOW * 2)
  await writeFile(path.join(dir, 'zero.src'), bytes)
  const from = await open(path.join(dir, 'zero.src'), 'r')
  const to = await open(path.join(dir, 'zero.dst'), 'wx')
  t.same(await inThread.copy(from, to, bytes.length), sumsOf(bytes))
  await from.close()
  await to.close()
  t.ok((await readFile(path.join(dir, 'zero.dst'))).equals(bytes))
  t.equal(inThread.inWorkers, 0, 'no worker thread')
})

t.test('a stopped copy rejects, and only once the worker let go of the descriptors', async (t) => {
  const bytes = randomBytes(64 << 20)
  await writeFile(path.join(dir, 'stop.src'), bytes)
  const from = await open(path.join(dir, 'stop.src'), 'r')
  const to = await open(path.join(dir, 'stop.dst'), 'wx')
  const abort = new AbortController()
  const copying = copier.copy(from, to, bytes.length, abort.signal)
  setTimeout(() => abort.abort(), 5)
  await t.rejects(copying, { name: 'AbortError' })
  // the worker returned: nothing writes to `to` any more, so what is there now stays
  const { size } = await to.stat()
  await new Promise((r) => setTimeout(r, 200))
  t.equal((await to.stat()).size, size, 'nothing written after the copy settled')
  await from.close()
  await to.close()
  await t.rejects(copier.copy(from, null, bytes.length, abort.signal), { name: 'AbortError' }, 'an aborted signal stops it before it starts')
})

t.test('the errno of a failed read or write comes back with the error', async (t) => {
  const bytes = randomBytes(IN_THREAD_BELOW * 2)
  await writeFile(path.join(dir, 'errno.src'), bytes)
  const from = await open(path.join(dir, 'errno.src'), 'r')
  // opened for reading only: the worker's write fails with EBADF
  const to = await open(path.join(dir, 'errno.src'), 'r')
  await t.rejects(copier.copy(from, to, bytes.length), { code: 'EBADF' })
  await from.close()
  await to.close()
})

t.test('known checksums on a disk target: copied by the kernel; size trusts them, checksum and fingerprint read the copy back against them', async (t) => {
  const root = path.join(dir, 'kn-src')
  await mkdir(root, { recursive: true })
  const disk = new DiskTarget(path.join(dir, 'kn-target'))
  for (const size of [IN_THREAD_BELOW, IN_THREAD_BELOW * 2 + 5]) {
    const bytes = randomBytes(size)
    const name = `f${size}.bin`
    await writeFile(path.join(root, name), bytes)
    const st = await stat(path.join(root, name))
    const known = (sums: ReturnType<typeof sumsOf>) => ({ sums, size, mtimeMs: Math.floor(st.mtimeMs) })
    for (const check of ['none', 'size', 'checksum', 'fingerprint'] as const) {
      const key = `k/${check}/${name}`
      const workers = copier.inWorkers
      const [ok] = await copyVerified(disk, [{ item: 1, root, path: name, key, known: known(sumsOf(bytes)) }], { check, signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare })
      t.notOk(ok.error, `${check}, ${size} bytes: checks out`)
      t.same(ok.error ? null : ok.sums, sumsOf(bytes), `${check}: the known checksums are recorded`)
      t.ok((await readFile(path.join(dir, 'kn-target', key))).equals(bytes), `${check}: the copy is byte-identical`)
      const hashedInWorker = check === 'checksum' || check === 'fingerprint' ? 1 : 0
      t.equal(copier.inWorkers, workers + hashedInWorker, `${check}: ${hashedInWorker ? 'the copy read back in a worker, not copied or compared there' : 'nothing copied or compared in a worker'}`)
    }
    // checksums recorded for other bytes (the file changed and kept its time): checksum and fingerprint fail the file, nothing is left on the target
    const wrong = known({ ...sumsOf(bytes), sha256: '0'.repeat(64) })
    for (const check of ['checksum', 'fingerprint'] as const) {
      const key = `bad/${check}/${name}`
      const [bad] = await copyVerified(disk, [{ item: 2, root, path: name, key, known: wrong }], { check, signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare })
      t.ok(bad.error instanceof FileError, `${check}: a copy that does not hash to the recorded checksums fails`)
      t.match(bad.error?.message, `the copy of ${key} read back hashes to ${sumsOf(bytes).sha256}`)
      t.notOk(await disk.head(key), `${check}: no object under the key`)
    }
    t.same((await readdir(path.join(dir, 'kn-target', 'bad', 'fingerprint'))).filter((n) => n.startsWith('.mamkit-part-')), [], 'no temporary left behind')
    const [sized] = await copyVerified(disk, [{ item: 3, root, path: name, key: `bad/size/${name}`, known: wrong }], { check: 'size', signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare })
    t.notOk(sized.error, 'size: the recorded checksums are not re-checked (documented: use checksum or fingerprint)')
    // kernel: false keeps the hashing copy, which checks the bytes it read against the recorded checksums
    const [hashing] = await copyVerified(disk, [{ item: 4, root, path: name, key: `bad/hashing/${name}`, known: wrong }], { check: 'size', signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare, kernel: false })
    t.match(hashing.error?.message, 'changed while it was copied')
  }
  // below KERNEL_COPY_FROM the hashing copy stays (cheaper for small files): it checks the recorded checksums itself
  await writeFile(path.join(root, 'small.bin'), randomBytes(4096))
  const st = await stat(path.join(root, 'small.bin'))
  const [small] = await copyVerified(disk, [{ item: 5, root, path: 'small.bin', key: 'bad/small.bin', known: { sums: { size: 4096, sha256: '0'.repeat(64), crc32: '00000000' }, size: 4096, mtimeMs: Math.floor(st.mtimeMs) } }], { check: 'size', signal: new AbortController().signal, reuse: false, copy: copier.copy, compare: copier.compare })
  t.match(small.error?.message, 'changed while it was copied', 'a small file is hashed on the way, its recorded checksums checked')
})
