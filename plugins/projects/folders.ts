import { lstat, readdir, realpath } from 'node:fs/promises'
import path from 'node:path'
import { isInside, resolveInside, relativeSegments, conflict, invalidParam, notFound } from '../../core/index.js'
import type { PathMove } from './path-moves.js'
import { makeDirs } from '../../core/index.js'

const exists = (p: string) => lstat(p).then(() => true, () => false)

/**
 * Folder operations inside a project tree. Every client path goes through the storage path module
 * (`resolveInside`), and nothing is overwritten: a clash is a 409 and changes nothing.
 */
export async function createFolder(root: string, relative: string): Promise<string> {
  const target = await resolveInside(root, relative, 'path')
  if (await exists(target)) throw conflict(`"${relative}" exists already`, { errors: [{ param: 'path', message: 'exists already' }] })
  await makeDirs(target)
  return target
}

/** a move the client asked for: `from` and `to` relative to the project folder, and whom a clash or a failure names */
export interface PlannedMove extends PathMove {
  /** the parameter that named the source */
  param: string
  /** the parameter to blame when the target is taken (`name` for a rename) */
  targetParam: string
}

/** `abs` below the real project folder as a relative `/`-path */
const relativeTo = (realRoot: string, abs: string) => path.relative(realRoot, abs).split(path.sep).join('/')

/** renaming a folder inside the project: checked, nothing changed yet */
export async function planRenameFolder(root: string, relative: string, newName: string): Promise<PlannedMove> {
  const source = await resolveInside(root, relative, 'path')
  const realRoot = await realpath(root)
  if (source === realRoot) throw invalidParam('path', 'must name a folder inside the project')
  const [name, ...rest] = relativeSegments(newName, 'name')
  if (!name || rest.length) throw invalidParam('name', 'must be a single folder name, without separators')
  const info = await lstat(source).catch(() => null)
  if (!info) throw notFound('folder', relative)
  if (!info.isDirectory()) throw invalidParam('path', 'is not a folder')
  const target = path.join(path.dirname(source), name)
  if (await exists(target)) throw conflict(`"${name}" exists already beside "${relative}"`, { errors: [{ param: 'name', message: 'exists already' }] })
  return { from: relativeTo(realRoot, source), to: relativeTo(realRoot, target), isFolder: true, param: 'path', targetParam: 'name' }
}

/** moving files and folders into `destination` (a folder, created when missing): every source checked before anything moves */
export async function planMoveContents(root: string, sources: string[], destination: string): Promise<PlannedMove[]> {
  const realRoot = await realpath(root)
  const destDir = destination === '' || destination === '/' ? realRoot : await resolveInside(root, destination, 'destination')
  const destInfo = await lstat(destDir).catch(() => null)
  if (destInfo && !destInfo.isDirectory()) throw invalidParam('destination', 'names a file, not a folder')
  const moves: PlannedMove[] = []
  // sources by path with their parameter, the folders above them, and the targets: a thousand sources cost a thousand lookups, not a million comparisons
  const chosen = new Map<string, string>()
  const above = new Map<string, string>()
  const targets = new Set<string>()
  for (const [i, relative] of sources.entries()) {
    const param = sources.length > 1 ? `source[${i}]` : 'source'
    const source = await resolveInside(root, relative, param)
    if (source === realRoot) throw invalidParam(param, 'must name something inside the project')
    const info = await lstat(source).catch(() => null)
    if (!info) throw notFound('path', relative)
    const target = path.join(destDir, path.basename(source))
    if (target === source) throw invalidParam(param, 'is already in the destination')
    if (isInside(source, destDir)) throw invalidParam('destination', `lies inside ${param}`)
    const ancestors: string[] = []
    for (let dir = path.dirname(source); dir !== realRoot && dir !== path.dirname(dir); dir = path.dirname(dir)) ancestors.push(dir)
    const overlapped = chosen.get(source) ?? above.get(source) ?? ancestors.map((a) => chosen.get(a)).find(Boolean)
    if (overlapped) throw invalidParam(param, `overlaps ${overlapped}`)
    if (targets.has(target) || (await exists(target)))
      throw conflict(`"${path.basename(source)}" exists already in the destination`, { errors: [{ param, message: 'exists already in the destination' }] })
    chosen.set(source, param)
    for (const a of ancestors) above.set(a, param)
    targets.add(target)
    moves.push({ from: relativeTo(realRoot, source), to: relativeTo(realRoot, target), isFolder: info.isDirectory(), param, targetParam: param })
  }
  return moves
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
