import { randomBytes } from 'node:crypto'
import { mkdir, open, readdir, realpath, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { EARLY_SYNC_FROM, KERNEL_COPY, SYNCS_AT_ONCE, copyKernel, flushed, fsyncPath, syncStarted, readAll, writeHashed, type CopyPage, type Head, type PagePut, type PutBatch, type Sums, type Target } from './types.js'
import { eachLimit } from '../concurrency.js'

import { MamError, isInside, relativeSegments, type CopyPageResult, type PageFile, type PageOutcome } from '../../../core/index.js'
const PART = '.mamkit-part-'


/** a full disk is the client's business (507), named so; other errors stay what they are */
function diskError(err: unknown, destination: string): unknown {
  const code = (err as NodeJS.ErrnoException)?.code
  if (code === 'ENOSPC' || code === 'EDQUOT') return Object.assign(new MamError('insufficient_storage', `The target ${destination} is full; the partial copy was removed`), { permanent: true })
  return err
}

/**
 * A directory target: a mounted tape library front end, a NAS or a disk. Objects are written to a
 * hidden temporary name, flushed to the device (fsync) and renamed into place (a batch flushes many
 * together, then renames them and flushes their directories), so a crash or a full disk never leaves
 * a partial file under a real name.
 */
export class DiskTarget implements Target {
  readonly kind = 'disk'
  readonly needsSumsFirst = false
  private root?: string
  constructor(private readonly destination: string) {}

  private async base(): Promise<string> {
    if (this.root) return this.root
    await mkdir(this.destination, { recursive: true })
    return (this.root = await realpath(this.destination))
  }

  /** the file of a key: keys are ours, but checked like client paths (no `..`, nothing outside) */
  private async file(key: string): Promise<string> {
    const root = await this.base()
    const file = path.join(root, ...relativeSegments(key, 'key'))
    if (!isInside(root, file)) throw new MamError('internal', `key ${key} leads outside the target`)
    return file
  }

  async put(key: string, source: Readable, sums: Sums, signal?: AbortSignal): Promise<Sums> {
    const batch = this.batch()
    try {
      const sent = await batch.put(key, source, sums, signal)
      const failed = (await batch.commit()).get(key)
      if (failed) throw failed
      return sent
    } finally {
      await batch.abort()
    }
  }

  /** the temporary name beside a key's place, its folder made unless `made` (the folders made by this batch or page) has it */
  private async tempOf(key: string, made: Set<string>): Promise<{ file: string; temp: string }> {
    const file = await this.file(key)
    const dir = path.dirname(file)
    if (!made.has(dir)) {
      await mkdir(dir, { recursive: true })
      made.add(dir)
    }
    return { file, temp: path.join(dir, `${PART}${randomBytes(6).toString('hex')}`) }
  }

  /**
   * Target.putPage: the page's temporaries named beside their places here, then one task of
   * `copyPage` copies, flushes and renames them. A key whose folder cannot be made is left out
   * (not copied: the caller's own path meets the error again and reports it).
   */
  async putPage(files: PagePut[], how: { insideRoot: string; readBack: boolean; copyPage: CopyPage; signal?: AbortSignal }): Promise<PageOutcome[]> {
    return this.runPage(files, how.copyPage, how.signal, { insideRoot: how.insideRoot, place: 'rename', readBack: how.readBack }, async (f, made) => {
      const { file, temp } = await this.tempOf(f.key, made)
      const expectedWhile = f.known ? { size: f.known.size, mtimeMs: f.known.mtimeMs } : undefined
      return { from: f.from, temp, to: file, expected: f.known?.sums ?? null, expectedWhile, reuse: f.reuse }
    })
  }

  /** Target.fetchPage: each object's file copied by `copyPage` to its temporary, checked, flushed and linked */
  async fetchPage(files: Array<{ key: string; temp: string; to: string; expected: Sums }>, copyPage: CopyPage, signal?: AbortSignal): Promise<PageOutcome[]> {
    return this.runPage(files, copyPage, signal, { place: 'link', readBack: false }, async (f) => ({ from: await this.file(f.key), temp: f.temp, to: f.to, expected: f.expected }))
  }

  /** each file's task built (`task`; one that fails is answered not copied), one copyPage for the rest, the answers in the files' order; a page failure (a folder's flush) as a batch commit throws it */
  private async runPage<F>(files: F[], copyPage: CopyPage, signal: AbortSignal | undefined, how: Pick<Parameters<CopyPage>[0], 'insideRoot' | 'place' | 'readBack'>, task: (f: F, made: Set<string>) => Promise<PageFile>): Promise<PageOutcome[]> {
    const made = new Set<string>()
    const tasks: Array<PageFile | null> = []
    for (const f of files) tasks.push(await task(f, made).catch(() => null))
    const r: CopyPageResult = await copyPage({ ...how, files: tasks.filter((t): t is PageFile => t !== null) }, signal)
    if (r.error) throw diskError(Object.assign(new Error(r.error.message), { code: r.error.code }), this.destination)
    let at = 0
    return tasks.map((t) => (t ? r.outcomes[at++] : { copied: false }))
  }

  batch(): PutBatch {
    // key → the temporary file it is written to (still open, for the commit's fsync) and the file it becomes
    const staged = new Map<string, { temp: string; file: string; handle: FileHandle; synced?: Promise<unknown> }>()
    // folders made by this batch already (a page of files mostly shares a few)
    const made = new Set<string>()
    const remove = async (key: string) => {
      const s = staged.get(key)
      staged.delete(key)
      if (!s) return
      await s.synced
      await s.handle.close().catch(() => {})
      await rm(s.temp, { force: true })
    }
    const tempOf = (key: string) => this.tempOf(key, made)
    /**
     * writes one object to a temporary name beside its place, kept open for the commit's fsync;
     * `readBack` (putFile's): the temporary, opened read-write, is read back through the same
     * descriptor right after it was written (no second open and close of the object later)
     */
    const stage = async (key: string, write: (handle: FileHandle) => Promise<Sums>, syncNow = false, readBack?: (handle: FileHandle) => Promise<Sums>): Promise<Sums & { back?: Sums }> => {
      let handle: FileHandle | undefined
      let temp: string | undefined
      try {
        const names = await tempOf(key)
        temp = names.temp
        handle = await open(temp, readBack ? 'wx+' : 'wx')
        const sums: Sums & { back?: Sums } = await write(handle)
        if (readBack) sums.back = await readBack(handle)
        if (staged.has(key)) await remove(key)
        // a large file's flush starts at once (the commit waits for it): the device writes while the next files are hashed
        const synced = syncNow ? syncStarted(handle) : undefined
        staged.set(key, { temp, file: names.file, handle, synced })
        return sums
      } catch (err) {
        await handle?.close().catch(() => {})
        if (handle && temp) await rm(temp, { force: true })
        throw diskError(err, this.destination)
      }
    }
    /** putCopy: the kernel copies into a new temporary, opened then for its fsync (read only: it has the original's mode) and the read-back */
    const stageCopy = async (key: string, from: FileHandle, size: number, signal?: AbortSignal, readBack?: Parameters<NonNullable<PutBatch['putCopy']>>[4]) => {
      signal?.throwIfAborted()
      let handle: FileHandle | undefined
      let temp: string | undefined
      let synced: Promise<unknown> | undefined
      try {
        const names = await tempOf(key)
        temp = names.temp
        await copyKernel(from, temp)
        handle = await open(temp, 'r')
        // read back before its flush starts: an fsync holds one of libuv's 4 threads for as long as the
        // device writes, and the read-back's reads (a worker's too) queue behind it in the same pool
        const back = readBack ? await readBack(handle, null, size, signal, true) : null
        synced = size >= EARLY_SYNC_FROM ? syncStarted(handle) : undefined
        const copied = (await handle.stat()).size
        if (staged.has(key)) await remove(key)
        staged.set(key, { temp, file: names.file, handle, synced })
        return { size: copied, back }
      } catch (err) {
        await synced
        await handle?.close().catch(() => {})
        if (temp) await rm(temp, { force: true })
        throw diskError(err, this.destination)
      }
    }
    return {
      put: (key, source, _sums, signal) =>
        stage(key, (handle) => writeHashed(handle, source, signal)).catch((err) => {
          source.destroy()
          throw err
        }),
      putFile: (key, from, size, copy, signal, readBack) =>
        stage(key, (handle) => copy(from, handle, size, signal), size >= EARLY_SYNC_FROM, readBack && ((handle) => readBack(handle, null, size, signal, true))),
      ...(KERNEL_COPY ? { putCopy: stageCopy } : {}),
      drop: remove,
      commit: async () => {
        const failed = new Map<string, Error>()
        const entries = [...staged]
        staged.clear()
        const dirs = new Set<string>()
        // each file's data flushed, then its name given, several files at once (the file system joins
        // their journal commits; a name waits for its own file's flush only) …
        await eachLimit(entries, SYNCS_AT_ONCE, async ([key, { temp, file, handle, synced }]) => {
          try {
            await flushed(handle, synced)
            await handle.close().catch(() => {})
            await rename(temp, file)
            dirs.add(path.dirname(file))
          } catch (err) {
            failed.set(key, diskError(err, this.destination) as Error)
            await handle.close().catch(() => {})
            await rm(temp, { force: true })
          }
        })
        // … then each directory once, so the renames outlive a crash too
        for (const dir of dirs) await fsyncPath(dir, 'r')
        return failed
      },
      abort: async () => {
        for (const key of [...staged.keys()]) await remove(key)
      },
    }
  }

  async head(key: string): Promise<Head | null> {
    const info = await stat(await this.file(key)).catch(() => null)
    return info?.isFile() ? { size: info.size } : null
  }

  async open(key: string): Promise<FileHandle> {
    return open(await this.file(key), 'r')
  }

  /** the object's bytes in reads of up to 1 MiB (a plain loop of reads: a missing object fails here, not in the stream) */
  async get(key: string): Promise<Readable> {
    const handle = await open(await this.file(key), 'r')
    const { size } = await handle.stat().catch(async (err) => {
      await handle.close()
      throw err
    })
    return Readable.from(
      (async function* () {
        try {
          yield* readAll(handle, size)
        } finally {
          await handle.close()
        }
      })(),
      { objectMode: false },
    )
  }

  async delete(key: string): Promise<void> {
    await unlink(await this.file(key)).catch((err) => {
      if (err.code !== 'ENOENT') throw err
    })
  }

  async *list(prefix: string): AsyncIterable<string> {
    const root = await this.file(prefix)
    const walk = async function* (dir: string, rel: string): AsyncGenerator<string> {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
      for (const e of entries) {
        if (e.name.startsWith(PART)) continue
        const r = rel ? `${rel}/${e.name}` : e.name
        if (e.isDirectory()) yield* walk(path.join(dir, e.name), r)
        else if (e.isFile()) yield r
      }
    }
    for await (const rel of walk(root, '')) yield `${prefix}/${rel}`
  }

  async sweep(prefix: string): Promise<void> {
    const walk = async (dir: string): Promise<void> => {
      for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
        if (e.isDirectory()) await walk(path.join(dir, e.name))
        else if (e.name.startsWith(PART)) await rm(path.join(dir, e.name), { force: true })
      }
    }
    await walk(await this.file(prefix))
  }

  /** removes a whole archive folder (after a move or a cancel) */
  async deletePrefix(prefix: string): Promise<void> {
    await rm(await this.file(prefix), { recursive: true, force: true })
  }

  async close(): Promise<void> {}
}
