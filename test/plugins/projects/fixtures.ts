import { lstat, mkdir, readdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { TestServer, TestUser } from '../../helpers/index.js'

/** Shared setup for the projects tests: templates with files, teams with rights, trees on disk, jobs. */

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

export async function createProject(s: TestServer, user: TestUser, fields: Record<string, unknown>) {
  const reply = await s.request('POST', '/projects', { token: user.token, json: fields })
  if (reply.status !== 201) throw new Error(`project: ${reply.status} ${reply.text}`)
  // the absolute path is shown to administrators only
  const { path } = (await s.request('GET', `/projects/${reply.body.project.id}`, { token: s.admin.token })).body.project
  return { ...reply.body.project, path } as { id: number; name: string; path: string; storage: string; [k: string]: any }
}

/** a shared team with `user` as member */
export async function teamWith(s: TestServer, name: string, ...users: TestUser[]): Promise<number> {
  const reply = await s.request('POST', '/teams', { token: s.admin.token, json: { team: { name } } })
  if (reply.status !== 201) throw new Error(`team: ${reply.status} ${reply.text}`)
  const id = reply.body.teams.id as number
  for (const u of users) {
    const added = await s.request('POST', `/teams/${id}/users/${u.id}`, { token: s.admin.token })
    if (added.status !== 200) throw new Error(`member: ${added.status} ${added.text}`)
  }
  return id
}

export async function grant(s: TestServer, projectId: number, teamId: number, rights: { read?: boolean; write?: boolean }) {
  const reply = await s.request('PUT', `/projects/${projectId}/teams`, { token: s.admin.token, json: { team_id: teamId, ...rights } })
  if (reply.status !== 200) throw new Error(`grant: ${reply.status} ${reply.text}`)
}

/** a user who can read (not write) `projectId`, and one who has no right on it */
export async function readerAndStranger(s: TestServer, projectId: number) {
  const reader = await s.createUser('reader')
  const stranger = await s.createUser('stranger')
  const team = await teamWith(s, 'readers', reader)
  await grant(s, projectId, team, { read: true })
  return { reader, stranger, readersTeam: team }
}

/** polls GET /status/:id until the job has ended */
export async function waitForJob(s: TestServer, token: string, id: number, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs
  for (;;) {
    const reply = await s.request('GET', `/status/${id}`, { token })
    if (['finished', 'failed', 'cancelled'].includes(reply.body?.job?.state)) return reply.body.job
    if (Date.now() > until) throw new Error(`job ${id} still ${reply.body?.job?.state}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** one row of a table, read with the server's own query builder */
export async function row(s: TestServer, table: string, where: Record<string, unknown>) {
  return s.runtime.db.knex(table).where(where).first()
}
