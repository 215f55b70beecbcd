import { constants, existsSync } from 'node:fs'
import { copyFile, open, type FileHandle } from 'node:fs/promises'
import { Readable, Transform } from 'node:stream'
import { ChunkSums, type CopyPageResult, type CopyPageTask, type PageOutcome } from '../../../core/index.js'

/** our own end-to-end checksums: they travel with each object and are checked on the way back */
export interface Sums {
  size: number
  sha256: string
  crc32: string
}

/** what a target knows of a stored object without reading it */
export interface Head {
  size: number
  /** the checksums stored with the object (S3 metadata); disk targets keep them in the manifest */
  sha256?: string
  crc32?: string
}

/**
 * Where a strategy writes. Keys are `/`-separated and relative; a target never lets one lead out of
 * its destination. `put` is atomic: a reader sees the whole object or nothing (a temporary name or
 * an unfinished multipart upload until the end), and a failed put leaves nothing behind.
 */
export interface Target {
  readonly kind: 'disk' | 's3'
  /**
   * The checksums must be known before the first byte is sent (S3 stores them as object metadata,
   * set when an upload starts); a disk target keeps them in the manifest and can take them after.
   */
  readonly needsSumsFirst: boolean
  /** `sums` are the source's checksums, known before the first byte is sent (stored with the object) */
  put(key: string, source: Readable, sums: Sums, signal?: AbortSignal): Promise<Sums>
  /** several puts made durable together (see PutBatch) */
  batch(): PutBatch
  head(key: string): Promise<Head | null>
  /** the object's file opened for reading (disk targets): read by descriptor, in a worker thread (see Copier) */
  open?(key: string): Promise<FileHandle>
  get(key: string, signal?: AbortSignal): Promise<Readable>
  delete(key: string): Promise<void>
  /** every key below `prefix` (`prefix/…`) */
  list(prefix: string): AsyncIterable<string>
  /** removes what a killed process left unfinished below `prefix` (temporary files, multipart uploads) */
  sweep(prefix: string): Promise<void>
  /** removes every object below `prefix` */
  deletePrefix(prefix: string): Promise<void>
  /**
   * A page of small files put in one worker task (disk targets; see CopyPage): each answered
   * `copied` is durable under its key (flushed, named, its folder flushed) when this resolves, with
   * no batch or commit; the others are left to the caller's own path. A stop (`signal`) leaves the
   * files not reached uncopied.
   */
  putPage?(files: PagePut[], how: { insideRoot: string; readBack: boolean; copyPage: CopyPage; signal?: AbortSignal }): Promise<PageOutcome[]>
  /**
   * Small objects brought back in one worker task (disk targets): each copied to its new temporary
   * `temp`, checked against `expected`, flushed and linked to `to` (never over an existing file);
   * the temporaries are removed. The others are left to the caller's own path.
   */
  fetchPage?(files: Array<{ key: string; temp: string; to: string; expected: Sums }>, copyPage: CopyPage, signal?: AbortSignal): Promise<PageOutcome[]>
  close(): Promise<void>
}

/** one small file of a page (Target.putPage): the original at its path through its checked folder (InsideRoot.pathOf) */
export interface PagePut {
  key: string
  from: string
  /** checksums known before (an asset's), valid while the original has this size and modification time (ms) */
  known?: { sums: Sums; size: number; mtimeMs: number } | null
  /** a copy already under the key with the known checksums is kept (a rerun after a crash) */
  reuse: boolean
}

/**
 * A page of small files copied in one worker task (the Copier's: the core's copy-page worker, files
 * below its in-thread size); stopped between two files by `signal`. A page failure (a folder's
 * flush) comes back as `error`.
 */
export type CopyPage = (task: Pick<CopyPageTask, 'files' | 'insideRoot' | 'place' | 'readBack'>, signal?: AbortSignal) => Promise<CopyPageResult>

/**
 * Puts that become visible and durable together at `commit`: a disk target writes each object to a
 * temporary name, and the commit flushes them all (several fsyncs at once, which the file system
 * joins), renames them into place and flushes each directory once, instead of one sync and rename
 * per object. An S3 upload is durable when it is done, so there a batch is plain puts. Until
 * `commit` resolves, no object of the batch may be trusted (nor anything released for it).
 */
