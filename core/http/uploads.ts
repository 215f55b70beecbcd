import { createWriteStream, type WriteStream } from 'node:fs'
import { readdir, rm, stat } from 'node:fs/promises'
import { once } from 'node:events'
import path from 'node:path'
import type { MamConfig } from '../config.js'
import type { MamContext, UploadedFile } from './context.js'
import { makeDirs } from '../storage/paths.js'
import { MamError } from '../errors.js'

/**
 * The life of an upload's temporary files: written below `<dataDir>/tmp/uploads` while the
 * multipart body is parsed, handed to the handler as `ctx.files`, and removed when the request
 * ends (a handler that keeps a file moves it away first). Files a crashed process left behind are
 * removed at the next start.
 */

export const uploadDirOf = (config: Pick<MamConfig, 'dataDir'>) => path.join(config.dataDir, 'tmp', 'uploads')

const writingUploads = new WeakMap<object, WriteStream[]>()

/**
 * formidable's `fileWriteStreamHandler`: formidable opens a file it has already refused (maxFiles)
 * and unlinks refused ones before they are open; owning the streams lets the request close and
 * remove every one of them (`removeUploads`).
 */
export function uploadStreamOpener(ctx: MamContext): (file: { filepath: string }) => WriteStream {
  const streams: WriteStream[] = []
  writingUploads.set(ctx, streams)
  return (file) => {
    const stream = createWriteStream(file.filepath, { flags: 'wx' })
    // formidable does not listen to a stream it was handed: a failed write (a full disk) would
    // leave a short file that the parse reports as complete
    stream.once('error', (err) => {
      if (!failedUploads.has(ctx)) failedUploads.set(ctx, err)
    })
    streams.push(stream)
    return stream
  }
}

const failedUploads = new WeakMap<object, Error>()

/**
 * After the multipart body was parsed: every upload's temporary file was written whole. Waits for
 * the files to be closed, then throws the first write error (507 for a full disk or a quota).
 */
export async function assertUploadsWritten(ctx: MamContext): Promise<void> {
  const streams = writingUploads.get(ctx) ?? []
  await Promise.all(streams.filter((s) => !s.closed).map((s) => once(s, 'close').catch(() => {})))
  const err = failedUploads.get(ctx) as NodeJS.ErrnoException | undefined
  if (!err) return
  if (err.code === 'ENOSPC' || err.code === 'EDQUOT') throw new MamError('insufficient_storage', 'The upload could not be received: the server\'s disk for uploads is full; nothing was stored')
  throw err
}

/** whether the request opened or collected upload files (only then is there anything to remove) */
export const hasUploads = (ctx: MamContext) => ctx.files.length > 0 || writingUploads.has(ctx)

/** Temp files of an upload: closed (a refused upload leaves streams open) and removed once the request ends. */
export async function removeUploads(ctx: MamContext): Promise<void> {
  const streams = writingUploads.get(ctx) ?? []
  await Promise.all(streams.filter((s) => !s.closed).map((s) => closeStream(s)))
  const paths = new Set([...streams.map((s) => String(s.path)), ...ctx.files.map((f) => f.tempPath)])
  await Promise.all([...paths].map((p) => rm(p, { force: true })))
}

function closeStream(stream: WriteStream): Promise<unknown> {
  const closed = once(stream, 'close').catch(() => {})
  stream.destroy()
  return closed
}

/** formidable's files by field → one list (several files may share a field) */
export function collectFiles(files: Record<string, any> | undefined): UploadedFile[] {
  const out: UploadedFile[] = []
  for (const [field, value] of Object.entries(files ?? {})) {
    for (const f of Array.isArray(value) ? value : [value]) {
      out.push({ field, originalName: f.originalFilename ?? 'upload', tempPath: f.filepath, size: f.size, mimeType: f.mimetype ?? null })
    }
  }
  return out
}

const madeDirs = new Set<string>()
export async function ensureDir(dir: string): Promise<void> {
  if (madeDirs.has(dir)) return
  await makeDirs(dir)
  madeDirs.add(dir)
}

/**
 * Removes temp files a crashed or killed process left in the upload folder. Only files last
 * written before `before` (this process's start): another process sharing the data dir may be
 * writing newer ones right now. Returns how many were removed.
 */
export async function removeStaleUploads(dir: string, before: number): Promise<number> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch {
    return 0
  }
  let removed = 0
  for (const name of names) {
    const file = path.join(dir, name)
    const info = await stat(file).catch(() => undefined)
    if (!info?.isFile() || info.mtimeMs >= before) continue
    await rm(file, { force: true })
    removed++
  }
  return removed
}
