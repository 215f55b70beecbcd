import { EntitySchema, type Opt } from '@mikro-orm/core'
import { BaseEntity, baseProperties } from '../../core/index.js'
import type { SubstitutionPattern } from './substitution.js'

export class Template extends BaseEntity {
  name!: string
  templateType!: string
  position: Opt<number> = 0
  substitutionPatterns: Opt<SubstitutionPattern[]> = []
  /** folder name below the templates root; follows the template's name */
  folder!: string
}

export const TemplateSchema = new EntitySchema<Template, BaseEntity>({
  class: Template,
  tableName: 'templates',
  properties: {
    ...baseProperties,
    name: { type: 'string', length: 200, unique: true },
    templateType: { type: 'string', length: 100 },
    position: { type: 'integer', default: 0 },
    substitutionPatterns: { type: 'json' },
    folder: { type: 'string', length: 255, unique: true },
  },
})
