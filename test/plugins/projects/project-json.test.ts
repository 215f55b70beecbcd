import t from 'tap'
import { columnJson } from '../../../core/index.js'
import { isoOfEpochMs } from '../../../core/db/rows.js'
import { onEachDatabase, createProject, grant } from '../../../core/testing/index.js'
import { projectServices, projectViewOfRow, type ProjectService } from '../../../plugins/projects/index.js'
import { PROJECT_JSON_KEYS } from '../../../plugins/projects/project-json.js'

/** GET /projects writes its page as text (ProjectService.listPageJson): the bytes JSON.stringify writes of the decorated objects */

t.test('isoOfEpochMs is toISOString, columnJson writes what JSON.stringify writes of what column reads', async (t) => {
  const times = [0, 1, 999, 86_399_999, 86_400_000, 951_782_400_000, 1_764_000_000_123, 253_402_300_799_999, 253_402_300_800_000, -1, -86_400_001, 1.5, 8.64e15]
  for (let i = 0; i < 2000; i++) times.push(Math.floor(Math.random() * 253_402_300_800_000))
  for (const ms of times) if (isoOfEpochMs(ms) !== new Date(ms).toISOString()) t.fail(`${ms}: ${isoOfEpochMs(ms)}`)
  t.throws(() => isoOfEpochMs(Number.NaN), RangeError, 'an invalid date fails as toISOString does')
  for (const v of [null, 1_764_000_000_123, '1764000000123', new Date(5), '2026-11-25T05:44:48.029Z'])
    t.equal(columnJson.date(v), JSON.stringify(v === null ? null : new Date(typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : (v as any)).toISOString()), String(v))
  for (const v of [null, 0, 1, '1', 't', 'true', true, false, 'f']) t.equal(columnJson.bool(v), JSON.stringify(v === true || v === 1 || v === '1' || v === 't' || v === 'true'))
  for (const v of [null, undefined, 7, '7', '9007199254740993', 'x', -0]) t.equal(columnJson.intOrNull(v), JSON.stringify(v === null || v === undefined ? null : Number(v)))
  for (const v of ['{"a":[1,"x"]}', { a: 1 }, null]) t.equal(columnJson.json(v, '{}'), JSON.stringify(v === null ? {} : typeof v === 'string' ? JSON.parse(v) : v))
})

