import { createHash } from 'node:crypto'
import { fstatSync, statSync } from 'node:fs'
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { crc32 } from 'node:zlib'
import t, { type Test } from 'tap'
import type { HashResult, HashTask } from '../../../plugins/assets/workers/hash.js'

/**
 * The hash worker reads a descriptor the job opened and closes: it never closes it itself, also
 * when hashing fails half-way (a stream on the descriptor closed it then, and the job's own close
 * afterwards could close whatever file the process had opened under that number since). Run in
 * this thread, no pool: the worker function alone.
 */

const MiB = 1 << 20
type Worker = { default: (task: HashTask) => Promise<HashResult> }
/** the worker module, fresh, with `mocks` in place of the modules it imports */
const load = async (t: Test, mocks: Record<string, unknown> = {}) => (await t.mockImport<Worker>('../../../plugins/assets/workers/hash.js', mocks)).default

t.test('hash worker: the descriptor stays open and untouched when hashing fails half-way', async (t) => {
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
  await t.rejects(failing({ fd: handle.fd, sha256: true }), { message: 'injected hashing failure' })
  // give a stream's deferred close the chance to run, as it would before the job closes the descriptor
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(fstatSync(handle.fd).ino, statSync(file).ino, 'the descriptor is still open, on the same file')

  // the job goes on with the same descriptor: a full pass from byte 0 whatever was read before
  const hash = await load(t)
  const result = await hash({ fd: handle.fd, sha256: true })
  t.same(result, {
    crc32: crc32(content).toString(16).padStart(8, '0'),
    sha256: createHash('sha256').update(content).digest('hex'),
    bytes: content.length,
  })
  t.same(await hash({ fd: handle.fd, sha256: false }), { crc32: result.crc32, sha256: null, bytes: content.length }, 'CRC-32 only: the same checksum')
  await handle.close()
  t.pass('the job closes it once, without an error')
})

t.test('hash worker: an empty file and a read error leave the descriptor open', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-hash-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const hash = await load(t)
  const empty = path.join(dir, 'empty')
  await writeFile(empty, '')
  const handle = await open(empty, 'r')
  t.same(await hash({ fd: handle.fd, sha256: true }), { crc32: '00000000', sha256: createHash('sha256').digest('hex'), bytes: 0 })
  await handle.close()

  // a folder's descriptor cannot be read (EISDIR): the error is the worker's answer, the descriptor stays the job's
  const folder = await open(dir, 'r')
  t.teardown(() => folder.close().catch(() => {}))
  await t.rejects(hash({ fd: folder.fd, sha256: false }), { code: 'EISDIR' })
  t.ok(fstatSync(folder.fd).isDirectory(), 'still open')
})
