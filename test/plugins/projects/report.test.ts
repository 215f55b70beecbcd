import ExcelJS from 'exceljs'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import { makeTemplate } from './fixtures.js'

const HEADERS = [
  'ID', 'Name', 'Alternative name', 'Storage', 'Path', 'Template', 'Library', 'Frozen', 'Frozen by',
  'Size (bytes)', 'Quota (bytes)', 'Encoding priority', 'Created by', 'Created at', 'Updated at',
]

/** the sheet read back with exceljs: header row and rows as objects keyed by header */
async function readReport(s: TestServer, token: string, query?: Record<string, string>) {
  const reply = await s.request('GET', '/projects_report', { token, query })
  if (reply.status !== 200) throw new Error(`report: ${reply.status} ${reply.text}`)
  const workbook = new ExcelJS.Workbook()
  await workbook.xlsx.load(reply.buffer as any)
  const sheet = workbook.getWorksheet('Projects')!
  const headers = (sheet.getRow(1).values as unknown[]).slice(1)
  const rows: Record<string, unknown>[] = []
  sheet.eachRow((row, n) => {
    if (n === 1) return
    const values = (row.values as unknown[]).slice(1)
    rows.push(Object.fromEntries(headers.map((h, i) => [h as string, values[i] ?? null])))
  })
  return { reply, headers, rows, sheet }
}

onEachDatabase(t, 'GET /projects_report: an .xlsx of the projects the caller can read', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Feature film', files: { 'a.bin': 'x'.repeat(42) } })
  const started = new Date(Date.now() - 1000)
  const a = await createProject(s, s.user, { name: 'Alpha', template_id: tpl.id, alternative_name: 'A-1' })
  const b = await createProject(s, s.user, { name: 'Beta library', is_library_project: true })
  const c = await createProject(s, s.admin, { name: 'Charlie' })
  const gone = await createProject(s, s.admin, { name: 'Deleted one' })
  await s.request('DELETE', `/projects/${gone.id}`, { token: s.admin.token })
  await s.request('PUT', `/projects/${b.id}/freeze`, { token: s.user.token })
  await s.request('PUT', `/projects/${a.id}/quota`, { token: s.admin.token, json: { quota: 5_000_000_000 } })
  await s.request('POST', '/projects/encoding_priority', { token: s.admin.token, json: { project_ids: [c.id], encoding_priority: 7 } })
  const { reader } = await readerAndStranger(s, a.id)

  assertProblem(t, await s.request('GET', '/projects_report'), 401)
  assertProblem(t, await s.request('GET', '/projects_report', { token: s.admin.token, query: { library: 'maybe' } }), 422, ['library'])
  assertProblem(t, await s.request('GET', '/projects_report', { token: s.admin.token, query: { page: '2' } }), 422, ['page'])

  const { reply, headers, rows, sheet } = await readReport(s, s.admin.token)
  t.equal(reply.headers.get('content-type'), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet')
  t.match(reply.headers.get('content-disposition'), /^attachment; filename="projects-\d{4}-\d{2}-\d{2}\.xlsx"$/)
  t.equal(reply.headers.get('content-length'), String(reply.buffer.length))
  t.same([...reply.buffer.subarray(0, 2)], [0x50, 0x4b], 'a zip container')
  t.same(headers, HEADERS)
  t.ok(sheet.getRow(1).font?.bold, 'bold header row')
  t.same(rows.map((r) => r.Name), ['Alpha', 'Beta library', 'Charlie'], 'every live project, by name; deleted ones left out')

  const [ra, rb, rc] = rows
  t.match(ra, {
    ID: a.id,
    Name: 'Alpha',
    'Alternative name': 'A-1',
    Storage: 'default',
    Path: a.path,
    Template: 'Feature film',
    Library: false,
    Frozen: false,
    'Frozen by': null,
    'Size (bytes)': 42,
    'Quota (bytes)': 5_000_000_000,
    'Encoding priority': 0,
    'Created by': 'editor',
  })
  t.ok(ra['Created at'] instanceof Date, 'dates are date cells')
  const created = (ra['Created at'] as Date).getTime()
  t.ok(created >= started.getTime() - 1000 && created <= Date.now() + 1000, 'created at is the creation time')
  t.match(rb, { Name: 'Beta library', Library: true, Frozen: true, 'Frozen by': 'editor', Template: null, 'Quota (bytes)': null, 'Size (bytes)': 0 })
  t.match(rc, { Name: 'Charlie', 'Created by': 'admin', 'Encoding priority': 7 })

  // what the caller can read, and the list filters
  t.same((await readReport(s, s.user.token)).rows.map((r) => r.Name), ['Alpha', 'Beta library'])
  const readers = await readReport(s, reader.token)
  t.same(readers.rows.map((r) => r.Name), ['Alpha'])
  t.equal(readers.rows[0].Path, 'Alpha', 'a reader sees the folder inside the storage, not the server path')
  const stranger = await s.createUser('nobody')
  const empty = await readReport(s, stranger.token)
  t.same(empty.headers, HEADERS)
  t.same(empty.rows, [], 'a header row and nothing else')
  t.same((await readReport(s, s.admin.token, { name: 'LIB' })).rows.map((r) => r.Name), ['Beta library'])
  t.same((await readReport(s, s.admin.token, { library: 'false' })).rows.map((r) => r.Name), ['Alpha', 'Charlie'])
  t.same((await readReport(s, s.admin.token, { frozen: 'true' })).rows.map((r) => r.Name), ['Beta library'])
  t.same((await readReport(s, s.admin.token, { storage: 'elsewhere' })).rows, [])
})

onEachDatabase(t, 'GET /projects_report pages through more projects than one batch', async (t, s) => {
  const names = Array.from({ length: 1205 }, (_, i) => `P ${String(i).padStart(4, '0')}`)
  const now = new Date()
  // bulk rows straight into the table: this test is about the report, not about creating projects
  for (let i = 0; i < names.length; i += 200)
    await s.runtime.db.knex('projects').insert(
      names.slice(i, i + 200).map((name, j) => ({
        uuid: `00000000-0000-4000-8000-${String(i + j).padStart(12, '0')}`,
        name,
        storage: 'default',
        folder: name,
        is_library_project: false,
        encoding_priority: 0,
        custom_metadata: '{}',
        size: i + j,
        deleted: false,
        created_at: now,
        updated_at: now,
      })),
    )
  // two projects with the same name sort by id
  await s.runtime.db.knex('projects').insert({ uuid: '00000000-0000-4000-8000-999999999999', name: 'P 0600', storage: 'media_x', folder: 'P 0600', is_library_project: false, encoding_priority: 0, custom_metadata: '{}', size: 0, deleted: false, created_at: now, updated_at: now })
  const { rows } = await readReport(s, s.admin.token)
  t.equal(rows.length, 1206, 'every row once')
  t.same(rows.map((r) => r.Name), [...names.slice(0, 601), 'P 0600', ...names.slice(601)], 'in name order across batches')
  t.equal(new Set(rows.map((r) => r.ID)).size, 1206, 'no duplicates at batch edges')
  t.equal(rows[601].Path, 'P 0600', 'a storage that is not configured keeps the relative folder')
})