onEachDatabase(t, 'a page written as text is byte for byte the page of decorated objects, awkward values included', async (t, s) => {
  const knex = s.runtime.db.knex
  const service = s.runtime.container.resolve<ProjectService>(projectServices.service.id)
  const reader = await s.createUser('reader')
  const ids: number[] = []
  for (const name of ['A', 'B', 'C', 'D']) ids.push((await createProject(s, s.admin, name)).id)
  for (const id of ids) await grant(s, id, reader, { read: true })
  // strings JSON.stringify escapes, unicode beyond the BMP, numbers and dates at their edges, nulls
  await knex('projects')
    .where('id', ids[0])
    .update({
      name: 'A said "so"\\ \u0001\u001f\t\n\u2028 é 😀 \u007f',
      alternative_name: null,
      description: '</script> \b\f\r',
      custom_metadata: JSON.stringify({ 2: 'two', b: [1, 'x', null, true], nested: { é: 1.5e-7, big: 1e21 } }),
      quota: 2 ** 40,
      size: 2 ** 53 - 1,
      encoding_priority: -3,
      is_library_project: true,
      parent_id: ids[1],
      frozen_at: new Date(0),
      frozen_by_id: s.admin.id,
      size_calculated_at: null,
      last_used_at: new Date('9999-12-31T23:59:59.999Z'),
      created_at: new Date('1969-12-31T23:59:59.999Z'),
      updated_at: new Date(1_764_000_000_123),
    })
  // a year PostgreSQL's driver misreads (its page is read again as plain rows there), microseconds it drops
  // folders path.join normalises (an administrator's `path`): the same as GET /projects/:id's
  await knex('projects').where('id', ids[3]).update({ folder: 'D/../x/./y' })
  await knex('projects').where('id', ids[1]).update({ description: '', custom_metadata: '{}', template_id: null, created_by_edit: 'EDIT "1"', last_opened_by_edit: 'ß', last_used_at: new Date('0999-06-01T12:00:00.5Z') })
  if (s.db === 'postgresql') await knex.raw(`update projects set updated_at = '2026-01-02 03:04:05.678999+00', created_at = '1950-01-02 03:04:05.000001+00' where id = ?`, [ids[2]])
  // the edits plugin's and the strategies plugin's fields: a mount, an archive state
  const [edit] = await knex('edits').insert({ name: 'EDIT-J', password_sealed: 'x', created_at: new Date(), updated_at: new Date() }).returning('id')
  const editId = Number(typeof edit === 'object' ? edit.id : edit)
  await knex('edit_sessions').insert({ edit_id: editId, project_id: ids[2], kind: 'mount', link: '/m', state: 'ready', mounted_by_id: reader.id, mounted_at: new Date(), opened_by_id: s.admin.id, opened_at: new Date(), created_at: new Date(), updated_at: new Date() })
  await knex('archive_states').insert({ project_id: ids[3], direction: 'archive', stage: 'done', state: 'archived', archive_key: 'k', bytes_released: 5, created_at: new Date(), updated_at: new Date() })

  const page = async (token: string, query: Record<string, string> = {}) => {
    const reply = await s.request('GET', '/projects', { token, query })
    t.equal(reply.status, 200)
    t.match(reply.headers.get('content-type'), /^application\/json; charset=utf-8$/)
    return reply
  }
  // the page's own keys are PROJECT_JSON_KEYS; serialize has the same keys (checked when compiled) in the same order
  t.strictSame(Object.keys(service.serialize(projectViewOfRow(await knex('projects').where('id', ids[0]).first()), undefined)), [...PROJECT_JSON_KEYS], 'serialize gives PROJECT_JSON_KEYS, in their order')
  const answers = async () => Promise.all([page(s.admin.token), page(reader.token), page(s.admin.token, { per_page: '2', page: '2' }), page(reader.token, { name: 'a said' })])
  const written = await answers()
  t.equal(written[0].body.projects.length, 4)
  t.same(written[3].body.projects.map((p: any) => p.id), [ids[0]], 'the name filter')
  const [mounted] = written[0].body.projects.filter((p: any) => p.id === ids[2])
  t.same([mounted.mounted_by, mounted.locked_by], [reader.id, s.admin.id], 'the edits fields')
  const [archived] = written[0].body.projects.filter((p: any) => p.id === ids[3])
  t.same([archived.archive_strategy_id, archived.archive_strategy_state, archived.archived], [null, 'archived', true], 'the archive fields')
  for (const project of written[0].body.projects) t.same(project, (await s.request('GET', `/projects/${project.id}`, { token: s.admin.token })).body.project, `project ${project.id} as GET /projects/:id shows it`)

  // a decorator that changes the objects (a partner's): every page is rendered as objects and stringified
  service.views.add(() => {})
  const rendered = await answers()
  rendered.forEach((reply, i) => t.equal(written[i].text, reply.text, `page ${i}: the same bytes`))

  // fields that replace a key of the projects plugin, add one, and leave one out (undefined), after an object decorator
  service.views.addFields({ keys: ['description', 'extra', 'skipped'], read: (ids) => (id) => [`d${ids.indexOf(id)}`, { id }, undefined] })
  const fielded = await page(s.admin.token)
  t.same(Object.keys(fielded.body.projects[0]).slice(-2), ['archived', 'extra'], 'a new key after the others, one left out')
  t.equal(fielded.body.projects[1].description, 'd1')
  t.equal(fielded.body.projects[1].extra.id, fielded.body.projects[1].id)
})

onEachDatabase(t, 'with fields alone the page is written as text, and equals the objects rendered', async (t, s) => {
  const service = s.runtime.container.resolve<ProjectService>(projectServices.service.id)
  for (const name of ['X', 'Y']) await createProject(s, s.admin, name)
  service.views.addFields({ keys: ['description', 'extra', 'skipped'], read: (ids) => (id) => [`d${ids.indexOf(id)}`, [id, 'é'], undefined] })
  const text = (await s.request('GET', '/projects', { token: s.admin.token })).text
  service.views.add(() => {})
  t.equal((await s.request('GET', '/projects', { token: s.admin.token })).text, text, 'the same bytes as objects')
})