export interface PutBatch {
  /** like Target.put; `sums` may be null where the target does not need them first (returns what was written) */
  put(key: string, source: Readable, sums: Sums | null, signal?: AbortSignal): Promise<Sums>
  /** like put, from an open file (disk targets): `copy` writes its bytes to the object's temporary file and hashes them */
  /**
   * `readBack` (a fingerprint check of a small file): the object's temporary is read back through
   * its own descriptor right after it was written (size and SHA-256, see CopyFds) and handed back
   * as `back`; the caller then only checks the committed object's size, not reopening it
   */
  putFile?(key: string, from: FileHandle, size: number, copy: CopyFds, signal?: AbortSignal, readBack?: CopyFds): Promise<Sums & { back?: Sums }>
  /**
   * Like putFile, but the bytes are copied by the kernel (copyKernel: copy_file_range, no hash, no
   * user-space buffer): for a file whose checksums are known already. `readBack` (a checksum or
   * fingerprint check) reads the copy's temporary right after it was written (SHA-256 alone, while
   * its early flush runs) and hands back its sums; `size` is the copy's size.
   */
  putCopy?(key: string, from: FileHandle, size: number, signal?: AbortSignal, readBack?: CopyFds): Promise<{ size: number; back: Sums | null }>
  /** an object put in this batch that must not appear after all (its source changed while it was sent) */
  drop(key: string): Promise<void>
  /** makes what was put durable under its key; the keys that could not be (a full disk …) with their error */
  commit(): Promise<Map<string, Error>>
  /** removes what was put and not committed */
  abort(): Promise<void>
}

/**
 * The bytes of `from` from offset 0 written to `to` at the same offsets (or only read, `to` null),
 * and their sums (Copier.copy). `readBack`: a verification's read (`to` null) that needs the size
 * and SHA-256 alone (equal SHA-256 means equal bytes, a CRC-32 would add nothing but CPU time):
 * its `crc32` is '' (not computed).
 */
export type CopyFds = (from: FileHandle, to: FileHandle | null, size: number, signal?: AbortSignal, readBack?: boolean) => Promise<Sums>

/** our checksums of bytes as they come (`crc32: false`: a read-back's, crc32 '') */
export class Hashing {
  private readonly sums_: ChunkSums
  constructor(wanted: { crc32?: boolean } = {}) {
    this.sums_ = new ChunkSums({ sha256: true, crc32: wanted.crc32 })
  }
  get bytes() {
    return this.sums_.bytes
  }
  update(chunk: Buffer) {
    this.sums_.update(chunk)
  }
  sums(): Sums {
    const r = this.sums_.result()
    return { size: r.size, sha256: r.sha256!, crc32: r.crc32 ?? '' }
  }
}

/** a pass-through that hashes what flows through it */
export class Hasher extends Transform {
  private readonly hashing = new Hashing()
  get bytes() {
    return this.hashing.bytes
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void) {
    this.hashing.update(chunk)
    done(null, chunk)
  }
  sums(): Sums {
    return this.hashing.sums()
  }
}

/**
 * Writes a stream to an open file, hashing it on the way: a plain loop of positional writes, several
 * times faster per small file than a stream pipeline into an fs write stream.
 */
export async function writeHashed(handle: FileHandle, source: AsyncIterable<Buffer | Uint8Array>, signal?: AbortSignal): Promise<Sums> {
  const hashing = new Hashing()
  let at = 0
  for await (const piece of source) {
    signal?.throwIfAborted()
    const chunk = Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength)
    hashing.update(chunk)
    for (let off = 0; off < chunk.length; ) {
      const { bytesWritten } = await handle.write(chunk, off, chunk.length - off, at)
      off += bytesWritten
      at += bytesWritten
    }
  }
  return hashing.sums()
}

/** checksums of a whole stream (a read back, or a source before it is sent; `readBack`: size and SHA-256 alone, crc32 '') */
export async function sumsOf(stream: Readable, readBack = false): Promise<Sums> {
  const hashing = new Hashing({ crc32: !readBack })
  for await (const chunk of stream) hashing.update(chunk as Buffer)
  return hashing.sums()
}

export const sameSums = (a: Sums, b: Sums) => a.size === b.size && a.sha256 === b.sha256 && a.crc32 === b.crc32
/** a read-back (size and SHA-256, see CopyFds) against the sums of what was sent */
export const sameContent = (back: Sums, sent: Sums) => back.size === sent.size && back.sha256 === sent.sha256

/** the largest positional read of `readAll` */
const READ_SIZE = 1 << 20

/**
 * The bytes of an opened file from offset 0, by positional reads. Not `createReadStream({ fd })`:
 * a pipeline that fails destroys its streams, and a destroyed fs stream closes its descriptor even
 * with `autoClose: false`, so the handle's own close later hit EBADF (or another file's descriptor).
 * `sizeHint` (the size the file had) keeps the buffers of small files small.
 */
