import { readdir } from 'node:fs/promises'
import path from 'node:path'
import { raw } from '@mikro-orm/core'
import type { Knex } from '../../core/index.js'

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
/** the same test on `path` for knex queries: `q.orWhereRaw(...pathBelow(prefix))` */
export const pathBelow = (prefix: string): [string, [number, string]] => ['substr(path, 1, ?) = ?', [[...prefix].length + 1, `${prefix}/`]]

/** `folder`, and with `recursive` everything below it, as a knex condition (the same `substr` test as `below`) */
export function inFolder(q: Knex.QueryBuilder, folder: string, recursive: boolean): Knex.QueryBuilder {
  if (!recursive) return q.where('folder', folder)
  if (!folder) return q
  return q.where((w) => w.where('folder', folder).orWhereRaw('substr(folder, 1, ?) = ?', [[...folder].length + 1, `${folder}/`]))
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
