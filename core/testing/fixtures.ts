import { readFile } from 'node:fs/promises'
import type { TestServer, TestUser } from './server.js'
import { testTimeouts, waitFor } from './waiting.js'

/** What most plugin tests set up through the API, as a client would: sessions, projects, teams, rights, uploads. */

/** logs in with username and password (POST /session) and returns the login token */
export async function login(s: TestServer, user: { username: string; password: string }): Promise<string> {
  const reply = await s.request('POST', '/session', { json: { login: user.username, password: user.password } })
  if (reply.status !== 200) throw new Error(`login ${user.username}: ${reply.status} ${reply.text}`)
  return reply.body.authentication_token
}

export interface TestProject {
  id: number
  name: string
  /** the absolute path of its folder (shown to administrators only; read here as the admin) */
  path: string
  storage: string
  [field: string]: any
}

/** POST /projects as `user` with a name or the whole body (`{ name, template_id, … }`, top level or under `project`) */
export async function createProject(s: TestServer, user: TestUser, fields: string | Record<string, unknown>): Promise<TestProject> {
  const json = typeof fields === 'string' ? { name: fields } : fields
  const reply = await s.request('POST', '/projects', { token: user.token, json })
  if (reply.status !== 201) throw new Error(`project: ${reply.status} ${reply.text}`)
  const { path } = (await s.request('GET', `/projects/${reply.body.project.id}`, { token: s.admin.token })).body.project
  return { ...reply.body.project, path }
}

/** a shared team (created by the admin) with `users` as members; returns its id */
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

/**
 * Gives a team read or read+write on a project (PUT /projects/:id/teams as the admin). `to` is a
 * team id, or a user: then the user's own team.
 */
export async function grant(s: TestServer, projectId: number, to: number | TestUser, rights: { read?: boolean; write?: boolean }): Promise<void> {
  const teamId = typeof to === 'number' ? to : (await s.request('GET', `/users/${to.id}`, { token: s.admin.token })).body.user.own_team_id
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

/** POST /projects/:id/inject_uploads with files given by name and content (or a path on disk) */
export async function upload(s: TestServer, token: string | undefined, projectId: number, files: Array<{ name: string; data?: Buffer | string; file?: string }>, fields: Record<string, string> = {}) {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  for (const f of files) {
    const data = f.file ? await readFile(f.file) : typeof f.data === 'string' ? Buffer.from(f.data) : f.data!
    form.append('file', new Blob([new Uint8Array(data)]), f.name)
  }
  return s.request('POST', `/projects/${projectId}/inject_uploads`, { token, multipart: form })
}

/** asset ids by name from an `assets` answer (inject_uploads does not promise the order of the parts) */
export const idsByName = (reply: { body: any }): Record<string, number> => Object.fromEntries(reply.body.assets.map((a: any) => [a.name, a.id]))

/** analysis finished, and for media the proxies too */
export const settled = (a: any) =>
  ['ready', 'failed'].includes(a.analysis_state) && (a.type === 'other' || a.analysis_state === 'failed' || ['ready', 'failed'].includes(a.proxy_state))

/** polls GET /assets/:id until `done` holds (default: analysis and proxies settled) and returns the asset */
export async function waitForAsset(s: TestServer, token: string, id: number, done: (asset: any) => boolean = settled, timeoutMs = testTimeouts.waitMs): Promise<any> {
  let last: any
  return waitFor(
    `asset ${id}`,
    async () => {
      const reply = await s.request('GET', `/assets/${id}`, { token })
      if (reply.status !== 200) throw new Error(`asset ${id}: ${reply.status} ${reply.text}`)
      last = reply.body.asset
      return done(last) ? last : undefined
    },
    timeoutMs,
  ).catch((err: Error) => {
    if (!last) throw err
    throw new Error(`asset ${id} did not settle: ${JSON.stringify({ analysis: last.analysis_state, proxy: last.proxy_state, kinds: last.proxy?.kinds })} (${err.message})`)
  })
}
