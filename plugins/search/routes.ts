import { Type } from 'typebox'
import { searchServices } from './refs.js'
import type { SearchKey } from './service.js'

import { IdParam, OneOf, invalidParam, type RegisterApi } from '../../core/index.js'
export const SearchInput = Type.Object(
  {
    term: Type.String({ minLength: 1, maxLength: 10_000 }),
    project_id: Type.Optional(IdParam),
    type: Type.Optional(OneOf(['video', 'audio', 'image', 'other'] as const)),
    folder: Type.Optional(Type.String({ maxLength: 4096 })),
    status_flag: Type.Optional(IdParam),
    created_after: Type.Optional(Type.String({ maxLength: 40 })),
    created_before: Type.Optional(Type.String({ maxLength: 40 })),
    page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 200 })),
    after: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
)

/**
 * The `after` cursor: where each list stopped, `[rank, id, top, floor]` of its last row (`a` assets,
 * `p` projects): the exact rank the database gave, the id, and the bounds of the ranking window it
 * lies in (`top` null for the first window, `floor` 0 for the last); a list that ended has no entry.
 */
const cursor = {
  encode: (next: { a?: SearchKey; p?: SearchKey }) => {
    const key = (k?: SearchKey) => k && [k.rank, k.id, k.window.top, k.window.floor]
    return Buffer.from(JSON.stringify({ a: key(next.a), p: key(next.p) })).toString('base64url')
  },
  decode(text: string): { a?: SearchKey; p?: SearchKey } | undefined {
    try {
      const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
      if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined
      const id = (x: unknown) => Number.isSafeInteger(x) && (x as number) > 0
      const key = (k: unknown): SearchKey | undefined | false => {
        if (k === undefined) return undefined
        if (!Array.isArray(k) || k.length !== 4) return false
        const [rank, last, top, floor] = k
        const valid = Number.isFinite(rank) && id(last) && (top === null || id(top)) && (floor === 0 || id(floor)) && (top === null || floor < top)
        return valid ? { rank, id: last, window: { top, floor } } : false
      }
      const [a, p] = [key(v.a), key(v.p)]
      return a === false || p === false || (!a && !p) ? undefined : { a, p }
    } catch {
      return undefined
    }
  },
}

export function registerSearchRoutes(api: RegisterApi) {
  const search = api.use(searchServices.service)
  api.routes.get(
    '/search',
    {
      access: 'authenticated',
      input: SearchInput,
      summary: 'assets and projects by words (prefixes), "phrases", -exclusions and field:value; filters project_id, type, folder, status_flag, created_after/before; by relevance, newest first among equal ranks; keyset paging (after, X-Next-After)',
    },
    async (ctx) => {
      const { term, per_page = 50, page, after, ...filters } = ctx.input
      let keys: { a?: SearchKey; p?: SearchKey } | undefined
      if (after !== undefined && !(keys = cursor.decode(after))) throw invalidParam('after', 'is not a cursor this search gave out (X-Next-After)')
      if (after !== undefined && page !== undefined) throw invalidParam('page', 'goes with offsets; after continues from a cursor (one or the other)')
      const result = await search().search(ctx.user, {
        term,
        ...filters,
        per_page,
        page,
        // a cursor that names one list only: the other list has ended
        afterAsset: keys ? (keys.a ?? 'ended') : undefined,
        afterProject: keys ? (keys.p ?? 'ended') : undefined,
      })
      if (result.next) ctx.set('X-Next-After', cursor.encode(result.next))
      return { assets: result.assets, projects: result.projects }
    },
  )
}
