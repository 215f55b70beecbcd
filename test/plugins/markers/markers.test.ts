import t from 'tap'
import path from 'node:path'
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { promisify } from 'node:util'
import ExcelJS from 'exceljs'
import { assertProblem, onEachDatabase, upload, waitForAsset, waitForJob, idsByName, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import { makeVideo } from '../../helpers/media.js'
import { row } from '../projects/fixtures.js'

const run = promisify(execFile)
const has = (tool: string) => run(tool, ['-v']).then(() => true, (err) => err.code !== 'ENOENT')

/** a 4 s clip at 25 fps from 01:00:00:00 (100 frames) and a 29.97 DF one from 00:59:59;28, with proxies */
async function setup(s: TestServer) {
  const gen = path.join(s.dataDir, 'generated')
  const clip = await makeVideo(path.join(gen, 'clip.mov'), { seconds: 4, title: 'Scene 1' })
  const ntsc = await makeVideo(path.join(gen, 'ntsc.mov'), { seconds: 3, rate: '30000/1001' as any, timecode: '00:59:59;28', title: 'NTSC' })
  const p = await createProject(s, s.user, { name: 'Notes' })
  const people = await readerAndStranger(s, p.id)
  const up = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }, { name: 'ntsc.mov', file: ntsc }])
  const ids = idsByName(up)
  await waitForAsset(s, s.user.token, ids['clip.mov'])
  await waitForAsset(s, s.user.token, ids['ntsc.mov'])
  return { p, clipId: ids['clip.mov'], ntscId: ids['ntsc.mov'], ...people }
}

const markerRows = async (s: TestServer, assetId: number) =>
  (await s.runtime.db.knex('marker_descriptions').where({ asset_id: assetId }).orderBy('id').select('in_frame', 'out_frame', 'text', 'color', 'guid', 'parent_id')).map((r: any) => ({
    ...r,
    in_frame: Number(r.in_frame),
    out_frame: Number(r.out_frame),
    parent_id: r.parent_id === null ? null : Number(r.parent_id),
  }))

