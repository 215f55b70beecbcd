import type { Stats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { InsideRoot, MamError, openInside } from '../../core/index.js'
import { eachLimit, retryTransient } from './concurrency.js'
import { compareInThread, type CompareFds } from './compare.js'
import { byKernel, copyInThread, readAll, sameContent, sameSums, sumsOf, writeHashed, type CopyFds, type CopyPage, type Head, type Sums, type Target } from './targets/types.js'

export type TransmissionCheck = 'none' | 'size' | 'checksum' | 'fingerprint'

/** a copy failed in a way this file alone suffers (recorded on it, the rest goes on) */
export class FileError extends Error {}

/** what is recorded on the file and lets the others go on: our FileError, a refused path (403), a full target (507) */
export const isFileFailure = (err: unknown) => err instanceof FileError || (err instanceof MamError && [403, 507].includes(err.status))

/** files copied (and read back) at once: small files are latency-bound, large ones stream 1 MiB reads */
export const PARALLEL = 4

/**
 * From this size a fingerprint check compares the copy with its original instead of hashing it
 * (the Copier's worker threshold, IN_THREAD_BELOW): below it, SHA-256 of the copy (a few µs for
 * 4 KiB) costs less than opening the original again and reading it too.
 */
export const COMPARE_FROM = 1 << 20

/** the original a copy was made from, for a fingerprint check by comparison (disk targets, COMPARE_FROM and up) */
export interface Original {
  root: string
  path: string
  /** the original's stats right after it was copied (fstat): a change since is a failed verification */
  stats: Stats
  compare: CompareFds
}

/**
 * Verifies an object on the target against the source's checksums: `size` asks the target for the
 * object's size, `checksum` adds the checksums stored with it (S3 metadata; a disk target has none
 * and keeps them in the manifest), `fingerprint` reads the object back (1 MiB reads) and either
 * compares it with its `original`, read again (a disk target's file of COMPARE_FROM or more, when
 * the original is given: see verifyByComparison), or hashes it (a disk target's file by
 * descriptor through `copy`: in a worker thread when that is the Copier's; S3 as its stream).
 * Releasing an original always needs at least the size check, whatever the strategy says.
 */
export async function verify(target: Target, key: string, sums: Sums, check: TransmissionCheck, signal?: AbortSignal, copy: CopyFds = copyInThread, original?: Original): Promise<void> {
  const head = await target.head(key)
  if (!head) throw new FileError(`the copy of ${key} is missing on the target`)
  if (head.size !== sums.size) throw new FileError(`the copy of ${key} has ${head.size} bytes, the original ${sums.size}`)
  // S3: our metadata, whatever the check; `fingerprint` reads the object back too (below)
  if (target.kind === 's3') verifyS3(key, head, sums)
  // `none` checks the size too: an original is never released on a copy not seen whole
  if (check === 'size' || check === 'none') return
  if (head.sha256 !== undefined && head.sha256 !== sums.sha256) throw new FileError(`the copy of ${key} carries checksum ${head.sha256}, the original has ${sums.sha256}`)
  if (check === 'checksum') return
  if (original && target.open && head.size >= COMPARE_FROM) return verifyByComparison(target, key, sums, original, signal)
  // the object's bytes read back and hashed: size and SHA-256 against what was sent (equal SHA-256, equal bytes)
  const back = await readObject(target, key, null, head.size, copy, signal, true)
  if (!sameContent(back, sums)) throw new FileError(`the copy of ${key} read back hashes to ${back.sha256} (${back.size} bytes), the original to ${sums.sha256} (${sums.size} bytes)`)
}

/**
 * Every check on S3, `none` to `fingerprint`: the object must carry our checksums (metadata) and
 * they must be the source's. The target sets them only once every byte is up and they are the
 * checksums of the bytes sent, hashed on the way (S3Target.put); each part's bytes were checked by
 * the server as they arrived, against the SHA-256 its request is signed with, computed from the
 * very buffer sent. So matching metadata says the server received exactly the bytes whose SHA-256
 * is `sums.sha256`, and an object without them (an upload a crash interrupted before its metadata
 * was set) or with others (another version of the file) is never trusted. `fingerprint` (the
 * default) reads the object back as well, before the original may be released: what the store
 * returns, not only what it acknowledged (that GET costs ~40 % of the upload's time on RGW here,
 * bench/README.md; `checksum` is the check without it).
 */
function verifyS3(key: string, head: Head, sums: Sums): void {
  if (head.sha256 === undefined || head.crc32 === undefined) throw new FileError(`the copy of ${key} carries no checksums: its upload did not finish; it is copied again`)
  if (head.sha256 !== sums.sha256 || head.crc32 !== sums.crc32) throw new FileError(`the copy of ${key} carries checksum ${head.sha256} (CRC-32 ${head.crc32}), the original has ${sums.sha256} (${sums.crc32})`)
}

/**
 * A fingerprint check without a second hash: the copy pass hashed the very bytes it wrote (the
 * stored SHA-256), so a copy equal byte for byte to its original, which has not changed since that
 * pass (fstat: size, mtime, ctime), holds those bytes. The original is opened again inside its root
 * and both files are read in 1 MiB positional reads and compared (`compare`: in a worker thread when
 * it is the Copier's). A difference, or an original that changed or vanished meanwhile, fails the
 * verification like a hash mismatch (FileError: recorded on the file, nothing released).
 */
async function verifyByComparison(target: Target, key: string, sums: Sums, original: Original, signal?: AbortSignal): Promise<void> {
  const opened = await openInside(original.root, original.path, `file ${original.path}`).catch((err) => {
    if (err.code === 'ENOENT') throw new FileError(`${original.path} vanished before its copy was verified`)
    if (err instanceof MamError) throw new FileError(err.message)
    throw err
  })
  try {
    const changedSince = () => new FileError(`${original.path} changed after it was copied, before its copy was verified; it is copied again on the next run`)
    if (changed(original.stats, opened.stats)) throw changedSince()
    const copy = await target.open!(key)
    let got: { size: number; differsAt: number }
    try {
      got = await original.compare(opened.handle, copy, signal)
    } finally {
      await copy.close()
    }
    if (got.differsAt >= 0) {
      // written to while it was compared: said as such (the copy may well be fine)
      if (changed(original.stats, await opened.handle.stat())) throw changedSince()
      throw new FileError(`the copy of ${key} read back differs from the original at byte ${got.differsAt} (the original has ${sums.size} bytes, SHA-256 ${sums.sha256})`)
    }
  } finally {
    await opened.close()
  }
}

/**
 * An object's bytes, hashed, and written to `to` (a restore) or only read (`to` null: a read-back):
 * a disk target's file by descriptor through `copy` (in a worker thread when that is the Copier's),
 * closed once the copy has settled; any other target's as its stream.
 */
export async function readObject(target: Target, key: string, to: FileHandle | null, size: number, copy: CopyFds, signal?: AbortSignal, readBack = false): Promise<Sums> {
  if (!target.open) {
    const body = await target.get(key, signal)
    return to ? writeHashed(to, body, signal) : sumsOf(body, readBack)
  }
  const from = await target.open(key)
  try {
    return await copy(from, to, size, signal, readBack)
  } finally {
    await from.close()
  }
}

/** one file to copy: read from `path` inside `root`, written to `key` */
export interface SourceFile<T> {
  item: T
  root: string
  path: string
  key: string
  /** checksums known before (the asset's), valid while the file has this size and modification time (ms) */
  known?: { sums: Sums; size: number; mtimeMs: number } | null
  /** the size it had when it was listed: a large file is not tried in a page task (see CopyOptions.copyPage) */
  size?: number
}

/** a verified copy (`sums` of the bytes sent; `size` and `mtimeMs` the original had), or why this file was not copied */
export type Copied<T> = { item: T; sums: Sums; size: number; mtimeMs: number; reused: boolean; error?: undefined } | { item: T; error: Error }

export interface CopyOptions {
  check: TransmissionCheck
  signal: AbortSignal
  /** a copy already on the target that checks out is kept (a rerun after a crash); needs known checksums */
  reuse: boolean
  /** the one pass over each file (Copier.copy: large files in worker threads); in this thread without one */
  copy?: CopyFds
  /** a fingerprint check's comparison of a large copy with its original (Copier.compare); in this thread without one */
  compare?: CompareFds
  /** small files a page at a time in one worker task (Copier.copyPage, on targets with putPage); one at a time without */
  copyPage?: CopyPage
  onRetry?: (err: unknown, what: string) => void
  /** false: never copy by the kernel (putCopy), known checksums or not (tests, the bench's A/B) */
  kernel?: boolean
}

/** size, modification and change time (to the sub-microsecond the stat gives) */
const changed = (a: Stats, b: Stats) => a.size !== b.size || a.mtimeMs !== b.mtimeMs || a.ctimeMs !== b.ctimeMs

/**
 * Copies files to a target in one pass each and verifies them: every file is opened inside its root
 * (never a symlink out of it; InsideRoot: each root and folder resolved once per call) and streamed
 * through the hasher into one batch of the target (a few at once), so the bytes sent are the bytes
 * hashed; the original must be unchanged afterwards (size, modification and change time, and its
 * known checksums). A target that stores the checksums with the object (S3) has the file hashed
 * first when they are not known. The batch is then committed (durable: see PutBatch), and only then
 * each copy is verified per `check` (unless it was read back already), a few read-backs at once. Transient target errors are retried per file with a bounded backoff.
 *
 * Per-file failures (isFileFailure) come back in the list; any other error is thrown once nothing
 * is in flight any more, with the batch's uncommitted objects removed.
 */
export async function copyVerified<T>(target: Target, files: Array<SourceFile<T>>, options: CopyOptions): Promise<Array<Copied<T>>> {
  const { check, signal } = options
  const out: Array<Copied<T>> = []
  const sent: Array<{ file: SourceFile<T>; sums: Sums; size: number; mtimeMs: number; stats: Stats; readBack: boolean }> = []
  const batch = target.batch()
  const retry = <R>(what: string, fn: () => Promise<R>) => retryTransient(fn, { signal, onRetry: (err) => options.onRetry?.(err, what) })
  const roots = new Map<string, Promise<InsideRoot>>()
  const insideOf = (root: string) => {
    let inside = roots.get(root)
    if (!inside) roots.set(root, (inside = InsideRoot.of(root)))
    return inside
  }
  try {
    const rest = options.copyPage && target.putPage ? await copyPaged(target, files, insideOf, options, out) : files
    await eachLimit(rest, PARALLEL, async (file) => {
      try {
        const copied = await retry(`copy of ${file.path}`, () => copyOne(target, batch, file, insideOf, options))
        if (copied.reused) out.push({ item: file.item, sums: copied.sums, size: copied.size, mtimeMs: copied.mtimeMs, reused: true })
        else sent.push({ file, ...copied })
      } catch (err) {
        if (signal.aborted || !isFileFailure(err)) throw err
        out.push({ item: file.item, error: err as Error })
      }
    })
    const failed = await batch.commit()
    for (const err of failed.values()) if (!isFileFailure(err)) throw err
    const compare = options.compare ?? compareInThread
    await eachLimit(sent, PARALLEL, async ({ file, sums, size, mtimeMs, stats, readBack }) => {
      try {
        const err = failed.get(file.key)
        if (err) throw err
        // nothing below `none`: a copy must at least have the size of its original before anything is released
        // a large copy on disk is compared with its original (read again) rather than hashed a second time;
        // a copy read back through its temporary's descriptor (copyOne: size and SHA-256) is verified
        // already: the commit flushed that very file and renamed it into place
        if (!readBack) {
          const original: Original = { root: file.root, path: file.path, stats, compare }
          await retry(`verification of ${file.key}`, () => verify(target, file.key, sums, check, signal, options.copy, original))
        }
        out.push({ item: file.item, sums, size, mtimeMs, reused: false })
      } catch (err) {
        if (signal.aborted || !isFileFailure(err)) throw err
        out.push({ item: file.item, error: err as Error })
      }
    })
    return out
  } finally {
    await batch.abort()
  }
}

/** a file listed smaller than this is tried in a page task (CopyOptions.copyPage, a restore's fetchPage); the Copier's own limit decides for files listed without a size */
export const PAGED_BELOW = COMPARE_FROM

/**
 * copyVerified's small files (by their listed size), each root's in one page task of the target
 * (Target.putPage): read, hashed, written, read back (fingerprint) or sized, flushed and named in a
 * worker, each path checked in its folder (InsideRoot.pathOf) here first. The copies made are
 * verified and durable (pushed to `out`); the files answered otherwise (a changed, missing or large
 * original, a symbolic link, a full disk …) are handed back for copyOne, which meets the condition
 * again and reports it as before.
 */
async function copyPaged<T>(target: Target, files: Array<SourceFile<T>>, insideOf: (root: string) => Promise<InsideRoot>, options: CopyOptions, out: Array<Copied<T>>): Promise<Array<SourceFile<T>>> {
  const rest: Array<SourceFile<T>> = []
  const byRoot = new Map<string, Array<{ file: SourceFile<T>; from: string }>>()
  for (const file of files) {
    if ((file.size ?? 0) >= PAGED_BELOW) {
      rest.push(file)
      continue
    }
    // a folder missing or leading outside: copyOne says so as it always did
    const from = await insideOf(file.root).then((inside) => inside.pathOf(file.path, `file ${file.path}`)).catch(() => null)
    if (from === null) rest.push(file)
    else if (byRoot.has(file.root)) byRoot.get(file.root)!.push({ file, from })
    else byRoot.set(file.root, [{ file, from }])
  }
  for (const [root, page] of byRoot) {
    const insideRoot = (await insideOf(root)).realRoot
    const outcomes = await target.putPage!(
      page.map(({ file, from }) => ({ key: file.key, from, known: file.known, reuse: options.reuse })),
      { insideRoot, readBack: options.check === 'fingerprint', copyPage: options.copyPage!, signal: options.signal },
    )
    options.signal.throwIfAborted()
    page.forEach(({ file }, i) => {
      const o = outcomes[i]
      if (o.copied) out.push({ item: file.item, sums: { size: o.sums.size, sha256: o.sums.sha256!, crc32: o.sums.crc32! }, size: o.size, mtimeMs: o.mtimeMs, reused: o.reused })
      else rest.push(file)
    })
  }
  return rest
}

async function copyOne<T>(target: Target, batch: ReturnType<Target['batch']>, file: SourceFile<T>, insideOf: (root: string) => Promise<InsideRoot>, options: CopyOptions): Promise<{ sums: Sums; size: number; mtimeMs: number; stats: Stats; reused: boolean; readBack: boolean }> {
  const opened = await insideOf(file.root).then((inside) => inside.open(file.path, `file ${file.path}`)).catch((err) => {
    if (err.code === 'ENOENT') throw new FileError(`${file.path} vanished before it was copied`)
    if (err instanceof MamError) throw new FileError(err.message)
    throw err
  })
  try {
    const before = opened.stats
    const size = opened.stats.size
    const mtimeMs = Math.floor(opened.stats.mtimeMs)
    const known = file.known && file.known.size === size && file.known.mtimeMs === mtimeMs ? file.known.sums : null
    // S3 metadata is set when the upload starts: without known checksums the file is read twice there
    const copy = options.copy ?? copyInThread
    const sums = known ?? (target.needsSumsFirst ? await copy(opened.handle, null, size, options.signal) : null)
    if (options.reuse && sums) {
      // a rerun after a crash: a copy that is there and checks out is not sent again
      const there = await target.head(file.key)
      if (there && there.size === sums.size && (await verify(target, file.key, sums, options.check, options.signal, copy).then(() => true, () => false)))
        return { sums, size, mtimeMs, stats: before, reused: true, readBack: false }
    }
    if (known && batch.putCopy && byKernel(size) && options.kernel !== false) {
      // checksums known (the asset's, for this size and modification time): the kernel copies the
      // file, nothing hashes it on the way; `checksum` and `fingerprint` then read the copy back
      // (SHA-256) against the known checksums, `size` and `none` only check its size (verify)
      const proves = options.check === 'checksum' || options.check === 'fingerprint'
      const got = await batch.putCopy(file.key, opened.handle, size, options.signal, proves ? copy : undefined)
      const after = await opened.handle.stat()
      if (changed(before, after) || got.size !== size) {
        await batch.drop(file.key)
        throw new FileError(`${file.path} changed while it was copied; it is copied again on the next run`)
      }
      if (got.back && !sameContent(got.back, known)) {
        await batch.drop(file.key)
        throw new FileError(`the copy of ${file.key} read back hashes to ${got.back.sha256} (${got.back.size} bytes), the checksums recorded for ${file.path} are ${known.sha256} (${known.size} bytes); it is copied again on the next run`)
      }
      return { sums: known, size, mtimeMs, stats: after, reused: false, readBack: proves }
    }
    // a disk target takes the file by descriptor (one pass in a worker); S3 streams it through its upload
    // a fingerprint check of a small file on disk: the temporary is read back through its own
    // descriptor right after it was written (SHA-256 of the bytes in it, and their count), instead
    // of the object being opened again after the commit
    const backNow = options.check === 'fingerprint' && size < COMPARE_FROM && !!batch.putFile
    const { back, ...got }: Sums & { back?: Sums } = batch.putFile ? await batch.putFile(file.key, opened.handle, size, copy, options.signal, backNow ? copy : undefined) : await batch.put(file.key, readAll(opened.handle, size), sums, options.signal)
    const after = await opened.handle.stat()
    if (changed(before, after) || got.size !== size || (sums && !sameSums(got, sums))) {
      await batch.drop(file.key)
      throw new FileError(`${file.path} changed while it was copied; it is copied again on the next run`)
    }
    if (backNow && (!back || !sameContent(back, got))) {
      await batch.drop(file.key)
      throw new FileError(`the copy of ${file.key} read back hashes to ${back?.sha256} (${back?.size} bytes), the original to ${got.sha256} (${got.size} bytes); it is copied again on the next run`)
    }
    return { sums: got, size, mtimeMs, stats: after, reused: false, readBack: backNow }
  } finally {
    await opened.close()
  }
}
