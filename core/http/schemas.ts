import { Type, type Static, type TSchema } from 'typebox'

/** Ids are integers in JSON and strings in paths (wire.md); path strings are coerced. */
export const IdParam = Type.Integer({ minimum: 1, maximum: 2147483647 })
export const IdParams = Type.Object({ id: IdParam })

/** a route that takes no parameters besides its path: anything sent is a 422 naming it */
export const NoInput = Type.Object({}, { additionalProperties: false })

/** `true`/`false`, also as the strings clients send (wire.md) */
export const BooleanParam = Type.Boolean()

export const Page = {
  page: Type.Optional(Type.Integer({ minimum: 1 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
}

/**
 * "nil allowed" containers (spec §4.1: `template` is an optional Hash that may be null). A JSON
 * Schema type list rather than a union, so errors name the inner parameter and forms coerce "" to null.
 */
export function Nullable<T extends TSchema>(schema: T) {
  return Type.Unsafe<Static<T> | null>({ ...(schema as object), type: [(schema as any).type, 'null'] })
}

/** a string out of a fixed list, reported as "must be one of: …" */
export function OneOf<T extends string>(values: readonly T[], options: Record<string, unknown> = {}) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...options })
}
