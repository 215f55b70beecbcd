import type { Knex } from '../../core/index.js'
import type { PathMove, PathMoveHook } from '../projects/index.js'
import { folderOf, pathBelow } from './files.js'

const BATCH = 200
const chars = (s: string) => [...s].length

/**
 * Asset rows follow folder operations of the projects plugin: the asset keeps its id, description,
 * hashes, proxies (stored by uuid) and shares; only `path`, `folder` and `name` change. Files move
 * in one statement per 200, a folder with everything below it in one statement.
 */
export const assetPathMoves: PathMoveHook = {
  async occupied(knex, projectId, moves) {
    const taken: string[] = []
    for (let i = 0; i < moves.length; i += BATCH) {
      const batch = moves.slice(i, i + BATCH)
      const rows: Array<{ path: string }> = await knex('assets')
        .where('project_id', projectId)
        .where((q) => {
          q.whereIn('path', batch.map((m) => m.to))
          for (const m of batch.filter((m) => m.isFolder)) q.orWhereRaw(...pathBelow(m.to))
        })
        .select('path')
      for (const m of batch) if (rows.some((r) => r.path === m.to || (m.isFolder && r.path.startsWith(`${m.to}/`)))) taken.push(m.to)
    }
    return taken
  },

  async moved(trx, projectId, moves) {
    const now = new Date()
    const files = moves.filter((m) => !m.isFolder)
    for (let i = 0; i < files.length; i += BATCH) await moveFiles(trx, projectId, files.slice(i, i + BATCH), now)
    for (const m of moves.filter((m) => m.isFolder)) await moveFolder(trx, projectId, m, now)
  },
}

/** `case path when from₁ then to₁ … end`: every SET of one UPDATE reads the old row */
function byPath(trx: Knex, moves: PathMove[], value: (m: PathMove) => string) {
  return trx.raw(`case path ${moves.map(() => 'when ? then ?').join(' ')} end`, moves.flatMap((m) => [m.from, value(m)]))
}

function moveFiles(trx: Knex, projectId: number, moves: PathMove[], now: Date) {
  return trx('assets')
    .where('project_id', projectId)
    .whereIn('path', moves.map((m) => m.from))
    .update({
      path: byPath(trx, moves, (m) => m.to),
      folder: byPath(trx, moves, (m) => folderOf(m.to)),
      name: byPath(trx, moves, (m) => m.to.slice(m.to.lastIndexOf('/') + 1)),
      updated_at: now,
    })
}

/** `from/…` becomes `to/…` in `path` and `folder` (substr, not LIKE: see `below` in files.ts) */
function moveFolder(trx: Knex, projectId: number, m: PathMove, now: Date) {
  const rest = chars(m.from) + 1
  return trx('assets')
    .where('project_id', projectId)
    .whereRaw('substr(path, 1, ?) = ?', [rest, `${m.from}/`])
    .update({
      path: trx.raw('cast(? as text) || substr(path, ?)', [m.to, rest]),
      folder: trx.raw('case when folder = ? then cast(? as text) else cast(? as text) || substr(folder, ?) end', [m.from, m.to, m.to, rest]),
      updated_at: now,
    })
}