onEachDatabase(t, 'markers: create, list, change, delete with frame/timecode validation and access through the project', async (t, s) => {
  const { p, clipId, ntscId, reader, stranger } = await setup(s)
  const url = `/assets/${clipId}/marker_descriptions`
  assertProblem(t, await s.request('GET', url), 401)
  assertProblem(t, await s.request('GET', url, { token: stranger.token }), 404)
  assertProblem(t, await s.request('POST', url, { token: reader.token, json: { marker_description: { in: 10, text: 'x' } } }), 403)
  assertProblem(t, await s.request('POST', url, { token: stranger.token, json: { marker_description: { in: 10, text: 'x' } } }), 404)
  assertProblem(t, await s.request('GET', '/assets/999999/marker_descriptions', { token: s.user.token }), 404)

  const made = await s.request('POST', url, { token: s.user.token, json: { marker_description: { in: '01:00:01:00', out: '01:00:02:00', text: 'Logo too early', color: 'Blue', guid: 'avid-1', track: 'V1' } } })
  t.equal(made.status, 201, made.text)
  t.same(Object.keys(made.body), ['markerdescription'])
  t.match(made.body.markerdescription, { asset_id: clipId, in: 25, out: 50, tc_in: '01:00:01:00', tc_out: '01:00:02:00', duration: 26, rate: '25', text: 'Logo too early', color: 'blue', guid: 'avid-1', track: 'V1', created_by: s.user.id, created_by_name: 'editor', replies: [] })
  const id = made.body.markerdescription.id
  const form = await s.request('POST', url, { token: s.user.token, form: { 'marker_description[in]': '75', 'marker_description[text]': 'Cut here' } })
  t.equal(form.status, 201, 'form parameters')
  t.match(form.body.markerdescription, { in: 75, out: 75, tc_in: '01:00:03:00', color: 'red' })
  const top = await s.request('POST', url, { token: s.user.token, json: { in: 0, text: 'first frame' } })
  t.equal(top.status, 201, 'top-level names work too')
  const reply = await s.request('POST', url, { token: reader.token === '' ? '' : s.user.token, json: { marker_description: { parent_id: id, text: 'Agreed, move it' } } })
  t.equal(reply.status, 201)
  t.match(reply.body.markerdescription, { parent_id: id, in: 25, out: 50, color: 'blue' })

  // bad input names the field and writes nothing
  const before = await markerRows(s, clipId)
  const bad: Array<[unknown, string[], number?]> = [
    [{ marker_description: { in: 100, text: 'x' } }, ['marker_description[in]']],
    [{ marker_description: { in: '01:00:04:00', text: 'x' } }, ['marker_description[in]']],
    [{ marker_description: { in: '00:59:59:00', text: 'x' } }, ['marker_description[in]']],
    [{ marker_description: { in: '01:00:00:25', text: 'x' } }, ['marker_description[in]']],
    [{ marker_description: { in: 'soon', text: 'x' } }, ['marker_description[in]']],
    [{ marker_description: { in: 20, out: 10, text: 'x' } }, ['marker_description[out]']],
    [{ marker_description: { in: 10, out: 100 } }, ['marker_description[out]']],
    [{ marker_description: { in: 10, rate: 29.97 } }, ['marker_description[rate]']],
    [{ marker_description: { in: 10, color: 'chartreuse' } }, ['marker_description[color]']],
    [{ marker_description: { in: 10, track: 'X9' } }, ['marker_description[track]']],
    [{ marker_description: { text: 'x' } }, ['marker_description[in]']],
    [{ marker_description: { in: 10, parent_id: 999999 } }, ['marker_description[parent_id]']],
    [{ marker_description: { parent_id: reply.body.markerdescription.id, text: 'nested' } }, ['marker_description[parent_id]']],
    [{ marker_description: { in: 10, guid: 'x'.repeat(129) } }, ['marker_description[guid]']],
    [{ in: 10, color: 'nope' }, ['color']],
  ]
  for (const [json, params] of bad) assertProblem(t, await s.request('POST', url, { token: s.user.token, json }), 422, params)
  assertProblem(t, await s.request('POST', url, { token: s.user.token, json: { marker_description: { in: 5, guid: 'avid-1' } } }), 409, ['marker_description[guid]'])
  t.same(await markerRows(s, clipId), before, 'refused requests write nothing')
  // the same rate in any spelling is fine
  t.equal((await s.request('POST', url, { token: s.user.token, json: { marker_description: { in: 99, rate: '25/1' } } })).status, 201)

  // drop-frame asset: timecode in and out
  const df = await s.request('POST', `/assets/${ntscId}/marker_descriptions`, { token: s.user.token, json: { marker_description: { in: '01:00:00;00', out: '01:00:01;00', text: 'DF' } } })
  t.equal(df.status, 201, df.text)
  t.match(df.body.markerdescription, { in: 2, out: 32, tc_in: '01:00:00;00', tc_out: '01:00:01;00', rate: '30000/1001', drop_frame: true })
  assertProblem(t, await s.request('POST', `/assets/${ntscId}/marker_descriptions`, { token: s.user.token, json: { marker_description: { in: 10, rate: 25 } } }), 422, ['marker_description[rate]'])

  // list: timeline order, replies inside, root key `array`; readers may list
  const list = await s.request('GET', url, { token: reader.token })
  t.equal(list.status, 200)
  t.same(Object.keys(list.body), ['array'])
  t.same(list.body.array.map((m: any) => m.in), [0, 25, 75, 99])
  t.same(list.body.array[1].replies.map((r: any) => r.text), ['Agreed, move it'])
  const page = await s.request('GET', url, { token: reader.token, query: { per_page: '2' } })
  t.same(page.body.array.map((m: any) => m.in), [0, 25])
  const next = await s.request('GET', url, { token: reader.token, query: { per_page: '2', after: page.headers.get('x-next-after')! } })
  t.same(next.body.array.map((m: any) => m.in), [75, 99], 'keyset paging')
  assertProblem(t, await s.request('GET', url, { token: reader.token, query: { after: 'garbage' } }), 422, ['after'])

  // update
  const mUrl = `${url}/${id}`
  assertProblem(t, await s.request('PUT', mUrl, { token: reader.token, json: { marker_description: { text: 'x' } } }), 403)
  assertProblem(t, await s.request('PUT', `${url}/999999`, { token: s.user.token, json: { marker_description: { text: 'x' } } }), 404)
  assertProblem(t, await s.request('PUT', `/assets/${ntscId}/marker_descriptions/${id}`, { token: s.user.token, json: { marker_description: { text: 'x' } } }), 404, undefined)
  assertProblem(t, await s.request('PUT', mUrl, { token: s.user.token, json: { marker_description: { out: 10 } } }), 422, ['marker_description[out]'])
  const changed = await s.request('PUT', mUrl, { token: s.user.token, json: { marker_description: { text: 'Logo on time', color: 'green', out: 60 } } })
  t.equal(changed.status, 200)
  t.match(changed.body.markerdescription, { in: 25, out: 60, text: 'Logo on time', color: 'green', replies: [{ text: 'Agreed, move it' }] })

  // frozen projects refuse writes, reads keep working
  t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
  assertProblem(t, await s.request('POST', url, { token: s.user.token, json: { marker_description: { in: 1 } } }), 423)
  assertProblem(t, await s.request('PUT', mUrl, { token: s.user.token, json: { marker_description: { text: 'y' } } }), 423)
  assertProblem(t, await s.request('DELETE', mUrl, { token: s.user.token }), 423)
  t.equal((await s.request('GET', url, { token: s.user.token })).status, 200)
  t.equal((await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })).status, 200)

  // delete takes the replies along
  assertProblem(t, await s.request('DELETE', mUrl, { token: reader.token }), 403)
  const gone = await s.request('DELETE', mUrl, { token: s.user.token })
  t.equal(gone.status, 200)
  t.equal(gone.body.markerdescription.id, id)
  t.same((await markerRows(s, clipId)).map((r) => r.in_frame), [75, 0, 99], 'marker and reply removed')
  assertProblem(t, await s.request('DELETE', mUrl, { token: s.user.token }), 404)
})

