/**
 * Realistic data for the route sweep (bench/routes.ts), written fast: accounts and a few objects
 * through the real API (templates, status flags, edits), the bulk (projects, assets, teams, rights,
 * flags set, mounts, jobs) with multi-row inserts through the ORM's knex in batches, inside
 * transactions. 1,000 projects and 100,000 assets take seconds, not the minutes of HTTP.
 */
import { createHash, randomUUID } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'

export interface SeedOptions {
  dataDir: string
  databaseUrl?: string
  projects: number
  /** assets spread over the projects; project #1 (the listing project) gets `bigProject` of them */
  assets: number
  bigProject: number
  users: number
  teams: number
  folders: number
  log?: (line: string) => void
}

export interface Seeded {
  adminKey: string
  userKey: string
  adminId: number
  userId: number
  /** ids the sweep puts into route parameters */
  ids: {
    project: number
    /** a project the bench user can write (status flags, rights) */
    userProject: number
    asset: number
    /** a path halfway down the listing project (keyset deep page) */
    deepAfter: string
    template: number
    team: number
    role: number
    statusFlag: number
    edit: number
    job: number
    assetJob: number
    userProjects: number
  }
  counts: Record<string, number>
  seconds: number
}

const API = '/api/v1'
const hex = (n: number, seed: string) => createHash('sha256').update(seed).digest('hex').slice(0, n)

async function batches<T>(rows: T[], size: number, fn: (batch: T[]) => Promise<unknown>) {
  for (let i = 0; i < rows.length; i += size) await fn(rows.slice(i, i + size))
}

