import { copyFile, lstat, mkdir, readdir, rename, rm } from 'node:fs/promises'
import path from 'node:path'
import { raw } from '@mikro-orm/core'
import type { Knex } from '../../core/db/orm.js'

export const isHidden = (name: string) => name.startsWith('.')

/** `a/b/c.mov` → `a/b`, `c.mov` → '' */
export const folderOf = (relative: string) => {
  const i = relative.lastIndexOf('/')
  return i < 0 ? '' : relative.slice(0, i)
}

/**
 * Where `column` lies below the folder `prefix` (`prefix/…`). Not LIKE: SQLite's LIKE folds ASCII
 * case (`Media/%` matched `media/…`) and, without an ESCAPE clause, took `my\_f/%` literally and
 * matched nothing. substr compares exactly in SQLite and PostgreSQL alike.
 */
export const below = (column: 'path' | 'folder', prefix: string) => ({
  [raw((alias: string) => `substr(${alias}.${column}, 1, ${[...prefix].length + 1}) = ?`, [`${prefix}/`])]: [],
})

/** `folder`, and with `recursive` everything below it, as a knex condition (the same `substr` test as `below`) */
export function inFolder(q: Knex.QueryBuilder, folder: string, recursive: boolean): Knex.QueryBuilder {
  if (!recursive) return q.where('folder', folder)
  if (!folder) return q
  return q.where((w) => w.where('folder', folder).orWhereRaw('substr(folder, 1, ?) = ?', [[...folder].length + 1, `${folder}/`]))
}

/** `clip.mov` → `clip (2).mov` … the first name not taken in `dir` */
export async function freeName(dir: string, name: string, taken: Set<string> = new Set()): Promise<string> {
  const ext = path.extname(name)
  const base = name.slice(0, name.length - ext.length)
  for (let n = 1; ; n++) {
    const candidate = n === 1 ? name : `${base} (${n})${ext}`
    if (taken.has(candidate)) continue
    if (!(await lstat(path.join(dir, candidate)).then(() => true, () => false))) return candidate
  }
}

/** rename, or copy and remove across file systems (uploads land in the data dir, storages may be elsewhere) */
export async function moveFile(from: string, to: string): Promise<void> {
  await mkdir(path.dirname(to), { recursive: true })
  try {
    await rename(from, to)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err
    await copyFile(from, to)
    await rm(from, { force: true })
  }
}

/** every regular file below `root` as a relative `/`-path; hidden entries (trash, proxies) are skipped */
export async function* walkFiles(root: string, relative = ''): AsyncGenerator<string> {
  const entries = await readdir(path.join(root, relative), { withFileTypes: true }).catch(() => [])
  entries.sort((a, b) => (a.name < b.name ? -1 : 1))
  for (const entry of entries) {
    if (isHidden(entry.name)) continue
    const rel = relative ? `${relative}/${entry.name}` : entry.name
    if (entry.isDirectory()) yield* walkFiles(root, rel)
    else if (entry.isFile()) yield rel
  }
}
