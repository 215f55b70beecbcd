import { lstat, readlink } from 'node:fs/promises'
import path from 'node:path'
import { waitForJob, type TestServer } from '../../../core/testing/index.js'

/** Shared setup for the edits tests: edits, jobs and the workspace on disk. */

// moved to core/testing (mamkit/testing); re-exported for tests that import them from here
export { createProject, grant, waitForJob } from '../../../core/testing/index.js'

export async function createEdit(s: TestServer, name: string, password = `smb-${name}-secret`) {
  const reply = await s.request('POST', '/edits', { token: s.admin.token, json: { edit: { name, password, comment: `workstation ${name}` } } })
  if (reply.status !== 201) throw new Error(`edit: ${reply.status} ${reply.text}`)
  return reply.body.edit as { id: number; name: string }
}

/** sends an edit call and waits for the job it answers with */
export async function runJob(s: TestServer, method: string, url: string, token: string, options: { edit?: string; json?: unknown } = {}) {
  const reply = await s.request(method, url, { token, json: options.json, headers: options.edit ? { 'X-APP-EDIT': options.edit } : {} })
  if (reply.status !== 202) throw new Error(`${method} ${url}: ${reply.status} ${reply.text}`)
  return { reply, job: await waitForJob(s, token, reply.body.job.id) }
}

export const mountPath = (s: TestServer, edit: string, folder: string) => path.join(s.dataDir, 'mounts', edit, folder)

/** where the symlink at `p` points, or null when there is none */
export async function linkTarget(p: string): Promise<string | null> {
  const info = await lstat(p).catch(() => null)
  return info?.isSymbolicLink() ? readlink(p) : null
}

export const exists = (p: string) => lstat(p).then(() => true, () => false)

export async function sessions(s: TestServer, where: Record<string, unknown> = {}) {
  return s.runtime.db.knex('edit_sessions').where(where).orderBy('id')
}
