import { link, mkdir, open, rename, rmdir, unlink } from 'node:fs/promises'

/**
 * Name claims that never replace anything (SECURITY.md: "check if free, then rename" loses data
 * under concurrency, because rename() replaces). Each throws EEXIST when `to` is taken.
 */

const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EMLINK'])

/**
 * Gives the file `from` the second name `to`: a hard link, so `from` stays until the caller removes
 * it. On a file system without hard links the name is claimed with an exclusive create and `from`
 * is renamed over that placeholder instead: then `from` is gone (`'moved'`).
 */
export async function linkExclusive(from: string, to: string): Promise<'linked' | 'moved'> {
  try {
    await link(from, to)
    return 'linked'
  } catch (err) {
    if (!NO_HARD_LINKS.has((err as NodeJS.ErrnoException).code ?? '')) throw err
  }
  await (await open(to, 'wx')).close()
  await rename(from, to)
  return 'moved'
}

/**
 * Moves a file or folder to a name nobody has. A file is linked under the new name, then the old
 * name removed (between the two, both names are the same inode); a folder claims the name with an
 * exclusive mkdir, and rename then replaces that empty folder.
 */
export async function moveExclusive(from: string, to: string, isFolder: boolean): Promise<void> {
  if (!isFolder) {
    if ((await linkExclusive(from, to)) === 'linked') await unlink(from)
    return
  }
  await mkdir(to)
  try {
    await rename(from, to)
  } catch (err) {
    await rmdir(to).catch(() => {})
    throw err
  }
}
