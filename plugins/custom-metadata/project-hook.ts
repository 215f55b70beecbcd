import type { ProjectCreateHook } from '../projects/index.js'
import type { NewProject } from '../projects/index.js'
import type { Change, CustomMetadataService } from './service.js'

import { invalid, safeName, type ParamError } from '../../core/index.js'

const PREPARED_KEY = 'custom-metadata'
/**
 * Custom metadata on project creation (`custom_metadata` of POST /projects): keys naming a field of
 * the project sets become values, written in the transaction that commits the project; other keys
 * stay in the project's free-form `custom_metadata` as before. Mandatory fields must be given
 * (generator fields take their next value); fields flagged use_in_project_name compose the name.
 */
export function projectCreateHook(service: CustomMetadataService): ProjectCreateHook {
  // kept in the input (JSON, with the creation's journal entry): a repair after a crash applies them too
  const pending = (input: NewProject) => (input.prepared?.[PREPARED_KEY] as Change[] | undefined) ?? []
  return {
    async prepare(em, principal, input) {
      const knex = em.getKnex()
      const owner = { type: 'project' as const, id: 0 }
      const fields = await service.applicableFields(knex, owner)
      if (!fields.length) return
      const given = input.customMetadata ?? {}
      const byId = new Map(fields.map((f) => [String(f.id), f]))
      const mine: Record<string, unknown> = {}
      const rest: Record<string, unknown> = {}
      for (const [key, value] of Object.entries(given)) (byId.has(key) || fields.some((f) => f.name === key) ? mine : rest)[key] = value
      const changes = (await service.resolve(knex, owner, mine, 'custom_metadata', fields)).filter((c) => c.stored !== null)
      const holding = new Set(changes.map((c) => c.field.id))
      // generator fields nobody gave: mandatory ones and name parts take their next value
      for (const f of fields) if (f.type === 'generator' && !holding.has(f.id) && (f.mandatory || f.useInProjectName) && f.setParentId === null) {
        changes.push({ field: f, stored: null, take: true })
        holding.add(f.id)
      }
      const missing: ParamError[] = await service.missingMandatory(knex, owner, holding, fields)
      if (missing.length) throw invalid(missing)
      const parts = fields.filter((f) => f.useInProjectName)
      if (parts.length) {
        const words: string[] = []
        for (const f of parts) {
          const change = changes.find((c) => c.field.id === f.id)
          if (!change) continue
          // a name part must be known now (it names the folder): taken in its own transaction, so a creation
          // that fails later leaves a gap, as a rolled-back nextval does (README: why not in the creation's)
          if (change.take) {
            change.stored = await knex.transaction((trx) => service.take(trx, f))
            change.take = false
          }
          words.push(change.stored!.text.replace(/\n/g, ' '))
        }
        if (words.length && !input.name?.trim()) input.name = safeName(words.join('_'))
      }
      input.customMetadata = rest
      input.prepared = { ...input.prepared, [PREPARED_KEY]: changes }
    },
    async created(trx, project, principal, input) {
      const changes = pending(input)
      if (!changes.length) return
      await service.apply(trx, principal.userId, { type: 'project', id: project.id }, changes, { checkMandatory: false })
    },
  }
}
