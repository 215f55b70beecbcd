import { lstat, readlink } from 'node:fs/promises'
import path from 'node:path'
import type { TestServer, TestUser } from '../../helpers/index.js'

/** Shared setup for the edits tests: edits, projects, rights, jobs and the workspace on disk. */

export async function createEdit(s: TestServer, name: string, password = `smb-${name}-secret`) {
  const reply = await s.request('POST', '/edits', { token: s.admin.token, json: { edit: { name, password, comment: `workstation ${name}` } } })
  if (reply.status !== 201) throw new Error(`edit: ${reply.status} ${reply.text}`)
  return reply.body.edit as { id: number; name: string }
}

export async function createProject(s: TestServer, user: TestUser, name: string) {
  const reply = await s.request('POST', '/projects', { token: user.token, json: { name } })
  if (reply.status !== 201) throw new Error(`project: ${reply.status} ${reply.text}`)
  // the absolute path is shown to administrators only
  const { path } = (await s.request('GET', `/projects/${reply.body.project.id}`, { token: s.admin.token })).body.project
  return { ...reply.body.project, path } as { id: number; name: string; path: string; [k: string]: any }
}

/** gives `user` (through their own team) read or read+write on a project */
export async function grant(s: TestServer, projectId: number, user: TestUser, rights: { read?: boolean; write?: boolean }) {
  const own = (await s.request('GET', `/users/${user.id}`, { token: s.admin.token })).body.user.own_team_id
  const reply = await s.request('PUT', `/projects/${projectId}/teams`, { token: s.admin.token, json: { team_id: own, ...rights } })
  if (reply.status !== 200) throw new Error(`grant: ${reply.status} ${reply.text}`)
}

/** polls GET /status/:id until the job has ended; generous, since CI machines are slow */
export async function waitForJob(s: TestServer, token: string, id: number, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs
  for (;;) {
    const reply = await s.request('GET', `/status/${id}`, { token })
    if (['finished', 'failed', 'cancelled'].includes(reply.body?.job?.state)) return reply.body.job
    if (Date.now() > until) throw new Error(`job ${id} still ${reply.body?.job?.state}`)
    await new Promise((r) => setTimeout(r, 50))
  }
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
