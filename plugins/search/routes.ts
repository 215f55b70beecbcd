import { Type } from 'typebox'
import { searchServices } from './refs.js'

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

/** the `after` cursor: the last asset and project ids of the page before */
const cursor = {
  encode: (next: { a?: number; p?: number }) => Buffer.from(JSON.stringify(next)).toString('base64url'),
  decode(text: string): { a?: number; p?: number } | undefined {
    try {
      const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
      const ok = (n: unknown) => n === undefined || (Number.isInteger(n) && (n as number) > 0)
      return v && typeof v === 'object' && ok(v.a) && ok(v.p) ? v : undefined
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
      summary: 'assets and projects by words (prefixes), "phrases", -exclusions and field:value; filters project_id, type, folder, status_flag, created_after/before; keyset paging (after, X-Next-After)',
    },
    async (ctx) => {
      const { term, per_page = 50, page, after, ...filters } = ctx.input
      let keys: { a?: number; p?: number } | undefined
      if (after !== undefined && !(keys = cursor.decode(after))) throw invalidParam('after', 'is not a cursor this search gave out (X-Next-After)')
      if (after !== undefined && page !== undefined) throw invalidParam('page', 'goes with offsets; after continues from a cursor (one or the other)')
      const result = await search().search(ctx.user, {
        term,
        ...filters,
        per_page,
        page,
        // a cursor that names one list only: the other list has ended
        afterAsset: keys ? (keys.a ?? 0) || -1 : undefined,
        afterProject: keys ? (keys.p ?? 0) || -1 : undefined,
      })
      if (result.next) ctx.set('X-Next-After', cursor.encode(result.next))
      return { assets: result.assets, projects: result.projects }
    },
  )
}
