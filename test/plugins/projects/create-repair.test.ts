import t from 'tap'
import { existsSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { conflict } from '../../../core/index.js'
import { onEachDatabase, createProject, type TestServer } from '../../../core/testing/index.js'
import type { StorageJournal } from '../../../core/storage/journal.js'
import type { ProjectCreateHook, ProjectService } from '../../../plugins/projects/index.js'

/** a creation a crash cut short once its tree was in place is finished by the repair: the create hooks' `created` step included */

const service = (s: TestServer) => s.runtime.container.resolve<ProjectService>('projects.service')
const journal = (s: TestServer) => s.runtime.container.resolve<StorageJournal>('projects.storageJournal')
const outboxEvents = async (s: TestServer, projectId: number) =>
  Number((await s.runtime.db.knex('event_outbox').where({ name: 'project.created', subject_id: String(projectId) }).count({ n: '*' }))[0].n)

onEachDatabase(t, "the start-up repair of a placed creation runs the create hooks' created step with the stored input", async (t, s) => {
  const calls: Array<{ projectId: number; userId: number; via: string; prepared: unknown }> = []
  const hook: ProjectCreateHook = {
    async prepare(_em, _principal, input) {
      input.prepared = { ...input.prepared, test: { note: `prepared for ${input.name}` } }
    },
    async created(trx, project, principal, input) {
      calls.push({ projectId: project.id, userId: principal.userId, via: principal.via, prepared: input.prepared?.test })
      await trx('projects').where({ id: project.id }).update({ description: 'written by the created step' })
    },
  }
  service(s).createHooks.add(hook)

  // a normal creation runs the step in its last transaction
  const normal = await createProject(s, s.user, { name: 'Normal' })
  t.same(calls.map(({ via: _via, ...call }) => call), [{ projectId: normal.id, userId: s.user.id, prepared: { note: 'prepared for Normal' } }])
  calls.length = 0

  // a process died after renaming the tree into place, before its last transaction committed: the
  // row and folder are there, the hook's rows and the event are not, the journal entry is open
  const cut = await createProject(s, s.user, { name: 'Cut short' })
  await s.runtime.db.knex('projects').where({ id: cut.id }).update({ description: null })
  await s.runtime.db.knex('event_outbox').where({ name: 'project.created', subject_id: String(cut.id) }).delete()
  calls.length = 0
  const past = new Date(Date.now() - 60_000)
  const row = await s.runtime.db.knex('projects').where({ id: cut.id }).first('uuid', 'folder')
  await s.runtime.db.knex('storage_journal').insert({
    kind: 'projects.create',
    scope: null,
    exclusive: false,
    payload: JSON.stringify({
      storage: 'default',
      folder: row.folder,
      staging: '.mamkit-trash/creating-gone', // renamed into place: no staging folder left
      uuid: row.uuid,
      createdBy: s.user.id,
      input: { name: 'Cut short', prepared: { test: { note: 'prepared before the crash' } } },
    }),
    owner: 'a-process-that-died',
    lease_until: past,
    created_at: past,
    updated_at: past,
  })

  t.equal(await journal(s).reconcile(), 1, 'the entry is repaired')
  t.same(calls, [{ projectId: cut.id, userId: s.user.id, via: 'job', prepared: { note: 'prepared before the crash' } }], "the hook's created step ran once, as the creator, with the stored input")
  t.equal((await s.runtime.db.knex('projects').where({ id: cut.id }).first('description')).description, 'written by the created step', "its rows committed with the repair")
  t.equal(await outboxEvents(s, cut.id), 1, 'project.created published by the repair')
  t.equal(Number((await s.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n), 0, 'no journal entry left')
  t.equal(await journal(s).reconcile(), 0, 'nothing to repair a second time')
  t.equal(calls.length, 1)
})

onEachDatabase(t, 'a create hook that refuses in the request leaves no project: no row, rights, folder, event or journal entry', async (t, s) => {
  let refuse = true
  service(s).createHooks.add({
    async created() {
      if (refuse) throw conflict('This hook refuses')
    },
  })
  const before = await s.runtime.db.knex('access_rights').count({ n: '*' })
  const reply = await s.request('POST', '/projects', { token: s.user.token, json: { project: { name: 'Refused' } } })
  t.equal(reply.status, 409, 'the request hears the refusal')
  t.match(reply.body, { detail: 'This hook refuses' })
  t.notOk(await s.runtime.db.knex('projects').where({ name: 'Refused' }).first('id'), 'no project row')
  t.same(await s.runtime.db.knex('access_rights').count({ n: '*' }), before, 'no access right left')
  const root = path.join(s.dataDir, 'storage', 'default')
  t.notOk(existsSync(path.join(root, 'Refused')), 'no project folder')
  t.same(readdirSync(path.join(root, '.mamkit-trash')).filter((n) => n.startsWith('creating-')), [], 'no staging folder')
  t.equal(Number((await s.runtime.db.knex('event_outbox').where({ name: 'project.created' }).count({ n: '*' }))[0].n), 0, 'no project.created')
  t.equal(Number((await s.runtime.db.knex('storage_journal').count({ n: '*' }))[0].n), 0, 'no journal entry left')
  // the name is free again
  refuse = false
  t.equal((await s.request('POST', '/projects', { token: s.user.token, json: { project: { name: 'Refused' } } })).status, 201)
})
