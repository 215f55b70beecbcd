import { createHash } from 'node:crypto'
import { fstatSync, statSync } from 'node:fs'
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { crc32 } from 'node:zlib'
import t, { type Test } from 'tap'
import type { DescriptorSumsResult, DescriptorSumsTask } from '../../../core/index.js'

/**
 * The sums worker (core/storage/sums.ts: the assets' hash jobs and the archive's copies) reads a
 * descriptor the job opened and closes: it never closes it itself, also when hashing fails half-way
 * (a stream on the descriptor closed it then, and the job's own close afterwards could close
 * whatever file the process had opened under that number since). Run in this thread, no pool: the
 * worker function alone.
 */

const MiB = 1 << 20
type Worker = { default: (task: DescriptorSumsTask) => Promise<DescriptorSumsResult> }
/** the worker module, fresh, with `mocks` in place of the modules it imports */
const load = async (t: Test, mocks: Record<string, unknown> = {}) => (await t.mockImport<Worker>('../../../core/storage/sums.js', mocks)).default
const hex = (n: number) => n.toString(16).padStart(8, '0')

t.test('sums worker: the descriptor stays open and untouched when hashing fails half-way', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-hash-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'clip.mov')
  const content = Buffer.alloc(3 * MiB + 123, 7)
  await writeFile(file, content)
  const handle = await open(file, 'r')
  t.teardown(() => handle.close().catch(() => {}))

  // the second chunk's checksum fails (as any error while hashing would)
  let calls = 0
  const failing = await load(t, {
    'node:zlib': {
      crc32: (chunk: Buffer, value: number) => {
        if (++calls === 2) throw new Error('injected hashing failure')
        return crc32(chunk, value)
      },
    },
  })
  t.match(await failing({ from: handle.fd, sha256: true }), { error: { message: 'injected hashing failure' } }, 'the failure is the answer')
  // give a stream's deferred close the chance to run, as it would before the job closes the descriptor
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(fstatSync(handle.fd).ino, statSync(file).ino, 'the descriptor is still open, on the same file')

  // the job goes on with the same descriptor: a full pass from byte 0 whatever was read before
  const hash = await load(t)
  const result = await hash({ from: handle.fd, sha256: true })
  t.same(result, { size: content.length, sha256: createHash('sha256').update(content).digest('hex'), crc32: hex(crc32(content)) })
  t.same(await hash({ from: handle.fd, sha256: false }), { size: content.length, sha256: null, crc32: hex(crc32(content)) }, 'CRC-32 only: the same checksum')
  t.same(await hash({ from: handle.fd, crc32: false }), { size: content.length, sha256: createHash('sha256').update(content).digest('hex'), crc32: null }, 'SHA-256 only (a read-back)')
  await handle.close()
  t.pass('the job closes it once, without an error')
})

t.test('sums worker: an empty file and a read error leave the descriptor open', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-hash-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const hash = await load(t)
  const empty = path.join(dir, 'empty')
  await writeFile(empty, '')
  const handle = await open(empty, 'r')
  t.same(await hash({ from: handle.fd, sha256: true }), { size: 0, sha256: createHash('sha256').digest('hex'), crc32: '00000000' })
  await handle.close()

  // a folder's descriptor cannot be read (EISDIR): the error is the worker's answer, the descriptor stays the job's
  const folder = await open(dir, 'r')
  t.teardown(() => folder.close().catch(() => {}))
  t.match(await hash({ from: folder.fd, sha256: false }), { error: { code: 'EISDIR' } })
  t.ok(fstatSync(folder.fd).isDirectory(), 'still open')
})

t.test('sums worker: a copy writes the bytes it hashed at the same offsets, with the next read in flight', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-hash-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const hash = await load(t)
  // chunk boundaries and a last partial chunk
  const content = Buffer.alloc(5 * MiB + 4321)
  for (let i = 0; i < content.length; i += 4096) content.writeUInt32LE(i, i)
  await writeFile(path.join(dir, 'a'), content)
  const from = await open(path.join(dir, 'a'), 'r')
  const to = await open(path.join(dir, 'b'), 'wx')
  t.same(await hash({ from: from.fd, to: to.fd }), { size: content.length, sha256: createHash('sha256').update(content).digest('hex'), crc32: hex(crc32(content)) })
  await from.close()
  await to.close()
  t.ok((await readFile(path.join(dir, 'b'))).equals(content), 'byte-identical')

  // stopped: no chunk after the flag is read or written, and the answer says so
  const stop = new Int32Array(new SharedArrayBuffer(4))
  Atomics.store(stop, 0, 1)
  const again = await open(path.join(dir, 'a'), 'r')
  const out = await open(path.join(dir, 'c'), 'wx')
  t.match(await hash({ from: again.fd, to: out.fd, stop }), { error: { name: 'AbortError', code: 'ABORT_ERR' } })
  t.equal((await out.stat()).size, 0, 'nothing written')
  await again.close()
  await out.close()
})
