import { lstat, mkdir, readdir, rename } from 'node:fs/promises'
import path from 'node:path'
import { isInside, resolveInside, relativeSegments } from '../../core/storage/paths.js'
import { conflict, invalidParam, notFound } from '../../core/errors.js'

const exists = (p: string) => lstat(p).then(() => true, () => false)

/**
 * Folder operations inside a project tree. Every client path goes through the storage path module
 * (`resolveInside`), and nothing is overwritten: a clash is a 409 and changes nothing.
 */
export async function createFolder(root: string, relative: string): Promise<string> {
  const target = await resolveInside(root, relative, 'path')
  if (await exists(target)) throw conflict(`"${relative}" exists already`, { errors: [{ param: 'path', message: 'exists already' }] })
  await mkdir(target, { recursive: true })
  return target
}

export async function renameFolder(root: string, relative: string, newName: string): Promise<string> {
  const source = await resolveInside(root, relative, 'path')
  if (source === root) throw invalidParam('path', 'must name a folder inside the project')
  const [name, ...rest] = relativeSegments(newName, 'name')
  if (!name || rest.length) throw invalidParam('name', 'must be a single folder name, without separators')
  const info = await lstat(source).catch(() => null)
  if (!info) throw notFound('folder', relative)
  if (!info.isDirectory()) throw invalidParam('path', 'is not a folder')
  const target = path.join(path.dirname(source), name)
  if (await exists(target)) throw conflict(`"${name}" exists already beside "${relative}"`, { errors: [{ param: 'name', message: 'exists already' }] })
  await rename(source, target)
  return target
}

/** moves files and folders into `destination` (a folder, created when missing); checks all before moving any */
export async function moveContents(root: string, sources: string[], destination: string): Promise<string[]> {
  const destDir = destination === '' || destination === '/' ? root : await resolveInside(root, destination, 'destination')
  const moves: Array<[string, string]> = []
  for (const [i, relative] of sources.entries()) {
    const param = sources.length > 1 ? `source[${i}]` : 'source'
    const source = await resolveInside(root, relative, param)
    if (source === root) throw invalidParam(param, 'must name something inside the project')
    if (!(await exists(source))) throw notFound('path', relative)
    const target = path.join(destDir, path.basename(source))
    if (target === source) throw invalidParam(param, 'is already in the destination')
    if (isInside(source, destDir)) throw invalidParam('destination', `lies inside ${param}`)
    if ((await exists(target)) || moves.some(([, t]) => t === target))
      throw conflict(`"${path.basename(source)}" exists already in the destination`, { errors: [{ param, message: 'exists already in the destination' }] })
    moves.push([source, target])
  }
  await mkdir(destDir, { recursive: true })
  for (const [source, target] of moves) await rename(source, target)
  return moves.map(([, t]) => t)
}

/** bytes of all regular files below `dir` (no symlinks followed) */
export async function treeSize(dir: string): Promise<number> {
  let total = 0
  const walk = async (d: string) => {
    for (const entry of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) await walk(p)
      else if (entry.isFile()) total += (await lstat(p)).size
    }
  }
  await walk(dir)
  return total
}
