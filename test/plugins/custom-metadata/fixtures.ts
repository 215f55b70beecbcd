import { randomUUID } from 'node:crypto'
import type { TestServer } from '../../helpers/index.js'

/** Shared setup for the custom metadata and search tests. */

/** asset rows written straight into the table (no files: these tests are about their metadata) */
export async function insertAssets(s: TestServer, projectId: number, n: number, prefix = 'clip'): Promise<number[]> {
  const now = new Date()
  const rows = Array.from({ length: n }, (_, i) => ({
    uuid: randomUUID(),
    project_id: projectId,
    path: `${prefix}-${i}.mov`,
    folder: '',
    name: `${prefix}-${i}.mov`,
    type: 'video',
    analysis_state: 'done',
    proxy_state: 'none',
    metadata: '{}',
    proxies: '[]',
    created_at: now,
    updated_at: now,
  }))
  const knex = s.runtime.db.knex
  for (let i = 0; i < rows.length; i += 500) await knex('assets').insert(rows.slice(i, i + 500))
  return (await knex('assets').where({ project_id: projectId }).where('name', 'like', `${prefix}-%`).orderBy('id').select('id')).map((r: any) => Number(r.id))
}

export async function makeSet(s: TestServer, fields: Record<string, unknown>) {
  const r = await s.request('POST', '/custom_metadata_sets', { token: s.admin.token, json: { custom_metadata_set: fields } })
  if (r.status !== 201) throw new Error(`set: ${r.status} ${r.text}`)
  return r.body.custommetadataset
}

export async function makeField(s: TestServer, fields: Record<string, unknown>) {
  const r = await s.request('POST', '/custom_metadata_fields', { token: s.admin.token, json: { custom_metadata_field: fields } })
  if (r.status !== 201) throw new Error(`field: ${r.status} ${r.text}`)
  return r.body.custommetadatafield
}

export async function makeOption(s: TestServer, fieldId: number, name: string) {
  const r = await s.request('POST', '/select_field_options', { token: s.admin.token, json: { select_field_option: { name, custom_metadata_field_id: fieldId } } })
  if (r.status !== 201) throw new Error(`option: ${r.status} ${r.text}`)
  return r.body.selectfieldoption
}

