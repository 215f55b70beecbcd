import { execFile } from 'node:child_process'
import { mkdtemp, open, rm, truncate, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { crc32 } from 'node:zlib'
import t from 'tap'
import { zipLayout, zipRange } from '../../../plugins/assets/zip-stream.js'
import { readZip } from '../../helpers/media.js'

/**
 * The zip laid out from known sizes and CRCs: small entries read back byte for byte; 4 GiB entries
 * and offsets get zip64 records that Python's zipfile (a real, independent reader) understands. The
 * big files are sparse, and the big zip is written sparse too: only its headers are real bytes.
 */

const run = promisify(execFile)
const GiB4 = 2 ** 32

t.test('small entries: exact size, bytes and CRCs, any range', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-zip-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const a = Buffer.from('first file\n')
  const b = Buffer.alloc(70_000, 7)
  await writeFile(path.join(dir, 'a.txt'), a)
  await writeFile(path.join(dir, 'b.bin'), b)
  const mtime = new Date(2024, 4, 6, 7, 8, 10)
  const layout = zipLayout([
    { name: 'a.txt', file: path.join(dir, 'a.txt'), size: a.length, crc32: crc32(a), mtime },
    { name: 'Ordner/ü b.bin', file: path.join(dir, 'b.bin'), size: b.length, crc32: crc32(b), mtime },
  ])
  const whole = Buffer.from(await zipRange(layout, 0, layout.size - 1).toArray().then((c) => Buffer.concat(c)))
  t.equal(whole.length, layout.size, 'the announced size is the size')
  const entries = readZip(whole)
  t.same(entries.map((e) => [e.name, e.method, e.crc32]), [['a.txt', 0, crc32(a)], ['Ordner/ü b.bin', 0, crc32(b)]])
  t.ok(entries[0].data.equals(a) && entries[1].data.equals(b), 'the bytes of the files')
  for (const [start, end] of [[0, 0], [25, 60], [40, 70_100], [layout.size - 22, layout.size - 1]]) {
    const part = Buffer.concat(await zipRange(layout, start, end).toArray())
    t.ok(part.equals(whole.subarray(start, end + 1)), `bytes ${start}-${end}`)
  }
  const zipFile = path.join(dir, 'small.zip')
  await writeFile(zipFile, whole)
  const { stdout } = await run('python3', ['-c', 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.testzip() or "ok"); print([(i.filename, i.file_size, i.date_time) for i in z.infolist()])', zipFile])
  t.match(stdout, /^ok\n\[\('a\.txt', 11, \(2024, 5, 6, 7, 8, 10\)\), \('Ordner\/ü b\.bin', 70000, /, 'Python reads names (UTF-8), sizes and dates; CRCs check out')
})

t.test('zip64: a 4 GiB entry and an entry beyond 4 GiB, read by Python', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-zip64-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const big = path.join(dir, 'big.mov')
  await writeFile(big, '')
  await truncate(big, GiB4 + 10) // sparse: reads as zeros, takes no space
  await writeFile(path.join(dir, 'small.txt'), 'after the big one')
  const mtime = new Date(2024, 0, 1)
  const layout = zipLayout([
    { name: 'big.mov', file: big, size: GiB4 + 10, crc32: 0x12345678, mtime },
    { name: 'small.txt', file: path.join(dir, 'small.txt'), size: 17, crc32: crc32(Buffer.from('after the big one')), mtime },
  ])
  // the zip on disk, sparse: every segment but the big file's data is written where it belongs
  const zipFile = path.join(dir, 'big.zip')
  const handle = await open(zipFile, 'w')
  let at = 0
  for (const segment of layout.segments) {
    if ('buffer' in segment) await handle.write(segment.buffer, 0, segment.buffer.length, at)
    else if (segment.size < 1000) await handle.write(Buffer.from('after the big one'), 0, 17, at)
    at += 'buffer' in segment ? segment.buffer.length : segment.size
  }
  await handle.truncate(at)
  await handle.close()
  t.equal(at, layout.size, 'the size adds up')
  const { stdout } = await run('python3', [
    '-c',
    'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print([(i.filename, i.file_size, i.compress_size, i.header_offset, "%08x" % i.CRC) for i in z.infolist()]); print(z.read("small.txt").decode())',
    zipFile,
  ])
  const localBig = 30 + 'big.mov'.length + 20
  t.equal(
    stdout.trim(),
    `[('big.mov', ${GiB4 + 10}, ${GiB4 + 10}, 0, '12345678'), ('small.txt', 17, 17, ${localBig + GiB4 + 10}, '${crc32(Buffer.from('after the big one')).toString(16).padStart(8, '0')}')]\nafter the big one`,
    'zip64 sizes and offsets as Python reads them; the entry after 4 GiB is found and its CRC checks out',
  )
  const tail = Buffer.concat(await zipRange(layout, layout.size - 98, layout.size - 1).toArray())
  const onDisk = Buffer.alloc(98)
  const reread = await open(zipFile, 'r')
  await reread.read(onDisk, 0, 98, layout.size - 98)
  await reread.close()
  t.ok(tail.equals(onDisk), 'a suffix range serves the zip64 end records and the end of the central directory')
})
