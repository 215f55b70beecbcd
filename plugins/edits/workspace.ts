import { lstat, readlink, rename, rm, rmdir, symlink } from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { safeName, makeDirs, Type, type MamConfig, type Static } from '../../core/index.js'

/**
 * The file-system side of mounting: symlinks at server-chosen paths. Nothing here removes or
 * replaces anything but a symlink, so a name clash with real files fails instead of deleting them.
 */

/** `plugins.edits`: where the workspaces are */
export const EditsSettings = Type.Object(
  {
    /** absent: `<dataDir>/mounts` (it depends on the data dir, so it has no fixed default) */
    mountRoot: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'folder of the edits\' workspaces (<mountRoot>/<edit name>); default <dataDir>/mounts' })),
  },
  { default: {}, additionalProperties: false },
)
export type EditsSettings = Static<typeof EditsSettings>

/** the folder holding every edit's workspace: the setting, else `<dataDir>/mounts` */
export function mountRootOf(settings: EditsSettings, config: Pick<MamConfig, 'dataDir'>): string {
  return path.resolve(settings.mountRoot || path.join(config.dataDir, 'mounts'))
}

/** <mountRoot>/<edit name>: the folder an edit's SMB share exposes */
export const editFolder = (mountRoot: string, editName: string) => path.join(mountRoot, safeName(editName))

export class LinkClash extends Error {
  readonly permanent = true
}

const info = (p: string) => lstat(p).catch((err) => (err.code === 'ENOENT' ? null : Promise.reject(err)))

/** true when nothing but (possibly) a symlink is at `link`: a mount can go there */
export async function linkSpotFree(link: string): Promise<boolean> {
  const found = await info(link)
  return !found || found.isSymbolicLink()
}

/** makes `link` a symlink to `target`; replaces another symlink atomically, refuses anything else */
export async function ensureLink(link: string, target: string): Promise<void> {
  const found = await info(link)
  if (found && !found.isSymbolicLink()) throw new LinkClash(`${path.basename(link)} exists already and is not a mount; remove it or rename the project`)
  if (found && (await readlink(link)) === target) return
  await makeDirs(path.dirname(link))
  const temporary = `${link}.mamkit-${randomBytes(4).toString('hex')}`
  await symlink(target, temporary, 'dir')
  try {
    await rename(temporary, link)
  } catch (err) {
    await rm(temporary, { force: true })
    throw err
  }
}

/** removes `link` when it is a symlink; then the edit's folder when it became empty */
export async function removeLink(link: string, mountRoot: string): Promise<void> {
  const found = await info(link)
  if (found?.isSymbolicLink()) await rm(link, { force: true })
  const folder = path.dirname(link)
  if (path.dirname(folder) === mountRoot)
    await rmdir(folder).catch((err) => {
      if (!['ENOTEMPTY', 'EEXIST', 'ENOENT'].includes(err.code)) throw err
    })
}
