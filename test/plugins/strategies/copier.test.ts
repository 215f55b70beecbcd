/**
 * The Copier: one pass that writes and hashes, large files in worker threads by descriptor, small
 * ones in the caller's thread; a stopped copy settles only once the worker has let go of the
 * descriptors; the errno of a failed write crosses from the worker (a full target is a 507 by it).
 */
import { createHash, randomBytes } from 'node:crypto'
import { open, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { Copier, IN_THREAD_BELOW } from '../../../plugins/strategies/copier.js'
import { DiskTarget } from '../../../plugins/strategies/targets/disk.js'
import { FileError, verify } from '../../../plugins/strategies/transfer.js'
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
  }
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