onEachDatabase(t, 'markers: bulk_update of editing-suite GUIDs, username guess, push_to_app', async (t, s) => {
  const { clipId, reader } = await setup(s)
  const url = `/assets/${clipId}/marker_descriptions`
  const ids: number[] = []
  for (const [i, text] of ['one', 'two', 'three'].entries()) ids.push((await s.request('POST', url, { token: s.user.token, json: { marker_description: { in: i * 10, text, author: i === 1 ? 'Ed Itor' : i === 2 ? 'Walter Murch' : undefined } } })).body.markerdescription.id)
  await s.request('PUT', `/users/${s.user.id}`, { token: s.admin.token, json: { user: { firstname: 'Ed', lastname: 'Itor' } } })

  const bulk = (json: unknown, token = s.user.token) => s.request('PUT', `${url}/bulk_update`, { token, json })
  assertProblem(t, await bulk({ marker_descriptions: [{ id: ids[0], guid: 'g0' }] }, reader.token), 403)
  assertProblem(t, await bulk({ marker_descriptions: [{ id: ids[0], guid: 'g0' }, { id: 999999, guid: 'g9' }] }), 422, ['marker_descriptions[1][id]'])
  assertProblem(t, await bulk({ marker_descriptions: [{ in: '01:00:00:10', text: 'nope', guid: 'g1' }] }), 422, ['marker_descriptions[0][in]'])
  assertProblem(t, await bulk({ marker_descriptions: [{ id: ids[0], guid: 'same' }, { id: ids[1], guid: 'same' }] }), 422, ['marker_descriptions[1][guid]'])
  assertProblem(t, await bulk({ marker_descriptions: [{ guid: 'g' }] }), 422, ['marker_descriptions[0][id]'])
  assertProblem(t, await bulk({ marker_descriptions: [] }), 422, ['marker_descriptions'])
  t.same((await markerRows(s, clipId)).map((r) => r.guid), [null, null, null], 'all or nothing')
  const done = await bulk({ marker_descriptions: [{ id: ids[0], guid: 'g0' }, { in: '01:00:00:10', text: 'two', guid: 'g1' }, { in: 20, text: 'three', guid: 'g2' }] })
  t.equal(done.status, 200, done.text)
  t.same(done.body.array.map((m: any) => m.guid), ['g0', 'g1', 'g2'])
  t.equal((await bulk({ marker_descriptions: [{ id: ids[0], guid: 'g0' }] })).status, 200, 'idempotent')
  // ids may move between markers of one request (a swap)
  t.equal((await bulk({ marker_descriptions: [{ id: ids[0], guid: 'g1' }, { id: ids[1], guid: 'g0' }] })).status, 200)
  t.same((await markerRows(s, clipId)).map((r) => r.guid), ['g1', 'g0', 'g2'])
  assertProblem(t, await bulk({ marker_descriptions: [{ id: ids[0], guid: 'g2' }] }), 409)
  // two requests racing for one id: one wins, the other is a 409, never a 500
  const race = await Promise.all([bulk({ marker_descriptions: [{ id: ids[0], guid: 'raced' }] }), bulk({ marker_descriptions: [{ id: ids[1], guid: 'raced' }] })])
  t.same(race.map((r) => r.status).sort(), [200, 409], 'racing requests: one 200, one 409')

  const who = (i: number) => s.request('GET', `${url}/${ids[i]}/username`, { token: reader.token })
  t.match((await who(0)).body.hash, { username: 'editor', matched_by: 'creator' })
  t.match((await who(1)).body.hash, { username: 'editor', user_id: s.user.id, matched_by: 'full_name' })
  t.match((await who(2)).body.hash, { username: 'Walter Murch', user_id: null, matched_by: 'editor' })
  assertProblem(t, await s.request('GET', `${url}/999999/username`, { token: reader.token }), 404)

  // push to the editing client of an edit
  const push = (headers: Record<string, string> = {}) => s.request('PUT', `${url}/${ids[1]}/push_to_app`, { token: s.user.token, headers })
  assertProblem(t, await push(), 400, ['X-APP-EDIT'])
  assertProblem(t, await push({ 'X-APP-EDIT': 'nobody' }), 422, ['X-APP-EDIT'])
  t.equal((await s.request('POST', '/edits', { token: s.admin.token, json: { edit: { name: 'suite-1', password: 'secret-pass-1' } } })).status, 201)
  await s.request('POST', url, { token: s.user.token, json: { marker_description: { parent_id: ids[1], text: 'a reply' } } })
  const queued = await push({ 'X-APP-EDIT': 'suite-1' })
  t.equal(queued.status, 202)
  const job = await waitForJob(s, s.user.token, queued.body.job.id, { route: '/asset_status' })
  t.equal(job.state, 'finished')
  const stored = await row(s, 'jobs', { id: queued.body.job.id })
  t.ok(stored.edit_id, 'the job belongs to the edit')
  const result = typeof stored.result === 'string' ? JSON.parse(stored.result) : stored.result
  t.match(result.markerdescription, { id: ids[1], text: 'two', replies: [{ text: 'a reply' }] }, 'the client collects the marker with its replies')
})

