import { lstat, mkdir, readdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { TestServer } from '../../../core/testing/index.js'

/** Shared setup for the projects tests: templates with files, trees on disk, rows. */

// moved to core/testing (mamkit/testing); re-exported for tests that import them from here
export { createProject, teamWith, grant, readerAndStranger, waitForJob } from '../../../core/testing/index.js'

export type TreeSpec = Record<string, string | Buffer | null>

/** writes files (string or Buffer) and folders (null) below `root` */
export async function writeTree(root: string, spec: TreeSpec): Promise<void> {
  for (const [rel, content] of Object.entries(spec)) {
    const p = path.join(root, rel)
    if (content === null) await mkdir(p, { recursive: true })
    else {
      await mkdir(path.dirname(p), { recursive: true })
      await writeFile(p, content)
    }
  }
}

/** every entry below `root`, relative and sorted; folders end in `/` */
export async function listTree(root: string): Promise<string[]> {
  const out: string[] = []
  const walk = async (dir: string, prefix: string) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const rel = prefix + e.name
      if (e.isDirectory()) {
        out.push(rel + '/')
        await walk(path.join(dir, e.name), rel + '/')
      } else out.push(rel)
    }
  }
  await walk(root, '')
  return out.sort()
}

export const exists = (p: string) => lstat(p).then(() => true, () => false)

export interface TemplateSpec {
  name: string
  type?: string
  patterns?: Array<{ token: string; pattern: string }>
  files?: TreeSpec
}

/** a template created over HTTP, with files written into its folder */
export async function makeTemplate(s: TestServer, spec: TemplateSpec): Promise<{ id: number; name: string; directory: string }> {
  const reply = await s.request('POST', '/templates', {
    token: s.admin.token,
    json: { template: { name: spec.name, template_type: spec.type ?? 'generic', substitution_patterns: spec.patterns ?? [] } },
  })
  if (reply.status !== 201) throw new Error(`template: ${reply.status} ${reply.text}`)
  const t = reply.body.template
  await writeTree(t.directory, spec.files ?? {})
  return { id: t.id, name: t.name, directory: t.directory }
}

/** one row of a table, read with the server's own query builder */
export async function row(s: TestServer, table: string, where: Record<string, unknown>) {
  return s.runtime.db.knex(table).where(where).first()
}
