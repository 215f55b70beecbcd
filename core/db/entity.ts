import type { EntitySchemaMetadata, Opt } from '@mikro-orm/core'

/** Base columns of every entity: integer id and ISO timestamps (wire.md). */
export abstract class BaseEntity {
  id!: number
  createdAt: Opt<Date> = new Date()
  updatedAt: Opt<Date> = new Date()
}

export const baseProperties = {
  id: { type: 'integer', primary: true, autoincrement: true },
  createdAt: { type: 'Date', onCreate: () => new Date() },
  updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
} satisfies EntitySchemaMetadata<any>['properties']

export const iso = (d: Date | number | string | null | undefined): string | null =>
  // a Date (the usual case, every row of a list) is not copied first
  d === null || d === undefined ? null : d instanceof Date ? d.toISOString() : new Date(d).toISOString()