onEachDatabase(t, 'markers: editing-suite downloads, imports, XLSX and annotation PDF', async (t, s) => {
  const { clipId, ntscId, reader, stranger } = await setup(s)
  const url = `/assets/${clipId}/marker_descriptions`
  for (const [i, color] of ['red', 'green', 'orange', 'denim'].entries())
    await s.request('POST', url, { token: s.user.token, json: { marker_description: { in: i * 20, out: i * 20 + 5, text: `=note ${i} & <b>`, color, guid: i === 0 ? 'avid-0' : undefined } } })

  const dl = (format?: string, token = reader.token, id = clipId) => s.request('GET', `/assets/${id}/download_editor_xml`, { token, query: format ? { format } : {} })
  assertProblem(t, await dl(undefined, stranger.token), 404)
  const aaf = await dl('aaf')
  assertProblem(t, aaf, 422, ['format'])
  const avidXml = await dl()
  t.equal(avidXml.status, 200)
  t.match(avidXml.headers.get('content-disposition'), /Scene_1_markers\.xml/)
  t.match(avidXml.text, /<Avid:StreamItems/)
  t.match(avidXml.text, /_ATN_CRM_ID<\/AvProp>\s*<AvProp[^>]*>avid-0</)
  const exported: Record<string, string> = {}
  for (const format of ['avid_xml', 'avid_txt', 'edl', 'fcp7_xml', 'fcpxml', 'resolve_edl']) {
    const reply = await dl(format)
    t.equal(reply.status, 200, `${format} downloads`)
    exported[format] = reply.text
  }
  t.match(exported.edl, /\* LOC: 01:00:00:20 GREEN\s+=note 1 & <b>/)

  // import each file onto the clip: markers arrive again with their frames and text
  const before = (await s.request('GET', url, { token: s.user.token })).body.array.length
  for (const format of ['avid_txt', 'fcp7_xml', 'fcpxml', 'resolve_edl']) {
    const form = new FormData()
    form.append('file', new Blob([exported[format]]), `markers.${format}`)
    const imported = await s.request('POST', url, { token: s.user.token, multipart: form })
    t.equal(imported.status, 201, `${format} imports: ${imported.text.slice(0, 200)}`)
    t.same(imported.body.array.map((m: any) => [m.in, m.out, m.text]), [0, 1, 2, 3].map((i) => [i * 20, i * 20 + 5, `=note ${i} & <b>`]), `${format}: frames and text`)
  }
  t.equal((await s.request('GET', url, { token: s.user.token })).body.array.length, before + 16)
  const dup = new FormData()
  dup.append('file', new Blob([exported.avid_xml]), 'markers.xml')
  assertProblem(t, await s.request('POST', url, { token: s.user.token, multipart: dup }), 409, ['file'])
  const junk = new FormData()
  junk.append('file', new Blob(['hello there']), 'x.txt')
  assertProblem(t, await s.request('POST', url, { token: s.user.token, multipart: junk }), 422, ['file'])
  const late = new FormData()
  late.append('file', new Blob(['ana\t01:00:09:00\tV1\tred\ttoo late\t1\n']), 'late.txt')
  assertProblem(t, await s.request('POST', url, { token: s.user.token, multipart: late }), 422, ['file'])
  const ro = new FormData()
  ro.append('file', new Blob([exported.avid_txt]), 'm.txt')
  assertProblem(t, await s.request('POST', url, { token: reader.token, multipart: ro }), 403)

  // XLSX: one row per marker, colours as fills, a frame grab per marker
  assertProblem(t, await s.request('GET', `/assets/${clipId}/download_xls`, { token: stranger.token }), 404)
  const xls = await s.request('GET', `/assets/${clipId}/download_xls`, { token: reader.token })
  t.equal(xls.status, 200, xls.text.slice(0, 200))
  const book = new ExcelJS.Workbook()
  await book.xlsx.load(xls.buffer as any)
  const sheet = book.getWorksheet('Markers')!
  t.equal(sheet.rowCount, 1 + before + 16)
  t.same((sheet.getRow(2).values as unknown[]).slice(1, 7), [1, '01:00:00:00', '01:00:00:05', '00:00:00:06', 'red', '=note 0 & <b>'], 'timecodes, duration, colour and text (a leading = stays text)')
  t.equal(sheet.getImages().length, before + 16, 'a frame grab per marker')

  // annotation PDF: a job, then the file
  assertProblem(t, await s.request('PUT', '/assets/annotations_to_pdf', { token: stranger.token, json: { asset_ids: [clipId] } }), 404)
  assertProblem(t, await s.request('PUT', '/assets/annotations_to_pdf', { token: reader.token, json: { asset_ids: [] } }), 422, ['asset_ids'])
  const pdfJob = await s.request('PUT', '/assets/annotations_to_pdf', { token: reader.token, json: { asset_ids: [clipId, ntscId] } })
  t.equal(pdfJob.status, 202)
  const ended = await waitForJob(s, reader.token, pdfJob.body.job.id)
  t.equal(ended.state, 'finished', ended.error ?? '')
  assertProblem(t, await s.request('GET', `/assets/annotations_to_pdf/${pdfJob.body.job.id}`, { token: stranger.token }), 404)
  const pdf = await s.request('GET', `/assets/annotations_to_pdf/${pdfJob.body.job.id}`, { token: reader.token })
  t.equal(pdf.status, 200)
  t.equal(pdf.buffer.subarray(0, 5).toString(), '%PDF-')
  if (await has('pdftotext')) {
    const dir = await mkdtemp(path.join(tmpdir(), 'pdf-'))
    const file = path.join(dir, 'a.pdf')
    await writeFile(file, pdf.buffer)
    const { stdout } = await run('pdftotext', [file, '-'])
    t.match(stdout, /clip\.mov/)
    t.match(stdout, /01:00:00:00 – 01:00:00:05/)
    t.match(stdout, /01:00:00:20/)
    t.match(stdout, /=note 3 & <b>/)
    const images = (await run('pdfimages', ['-list', file])).stdout.trim().split('\n').length - 2
    t.equal(images, before + 16, 'a frame grab per marker (pdfimages)')
  } else t.comment('pdftotext (Debian poppler-utils) is not installed: PDF text not checked')
})