export function readAll(handle: FileHandle, sizeHint?: number): Readable {
  const size = sizeHint === undefined ? READ_SIZE : Math.min(READ_SIZE, Math.max(16_384, sizeHint + 1))
  return Readable.from(
    (async function* () {
      for (let pos = 0; ; ) {
        const buf = Buffer.allocUnsafe(size)
        const { bytesRead } = await handle.read(buf, 0, buf.length, pos)
        if (!bytesRead) return
        pos += bytesRead
        yield buf.subarray(0, bytesRead)
        // a short read of a regular file is its end (one read per small file, not two)
        if (bytesRead < buf.length) return
      }
    })(),
    { objectMode: false },
  )
}

/**
 * CopyFds in the caller's thread (async positional reads and writes): small files, and tools
 * without a Copier. A file that fits one read (as big as readAll's first, which ends on a short
 * read) is read, hashed and written in a plain loop, without readAll's stream and async iterator
 * (their cost per 4 KiB file was several times the hash's); a file longer than that read (grown
 * meanwhile, or large) goes through readAll from offset 0.
 */
export const copyInThread: CopyFds = async (from, to, size, signal, readBack) => {
  if (size < READ_SIZE) {
    const buf = Buffer.allocUnsafe(Math.max(16_384, size + 1))
    const { bytesRead } = await from.read(buf, 0, buf.length, 0)
    if (bytesRead < buf.length) {
      signal?.throwIfAborted()
      const chunk = buf.subarray(0, bytesRead)
      // as below: a read-back (nothing written) needs size and SHA-256 alone
      const hashing = new Hashing({ crc32: !(readBack && !to) })
      hashing.update(chunk)
      if (to) for (let off = 0; off < bytesRead; ) off += (await to.write(chunk, off, bytesRead - off, off)).bytesWritten
      return hashing.sums()
    }
  }
  return to ? writeHashed(to, readAll(from, size), signal) : sumsOf(readAll(from, size), readBack)
}

/**
 * Copies in the kernel (copy_file_range, through libuv's copyfile) work on Linux with /proc: a
 * descriptor is copied through its /proc/self/fd link, which is the very file that was opened
 * (checked) and not a path looked up again.
 */
export const KERNEL_COPY = process.platform === 'linux' && existsSync('/proc/self/fd')
/**
 * Up to this size a file is copied by the kernel (copyKernel): such a copy cannot be stopped half
 * way (a cancelled job waits for it: ~1 s per GiB here), so larger files keep the worker's loop.
 */
export const KERNEL_COPY_UP_TO = 1 << 30
/**
 * From this size: below it the kernel's copy costs more than a read, a hash of a few KiB and a
 * write (libuv's copyfile adds an fstat, an fchmod and a second open; 4 KiB files: 1,504 vs 2,069
 * files/s in one process, bench/README.md).
 */
export const KERNEL_COPY_FROM = 1 << 20
/** whether a file of `size` bytes is copied by the kernel (copyKernel) when it may be */
export const byKernel = (size: number) => KERNEL_COPY && size >= KERNEL_COPY_FROM && size <= KERNEL_COPY_UP_TO

/**
 * The bytes of the open file `from` copied to the new file `to` (created, never over an existing
 * one: COPYFILE_EXCL) by the kernel: no hash and no user-space buffer; libuv removes `to` when the
 * copy fails (ENOSPC). The new file gets `from`'s permission bits. One call of the thread pool.
 */
export async function copyKernel(from: FileHandle, to: string): Promise<void> {
  await copyFile(`/proc/self/fd/${from.fd}`, to, constants.COPYFILE_EXCL)
}

/**
 * From this size a file written (a put from a descriptor, a restore) is flushed as soon as it is
 * written and checked, not with the rest of its batch or page: few such files are in flight at once
 * (no pile of fsyncs holding the thread pool), and the device writes one while the CPU hashes the
 * next. Small files wait for the batch, where the file system joins their flushes.
 */
export const EARLY_SYNC_FROM = 8 << 20

/** a flush started now, settling with its error or null (nothing waits for it to fail meanwhile) */
export const syncStarted = (handle: FileHandle): Promise<unknown> => handle.sync().then(() => null, (err: unknown) => err)

/** a batch's or a page's files flushed (and then named) this many at once: the file system joins their journal commits */
export const SYNCS_AT_ONCE = 8

/** a staged file's bytes on the device: its early flush (syncStarted) awaited, else flushed now; a flush's error is thrown */
export async function flushed(handle: FileHandle, synced: Promise<unknown> | undefined): Promise<void> {
  const early = await synced
  if (early) throw early
  if (!synced) await handle.sync()
}

/** flushes a file or a directory to the device */
export async function fsyncPath(file: string, flags: 'r' | 'r+'): Promise<void> {
  const handle = await open(file, flags)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}