/** SQLite stores dates as epoch ms, PostgreSQL as timestamptz: knex takes a Date on both */
export async function seed(options: SeedOptions): Promise<Seeded> {
  const started = performance.now()
  const log = options.log ?? (() => {})
  const { MamRuntime } = await import('../core/runtime.js')
  const { builtinPlugins } = await import('../plugins/index.js')
  const { createApiKey, createUser } = await import('../core/auth/accounts.js')
  const runtime = await MamRuntime.create({ plugins: builtinPlugins, config: { dataDir: options.dataDir, databaseUrl: options.databaseUrl, logLevel: 'silent' }, runJobs: false })
  try {
    const knex = runtime.db.knex
    const em = runtime.container.resolve<any>('em').fork()
    const admin = await createUser(em, { username: 'bench-admin', password: 'bench-admin-password', admin: true })
    const user = await createUser(em, { username: 'bench-user', password: 'bench-user-password' })
    const adminKey = (await createApiKey(em, admin, 'bench')).secret
    const userKey = (await createApiKey(em, user, 'bench')).secret
    const roleId = Number((await knex('users').where({ id: user.id }).first('role_id')).role_id)

    // a few things through the API, as clients make them
    const server = http.createServer(runtime.callback())
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}${API}`
    const call = async (method: string, url: string, body: unknown) => {
      const res = await fetch(base + url, { method, headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
      const json = (await res.json()) as any
      if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`)
      return json
    }
    let template: any, flags: number[], edits: number[]
    try {
      template = (await call('POST', '/templates', { template: { name: 'Seed template', template_type: 'generic', substitution_patterns: [{ token: '{project}', pattern: 'P' }] } })).template
      for (let i = 2; i <= 5; i++) await call('POST', '/templates', { template: { name: `Other template ${i}`, template_type: 'generic' } })
      flags = []
      for (let i = 1; i <= 8; i++) flags.push((await call('POST', '/status_flags', { name: `Flag ${i}`, color: `#${hex(6, `flag${i}`)}` })).status_flag.id)
      edits = []
      for (let i = 1; i <= 3; i++) edits.push((await call('POST', '/edits', { name: `edit-${i}`, password: `edit-password-${i}` })).edit.id)
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
    const folders = Array.from({ length: options.folders }, (_, i) => `Folder ${String(i + 1).padStart(2, '0')}`)
    for (const f of folders) await mkdir(path.join(template.directory, f), { recursive: true })
    log(`  accounts, template (${folders.length} folders), ${flags.length} flags, ${edits.length} edits through the API`)

    // users and teams
    const now = new Date()
    const userRows = Array.from({ length: options.users - 2 }, (_, i) => ({
      username: `seed-user-${i + 1}`,
      password_hash: null,
      firstname: `First${i}`,
      lastname: `Last${i}`,
      email: `seed${i + 1}@example.test`,
      role_id: roleId,
      created_at: now,
      updated_at: now,
    }))
    await batches(userRows, 500, (b) => knex('users').insert(b))
    const userIds = (await knex('users').whereLike('username', 'seed-user-%').orderBy('id').select('id')).map((r: any) => Number(r.id))
    await batches(
      Array.from({ length: options.teams }, (_, i) => ({ name: `Seed team ${i + 1}`, quota: null, space_used: 0, owner_id: null, created_at: now, updated_at: now })),
      500,
      (b) => knex('teams').insert(b),
    )
    const teamIds = (await knex('teams').whereLike('name', 'Seed team %').orderBy('id').select('id')).map((r: any) => Number(r.id))
    const memberships = [{ team_id: teamIds[0], user_id: user.id, created_at: now }]
    userIds.forEach((id, i) => memberships.push({ team_id: teamIds[i % teamIds.length], user_id: id, created_at: now }))
    await batches(memberships, 500, (b) => knex('team_memberships').insert(b))

    // projects from the template: rows in bulk, their folder trees made on disk
    const storageRoot = runtime.container.resolve<any>('storages').get('default').root as string
    const projectRows = Array.from({ length: options.projects }, (_, i) => {
      const name = `Project ${String(i + 1).padStart(5, '0')}`
      return {
        uuid: randomUUID(),
        name,
        alternative_name: i % 3 === 0 ? `Alt ${i + 1}` : null,
        description: i % 2 === 0 ? `Description of ${name}` : null,
        storage: 'default',
        folder: name,
        template_id: template.id,
        is_library_project: i % 20 === 19,
        encoding_priority: 0,
        custom_metadata: JSON.stringify({ client: `Client ${i % 17}`, episode: i }),
        quota: null,
        size: 1000 * i,
        size_calculated_at: now,
        frozen_by_id: i % 100 === 50 ? admin.id : null,
        frozen_at: i % 100 === 50 ? now : null,
        created_by_id: admin.id,
        created_by_edit: null,
        last_opened_by_id: i % 4 === 0 ? user.id : null,
        last_used_at: i % 4 === 0 ? now : null,
        deleted: false,
        created_at: now,
        updated_at: now,
      }
    })
    await knex.transaction((trx) => batches(projectRows, 500, (b) => trx('projects').insert(b)))
    const projectIds = (await knex('projects').orderBy('id').select('id')).map((r: any) => Number(r.id))
    for (const p of projectRows) {
      await mkdir(path.join(storageRoot, p.folder), { recursive: true })
      await Promise.all(folders.map((f) => mkdir(path.join(storageRoot, p.folder, f), { recursive: true })))
    }
    log(`  ${options.users} users, ${options.teams} teams, ${projectIds.length} projects (folders on disk)`)

    // rights: the bench user's team reads and writes every tenth project (the first among them), the
    // other teams a share each; every project is writable by one team
    const rights: any[] = []
    projectIds.forEach((pid, i) => {
      if (i % 10 === 0) rights.push({ team_id: teamIds[0], object_type: 'project', object_id: pid, read: true, write: true, created_at: now, updated_at: now })
      const other = teamIds[1 + (i % (teamIds.length - 1))]
      rights.push({ team_id: other, object_type: 'project', object_id: pid, read: true, write: i % 2 === 0, created_at: now, updated_at: now })
    })
    await knex.transaction((trx) => batches(rights, 500, (b) => trx('access_rights').insert(b)))
    const flagRows: any[] = []
    projectIds.forEach((pid, i) => {
      if (i % 3 === 0) flagRows.push({ project_id: pid, status_flag_id: flags[i % flags.length], set_by_id: admin.id, created_at: now })
      if (i % 7 === 0) flagRows.push({ project_id: pid, status_flag_id: flags[(i + 1) % flags.length], set_by_id: user.id, created_at: now })
    })
    await knex.transaction((trx) => batches(flagRows, 500, (b) => trx('project_status_flags').insert(b)))
    const mounts = projectIds
      .filter((_, i) => i % 20 === 0)
      .map((pid, i) => ({ edit_id: edits[i % edits.length], project_id: pid, kind: 'mount', parent_id: null, link: `edit-${(i % edits.length) + 1}/p${pid}`, state: 'mounted', error: null, mounted_by_id: user.id, mounted_at: now, opened_by_id: null, opened_at: null, created_at: now, updated_at: now }))
    await batches(mounts, 500, (b) => knex('edit_sessions').insert(b))

    // assets: the listing project gets `bigProject`, the rest are spread evenly
    const big = Math.min(options.bigProject, options.assets)
    const perOther = projectIds.length > 1 ? Math.floor((options.assets - big) / (projectIds.length - 1)) : 0
    let made = 0
    // knex writes a multi-row insert on SQLite as one compound SELECT, which SQLite caps at 500 terms
    const assetBatch = 500
    const makeAssets = async (projectId: number, count: number) => {
      for (let start = 0; start < count; start += assetBatch * 10) {
        await knex.transaction(async (trx) => {
          for (let b = start; b < Math.min(count, start + assetBatch * 10); b += assetBatch) {
            const rows = []
            for (let j = b; j < Math.min(count, b + assetBatch); j++) {
              const folder = folders[j % folders.length]
              const kind = j % 10 === 9 ? 'image' : j % 10 === 8 ? 'audio' : 'video'
              const name = `clip_${String(j).padStart(7, '0')}.${kind === 'image' ? 'jpg' : kind === 'audio' ? 'wav' : 'mov'}`
              const video = kind === 'video'
              rows.push({
                uuid: randomUUID(),
                project_id: projectId,
                path: `${folder}/${name}`,
                folder,
                name,
                type: kind,
                size: 10_000_000 + j,
                mtime: now,
                inode: null,
                device: null,
                online: true,
                analysis_state: 'ready',
                proxy_state: 'ready',
                metadata: JSON.stringify(
                  video
                    ? { duration: 12.5, container: 'mov', video_codec: 'prores', width: 1920, height: 1080, frame_rate: '25/1', timecode: '10:00:00:00', audio_channels: 2, audio_codec: 'pcm_s24le', sample_rate: 48000, clip_name: `Clip ${j}`, bit_rate: 147_000_000 }
                    : kind === 'audio'
                      ? { duration: 30, container: 'wav', audio_codec: 'pcm_s24le', audio_channels: 2, sample_rate: 48000 }
                      : { width: 4000, height: 3000, make: 'Canon', model: 'EOS', iso: 200 },
                ),
                duration: kind === 'image' ? null : 12.5,
                description: j % 5 === 0 ? `Description ${j}` : null,
                crc32: hex(8, `c${projectId}/${j}`),
                sha256: null,
                proxy_version: 1,
                proxies: JSON.stringify(video ? { lowres: 'lowres.mp4', poster: 'poster.jpg', thumbnails: 'thumbnails.jpg' } : kind === 'audio' ? { audio: 'audio.m4a', waveform: 'waveform.png' } : { image: 'image.jpg' }),
                created_at: now,
                updated_at: now,
              })
            }
            await trx('assets').insert(rows)
            made += rows.length
          }
        })
      }
    }
    await makeAssets(projectIds[0], big)
    for (const pid of projectIds.slice(1)) await makeAssets(pid, perOther)
    log(`  ${made} assets (${big} in project ${projectIds[0]}, ${perOther} in each other)`)

    // finished jobs, some of the bench user's
    const jobRows = Array.from({ length: Math.min(1000, made) }, (_, i) => ({
      type: 'assets.analyse',
      kind: 'asset',
      state: 'finished',
      payload: JSON.stringify({ assetId: i + 1 }),
      result: null,
      error: null,
      progress: 1,
      attempts: 1,
      max_attempts: 3,
      priority: 0,
      run_at: now,
      user_id: i % 2 ? user.id : admin.id,
      project_id: projectIds[0],
      asset_id: i + 1,
      success: 1,
      failure: 0,
      started_at: now,
      finished_at: now,
      created_at: now,
      updated_at: now,
    }))
    await batches(jobRows, 500, (b) => knex('jobs').insert(b))
    const assetJob = Number((await knex('jobs').where({ user_id: user.id }).orderBy('id', 'desc').first('id')).id)
    const firstAsset = Number((await knex('assets').where({ project_id: projectIds[0] }).orderBy('id').first('id')).id)
    const deep = await knex('assets')
      .where({ project_id: projectIds[0] })
      .orderBy([{ column: 'folder' }, { column: 'name' }])
      .offset(Math.floor(big / 2))
      .first('path')
    // PostgreSQL's autovacuum would set the visibility map and the planner's statistics after a bulk
    // load like this one; the test servers here run with autovacuum off, and without it every count
    // of a folder fetched each row from the heap (10,000 rows: 29 ms against 1.6 ms)
    if (runtime.db.dialect === 'postgresql') await knex.raw('vacuum analyze')
    const count = async (table: string) => Number((await knex(table).count({ n: '*' }))[0].n)
    const counts: Record<string, number> = {}
    for (const table of ['users', 'teams', 'team_memberships', 'access_rights', 'projects', 'assets', 'project_status_flags', 'edit_sessions', 'jobs']) counts[table] = await count(table)
    return {
      adminKey,
      userKey,
      adminId: admin.id,
      userId: user.id,
      ids: {
        project: projectIds[0],
        userProject: projectIds[0],
        asset: firstAsset,
        deepAfter: deep?.path ?? '',
        template: template.id,
        team: teamIds[0],
        role: roleId,
        statusFlag: flags[0],
        edit: edits[0],
        job: assetJob,
        assetJob,
        userProjects: Math.ceil(projectIds.length / 10),
      },
      counts,
      seconds: (performance.now() - started) / 1000,
    }
  } finally {
    await runtime.close()
  }
}
