import { randomBytes } from 'node:crypto'
import { rm, symlink } from 'node:fs/promises'
import path from 'node:path'
import { MamError, coreServices, permanentError, openInside, type OpenedFile, type ServiceRef } from '../../core/index.js'
import { projectServices } from '../projects/index.js'
import type { Asset } from './entities.js'
import { makeDirs } from '../../core/index.js'

/** An asset's original, opened and checked; read it through `handle` or `toolPath()`, never by its name. */
export interface Original extends OpenedFile {
  /**
   * A path for ffmpeg, ffprobe and sharp: a private symlink, with the original's extension (format
   * probes use it), to the opened descriptor. Made on first call, removed when the original closes.
   */
  toolPath(): Promise<string>
  /** the tool path once made */
  linked(): string | undefined
}

export const describeAsset = (asset: Pick<Asset, 'id' | 'path'>) => `asset ${asset.id} (${asset.path})`

/** a request's or job's context (or anything else that resolves services by ref) */
type Resolver = { resolve<T>(ref: ServiceRef<T>): T }
/**
 * @deprecated a context typed with the legacy string overload only (editor-projects' service still
 * is): accepted until its callers are typed by ref. It is called with refs, as every real context takes.
 */
type LegacyResolver = { resolve<T = any>(name: string): T }
type AnyResolver = Resolver | LegacyResolver

/**
 * Opens an asset's original; the caller closes it (`withOriginal` does). Every read of an original
 * (analysis, proxies, hashing, downloads) goes through here: the file is opened inside its project's
 * folder with `openInside`, so a symlink planted in its place is refused with 403 (`permanent`: jobs
 * fail at once, naming the asset) and the bytes read are those of the file that was checked. A
 * missing file is a permanent error marked `offline`.
 */
export async function openOriginal(context: AnyResolver, asset: Asset): Promise<Original> {
  const ctx = context as Resolver
  const root = ctx.resolve(projectServices.service).pathOf(asset.project)
  const opened = await openInside(root, asset.path, describeAsset(asset)).catch((err) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR')
      throw Object.assign(permanentError(`The original of ${describeAsset(asset)} is offline: it is not on its storage`), { offline: true })
    // a file system error names the server's path; job errors are shown to users
    if (!(err instanceof MamError) && typeof err.code === 'string') throw Object.assign(new Error(`The original of ${describeAsset(asset)} cannot be read (${err.code})`), { code: err.code })
    throw err
  })
  let link: string | undefined
  let closing: Promise<void> | undefined
  return {
    ...opened,
    async toolPath() {
      if (link) return link
      const dir = path.join(ctx.resolve(coreServices.config).dataDir, 'tmp', 'originals')
      await makeDirs(dir)
      const candidate = path.join(dir, `${randomBytes(8).toString('hex')}${path.extname(asset.name).toLowerCase()}`)
      await symlink(opened.descriptorPath, candidate)
      return (link = candidate)
    },
    linked: () => link,
    close() {
      closing ??= (async () => {
        if (link) await rm(link, { force: true })
        await opened.close()
      })()
      return closing
    },
  }
}

/**
 * Opens an asset's original for `use` and closes it afterwards, whatever happens. An error that names
 * the private tool path (ffmpeg's message) names the asset's path instead: job errors are shown to users.
 */
export async function withOriginal<T>(ctx: AnyResolver, asset: Asset, use: (original: Original) => Promise<T>): Promise<T> {
  const original = await openOriginal(ctx, asset)
  try {
    return await use(original)
  } catch (err) {
    const link = original.linked()
    if (link && err instanceof Error) err.message = err.message.split(link).join(asset.path)
    throw err
  } finally {
    await original.close()
  }
}
