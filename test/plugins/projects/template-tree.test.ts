import { readFile, symlink, writeFile } from 'node:fs/promises'
import { gunzipSync, gzipSync } from 'node:zlib'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, createProject, readerAndStranger } from '../../../core/testing/index.js'
import { exists, listTree, makeTemplate, row } from './fixtures.js'

const pad = (n: number) => String(n).padStart(2, '0')
const day = (d: Date) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`
/** the server's local date around a request (a run across midnight accepts either day) */
async function aroundToday<T>(fn: () => Promise<T>): Promise<{ result: T; days: string[] }> {
  const before = day(new Date())
  const result = await fn()
  return { result, days: [...new Set([before, day(new Date())])] }
}

const PATTERNS = [
  { token: 'PROJECT', pattern: '%n' },
  { token: 'USER', pattern: '%u' },
  { token: 'DATE', pattern: '%Y-%m-%d' },
  { token: 'PCT', pattern: '100%%' },
]

onEachDatabase(t, 'a generic template: tokens replaced in folder and file names, never in contents', async (t, s) => {
  const tpl = await makeTemplate(s, {
    name: 'Generic',
    type: 'generic',
    patterns: PATTERNS,
    files: {
      'PROJECT_Media/USER/': null,
      'PROJECT_Media/Audio/': null,
      'Exports/DATE/': null,
      'Docs/PROJECT notes.txt': 'Project PROJECT by USER',
      'Docs/PCT.xml': '<x>PROJECT</x>',
      'Empty/': null,
    },
  })
  await symlink('/etc/passwd', path.join(tpl.directory, 'Docs', 'PROJECT link'))

  const { result: p, days } = await aroundToday(() => createProject(s, s.user, { name: 'Spot 30s', template_id: tpl.id }))
  const tree = await listTree(p.path)
  const today = days.find((d) => tree.includes(`Exports/${d}/`))
  t.ok(today, 'the date pattern is expanded')
  t.same(tree, [
    'Docs/',
    'Docs/100%.xml',
    'Docs/Spot 30s notes.txt',
    'Empty/',
    'Exports/',
    `Exports/${today}/`,
    'Spot 30s_Media/',
    'Spot 30s_Media/Audio/',
    'Spot 30s_Media/editor/',
  ])
  t.equal(await readFile(path.join(p.path, 'Docs/Spot 30s notes.txt'), 'utf8'), 'Project PROJECT by USER', 'generic templates keep file contents')
  t.equal(await readFile(path.join(p.path, 'Docs/100%.xml'), 'utf8'), '<x>PROJECT</x>')
  t.notOk(await exists(path.join(p.path, 'Docs/Spot 30s link')), 'symlinks in templates are not copied')
  t.equal(p.size, 'Project PROJECT by USER'.length + '<x>PROJECT</x>'.length, 'size counts the bytes written')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), p.size)
  t.same(await listTree(tpl.directory), [
    'Docs/', 'Docs/PCT.xml', 'Docs/PROJECT link', 'Docs/PROJECT notes.txt', 'Empty/', 'Exports/', 'Exports/DATE/', 'PROJECT_Media/', 'PROJECT_Media/Audio/', 'PROJECT_Media/USER/',
  ], 'the template itself is unchanged')

  // a project name never turns a name into a path
  const slashed = await createProject(s, s.user, { name: 'Ep 1/2', template_id: tpl.id })
  t.equal(path.basename(slashed.path), 'Ep 1_2')
  t.ok((await listTree(slashed.path)).includes('Ep 1_2_Media/'))
  const dots = await makeTemplate(s, { name: 'Dots', patterns: [{ token: 'PROJECT', pattern: '%n' }], files: { 'PROJECT/inside.txt': 'x', 'PROJECT.txt': 'y' } })
  const dotted = await createProject(s, s.user, { name: '..', template_id: dots.id })
  t.equal(path.basename(dotted.path), '__')
  t.same(await listTree(dotted.path), ['...txt', '__/', '__/inside.txt'], '"." and ".." never become names')
  t.same(await listTree(path.join(path.dirname(dotted.path), '.mamkit-trash')), [], 'nothing written beside the project')
})

onEachDatabase(t, 'a Premiere Pro template: tokens replaced inside the gzipped .prproj and .xml files', async (t, s) => {
  const prprojXml = '<?xml version="1.0" encoding="UTF-8"?>\n<PremiereData Version="3"><Project><Name>PROJECT</Name><Author>USER</Author><Created>DATE</Created><Path>/Volumes/PROJECT/PROJECT.prproj</Path></Project></PremiereData>\n'
  const binary = Buffer.concat([Buffer.from([0, 1, 2, 255]), Buffer.from('PROJECT')])
  const tpl = await makeTemplate(s, {
    name: 'Premiere',
    type: 'premiere_pro',
    patterns: PATTERNS,
    files: {
      'PROJECT.prproj': gzipSync(Buffer.from(prprojXml)),
      'Adobe Premiere Pro Auto-Save/': null,
      'Media/PROJECT_DATE/': null,
      'Media/clip.dat': binary,
      'metadata.xml': '<meta project="PROJECT" user="USER"/>',
      'readme.txt': 'PROJECT readme',
    },
  })
  const { result: p, days } = await aroundToday(() => createProject(s, s.user, { name: 'Feature Ω', templatename: 'Premiere' }))
  const tree = await listTree(p.path)
  const today = days.find((d) => tree.includes(`Media/Feature Ω_${d}/`))
  t.ok(today, 'date expanded in folder names')
  t.same(tree, ['Adobe Premiere Pro Auto-Save/', 'Feature Ω.prproj', 'Media/', `Media/Feature Ω_${today}/`, 'Media/clip.dat', 'metadata.xml', 'readme.txt'])

  const prproj = await readFile(path.join(p.path, 'Feature Ω.prproj'))
  t.same([...prproj.subarray(0, 2)], [0x1f, 0x8b], 'the project file stays gzip-compressed')
  t.equal(
    gunzipSync(prproj).toString('utf8'),
    `<?xml version="1.0" encoding="UTF-8"?>\n<PremiereData Version="3"><Project><Name>Feature Ω</Name><Author>editor</Author><Created>${today}</Created><Path>/Volumes/Feature Ω/Feature Ω.prproj</Path></Project></PremiereData>\n`,
    'tokens replaced inside the compressed XML',
  )
  t.equal(await readFile(path.join(p.path, 'metadata.xml'), 'utf8'), '<meta project="Feature Ω" user="editor"/>')
  t.equal(await readFile(path.join(p.path, 'readme.txt'), 'utf8'), 'PROJECT readme', 'files the type does not name are copied as they are')
  t.same(await readFile(path.join(p.path, 'Media/clip.dat')), binary)
  const expectedSize = prproj.length + Buffer.byteLength('<meta project="Feature Ω" user="editor"/>') + 'PROJECT readme'.length + binary.length
  t.equal(p.size, expectedSize)
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), expectedSize)
  t.match(gunzipSync(await readFile(path.join(tpl.directory, 'PROJECT.prproj'))).toString(), /<Name>PROJECT<\/Name>/, 'template untouched')
})

onEachDatabase(t, 'addtemplate merges another template without overwriting', async (t, s) => {
  const base = await makeTemplate(s, { name: 'Base', patterns: [{ token: 'PROJECT', pattern: '%n' }], files: { 'Media/': null, 'PROJECT.txt': 'base' } })
  const extra = await makeTemplate(s, {
    name: 'Extra',
    type: 'avid_media_composer',
    patterns: [{ token: 'PROJECT', pattern: '%n' }],
    files: { 'PROJECT.txt': 'extra version', 'Avid MediaFiles/MXF/1/': null, 'PROJECT Settings.avs': 'name=PROJECT', 'Media/new.bin': 'abc' },
  })
  const p = await createProject(s, s.user, { name: 'Merge', template_id: base.id })
  await writeFile(path.join(p.path, 'Media', 'mine.mov'), 'my footage')
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const before = await listTree(p.path)

  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { json: { template_id: extra.id } }), 401)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: reader.token, json: { template_id: extra.id } }), 403)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: stranger.token, json: { template_id: extra.id } }), 404)
  assertProblem(t, await s.request('PUT', '/projects/99999/addtemplate', { token: s.admin.token, json: { template_id: extra.id } }), 404)
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: {} }), 422, ['template_id'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: 9999 } }), 422, ['template_id'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { templatename: 'Nope' } }), 422, ['templatename'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: 'x' } }), 422, ['template_id'])
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template: 1 } }), 422, ['template'])
  t.same(await listTree(p.path), before, 'refused requests change nothing')

  const merged = await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, form: { templatename: 'Extra' } })
  t.equal(merged.status, 200)
  t.same(await listTree(p.path), [
    'Avid MediaFiles/', 'Avid MediaFiles/MXF/', 'Avid MediaFiles/MXF/1/', 'Media/', 'Media/mine.mov', 'Media/new.bin', 'Merge Settings.avs', 'Merge.txt',
  ])
  t.equal(await readFile(path.join(p.path, 'Merge.txt'), 'utf8'), 'base', 'existing files are not overwritten')
  t.equal(await readFile(path.join(p.path, 'Media/mine.mov'), 'utf8'), 'my footage')
  t.equal(await readFile(path.join(p.path, 'Merge Settings.avs'), 'utf8'), 'name=Merge', 'the added template type substitutes its text files')
  const added = 'name=Merge'.length + 'abc'.length
  t.equal(merged.body.project.size, 'base'.length + added, 'size grows by the bytes added')
  t.equal(Number((await row(s, 'projects', { id: p.id })).size), 'base'.length + added)

  // merging again adds nothing
  const again = await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: extra.id } })
  t.equal(again.status, 200)
  t.equal(again.body.project.size, 'base'.length + added)

  // a template whose folder went missing
  const ghost = await makeTemplate(s, { name: 'Ghost' })
  const { rm } = await import('node:fs/promises')
  await rm(ghost.directory, { recursive: true })
  assertProblem(t, await s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: ghost.id } }), 404)
})

onEachDatabase(t, 'a substituted name longer than the file system allows is refused cleanly', async (t, s) => {
  const tpl = await makeTemplate(s, { name: 'Long', patterns: [{ token: 'PROJECT', pattern: '%n' }], files: { 'PROJECT-PROJECT.txt': 'x' } })
  const name = 'n'.repeat(150)
  const reply = await s.request('POST', '/projects', { token: s.user.token, json: { name, template_id: tpl.id } })
  assertProblem(t, reply, 422, ['name'])
  const root = path.join(s.dataDir, 'storage', 'default')
  t.same(await listTree(root), ['.mamkit-trash/'], 'no folder and no staging left')
  t.equal(Number((await s.runtime.db.knex('projects').count({ n: '*' }))[0].n), 0)
})

onEachDatabase(t, 'addtemplate beside uploads and a rename: the sizes add up and the files land in the renamed folder', async (t, s) => {
  const extra = await makeTemplate(s, { name: 'Sized', files: { 'Docs/a.txt': 'x'.repeat(1000), 'Docs/b.txt': 'y'.repeat(500) } })
  const p = await createProject(s, s.user, { name: 'Busy' })
  const { upload } = await import('../../helpers/media.js')
  const [merged, ...rest] = await Promise.all([
    s.request('PUT', `/projects/${p.id}/addtemplate`, { token: s.user.token, json: { template_id: extra.id } }),
    s.request('PUT', `/projects/${p.id}/rename`, { token: s.user.token, json: { name: 'Busy Renamed' } }),
    ...Array.from({ length: 4 }, (_, i) => upload(s, s.user.token, p.id, [{ name: `u${i}.bin`, data: Buffer.alloc(100) }])),
  ])
  t.equal(merged.status, 200)
  t.same(rest.map((r) => r.status), [200, 201, 201, 201, 201])
  const project = await row(s, 'projects', { id: p.id })
  t.equal(Number(project.size), 1500 + 400, 'the merge adds to the uploads instead of overwriting their sizes')
  const root = path.join(path.dirname(p.path), project.folder)
  t.ok(await exists(path.join(root, 'Docs', 'a.txt')), "the template's files are in the project's folder as it is named now")
  t.notOk(await exists(p.path), 'nothing recreated the old folder')
})
