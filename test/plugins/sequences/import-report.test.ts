import path from 'node:path'
import { readFileSync } from 'node:fs'
import ExcelJS from 'exceljs'
import t from 'tap'
import { assertProblem, createProject, idsByName, onEachDatabase, readerAndStranger, upload, waitForAsset, waitForJob, type TestServer } from '../../../core/testing/index.js'
import { makeAudio, makeVideo } from '../../helpers/media.js'

const NLE = '/work/shared/fixtures/nle'
const fixture = (name: string) => readFileSync(path.join(NLE, name))
const analysed = (a: any) => ['ready', 'failed'].includes(a.analysis_state)
const count = async (s: TestServer, table: string, where: Record<string, unknown> = {}) => Number((await s.runtime.db.knex(table).where(where).count({ n: '*' }))[0].n)

/** multipart POST /projects/:id/importsequence with one file */
function importFile(s: TestServer, token: string | undefined, projectId: number, name: string, data: Buffer | string, fields: Record<string, string> = {}) {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  form.append('file', new Blob([new Uint8Array(typeof data === 'string' ? Buffer.from(data) : data)]), name)
  return s.request('POST', `/projects/${projectId}/importsequence`, { token, multipart: form })
}

async function readXlsx(buffer: Buffer) {
  const workbook = new ExcelJS.Workbook()
  await workbook.xlsx.load(buffer as any)
  return workbook
}
const values = (sheet: ExcelJS.Worksheet, row: number) => (sheet.getRow(row).values as unknown[]).slice(1)

/**
 * A project whose files some fixture clips name: `media/sc01_sh010_anim.mov` (by path from the
 * Premiere file's D:/media/…), `sc01_sh020_anim.mov` (by file name), and a 6 s 24 fps clip of reel
 * ZZ100_50 from 01:00:00:00 (by reel and timecode, Avid EDL event 1; event 2 lies beyond it).
 */
async function setup(s: TestServer) {
  const reel = await makeVideo(path.join(s.dataDir, 'generated', 'a001.mov'), { seconds: 6, rate: 24, timecode: '01:00:00:00', reel: 'ZZ100_50' })
  const p = await createProject(s, s.user, 'Conform')
  const people = await readerAndStranger(s, p.id)
  const media = idsByName(await upload(s, s.user.token, p.id, [{ name: 'sc01_sh010_anim.mov', data: 'placeholder' }], { path: 'media' }))
  const root = idsByName(await upload(s, s.user.token, p.id, [{ name: 'sc01_sh020_anim.mov', data: 'placeholder' }, { name: 'a001.mov', file: reel }, { name: 'cut.edl', data: fixture('edl/avid_example.edl') }, { name: 'premiere.xml', data: fixture('xmeml/premiere_example.xml') }, { name: 'project.fcpxml', data: fixture('fcpxml/fcpx_project.fcpxml') }]))
  const reelAsset = await waitForAsset(s, s.user.token, root['a001.mov'], analysed)
  t.equal(reelAsset.metadata?.reel_name, 'ZZ100_50', 'the clip carries its reel name')
  return { p, ids: { ...media, ...root }, ...people }
}

onEachDatabase(t, 'importsequence: Premiere xmeml, Avid EDL and FCPXML conform to assets by path, name and reel + timecode', async (t, s) => {
  const { p, ids, reader, stranger } = await setup(s)
  assertProblem(t, await importFile(s, undefined, p.id, 'x.xml', fixture('xmeml/premiere_example.xml')), 401)

  const xml = await importFile(s, s.user.token, p.id, 'premiere_example.xml', fixture('xmeml/premiere_example.xml'))
  t.equal(xml.status, 201)
  const seq = xml.body.preditorsequence
  t.match(seq, { name: 'sc01_sh010_layerA', frame_rate: '30', start_timecode: '00:00:00:00', source_format: 'xml', project_id: p.id })
  t.equal(seq.clips.length, 22)
  t.same(seq.markers.map((m: any) => [m.frame, m.name]), [[113, 'My MArker 1'], [298, ''], [492, 'dsf']])
  // 9 clip items use D:/media/sc01_sh010_anim.mov; one uses sc01_sh020_anim.mov; the nested sequence
  // "sc01_sh010_anim" (V2, A3, A4 at 636) matches the media file's name without its extension
  t.same(seq.import.matched, { path: 9, name: 4, reel: 0 })
  t.equal(seq.import.offline_clips.length, 9)
  t.same([...new Set(seq.import.offline_clips.map((c: any) => c.name))].sort(), ['sc01_master_layerA_sh030_temp.mov', 'sc01_placeholder.wav', 'sc01_sh030_anim.mov', 'test_title', 'track_08.wav'])
  t.match(seq.import.offline_clips.find((c: any) => c.name === 'sc01_master_layerA_sh030_temp.mov' && c.track === 'V4'), { file: 'D:/media/sc01_master_layerA_sh030_temp.mov', record_in_timecode: '00:00:31:26', source_in_timecode: '00:00:04:13' })
  const v1 = seq.clips.find((c: any) => c.track === 'V1')
  t.match(v1, { asset_id: ids['sc01_sh010_anim.mov'], record_in: 536, record_out: 636, source_in: 0, source_out: 100, record_in_timecode: '00:00:17:26' })
  t.equal(v1.file_name, 'sc01_sh010_anim.mov', 'a conformed clip names the asset\'s original (its absolute path only to administrators)')
  t.equal(seq.clips.find((c: any) => c.name === 'sc01_sh020_anim.mov').asset_id, ids['sc01_sh020_anim.mov'])
  t.equal(await count(s, 'preditor_sequence_clips', { sequence_id: seq.id }), 22)
  t.equal(await count(s, 'preditor_sequence_clips', { sequence_id: seq.id, asset_id: null }), 9)

  const edl = await importFile(s, s.user.token, p.id, 'avid.edl', fixture('edl/avid_example.edl'), { frame_rate: '24' })
  t.equal(edl.status, 201)
  const cut = edl.body.preditorsequence
  t.match(cut, { name: 'Avid_Example.01', frame_rate: '24', start_timecode: '00:59:53:11', source_format: 'edl' })
  t.same(cut.import.matched, { path: 0, name: 0, reel: 1 })
  t.match(cut.clips[0], { name: 'take_1', asset_id: ids['a001.mov'], source_in: 101, source_out: 132, source_in_timecode: '01:00:04:05', record_in_timecode: '00:59:53:11', record_out_timecode: '00:59:54:18' }, 'event 1 lies in reel ZZ100_50 from 01:00:00:00: its source is frames 101–132 of the clip')
  t.same(cut.import.offline_clips, [{ track: 'V1', name: 'take_2', reel: 'ZZ100_50', file: 'S:/path/to/ZZ100_502A.take_2.0101.exr', record_in_timecode: '00:59:54:18', record_out_timecode: '00:59:56:20', source_in_timecode: '01:00:06:13' }], 'event 2 starts beyond the clip\'s 6 s')

  // a referenced asset instead of an upload; the second import of one name gets the next free name
  const byAsset = await Promise.all([1, 2].map(() => s.request('POST', `/projects/${p.id}/importsequence`, { token: s.user.token, json: { asset_id: ids['project.fcpxml'] } })))
  t.same(byAsset.map((r) => r.status), [201, 201])
  t.same(byAsset.map((r) => r.body.preditorsequence.name).sort(), ['OpenTimeline_Project', 'OpenTimeline_Project (2)'], 'two imports at once: distinct names')
  const fcp = byAsset[0].body.preditorsequence
  t.match(fcp, { source_format: 'fcpxml', source_asset_id: ids['project.fcpxml'], frame_rate: '30', width: 1920, height: 1080 })
  t.equal(fcp.clips.length, 16)
  t.equal(fcp.import.offline_clips.length, 16, 'no asset of the project is named like these clips')
  t.equal(fcp.markers.length, 8)
  t.match(fcp.clips.find((c: any) => c.name === 'IMG_0857' && c.record_in === 1937), { track: 'V3', record_in_timecode: '00:01:04:17' })

  // refusals change nothing
  const before = await count(s, 'preditor_sequences')
  assertProblem(t, await s.request('POST', `/projects/${p.id}/importsequence`, { token: s.user.token, json: {} }), 422, ['file'])
  assertProblem(t, await importFile(s, s.user.token, p.id, 'notes.txt', 'hello there'), 422, ['file'])
  assertProblem(t, await importFile(s, s.user.token, p.id, 'broken.xml', '<?xml version="1.0"?><xmeml version="4"><sequence><name>x</name></sequence></xmeml>'), 422, ['file'])
  assertProblem(t, await importFile(s, s.user.token, p.id, '25fps.edl', fixture('edl/25fps.edl'), { frame_rate: '24' }), 422, ['file'])
  assertProblem(t, await importFile(s, s.user.token, p.id, 'x.edl', fixture('edl/25fps.edl'), { frame_rate: 'fast' }), 422, ['frame_rate'])
  assertProblem(t, await importFile(s, s.user.token, p.id, 'x.edl', fixture('edl/25fps.edl'), { format: 'aaf' }), 422, ['format'])
  assertProblem(t, await s.request('POST', `/projects/${p.id}/importsequence`, { token: s.user.token, json: { asset_id: 999999 } }), 422, ['asset_id'])
  assertProblem(t, await s.request('POST', `/projects/${p.id}/importsequence`, { token: s.user.token, json: { asset_id: ids['a001.mov'] } }), 422, ['asset_id'])
  assertProblem(t, await importFile(s, reader.token, p.id, 'x.edl', fixture('edl/avid_example.edl')), 403)
  assertProblem(t, await importFile(s, stranger.token, p.id, 'x.edl', fixture('edl/avid_example.edl')), 404)
  assertProblem(t, await importFile(s, s.user.token, 999999, 'x.edl', fixture('edl/avid_example.edl')), 404)
  t.equal(await count(s, 'preditor_sequences'), before, 'no sequence was made')
  const at25 = await importFile(s, s.user.token, p.id, '25fps.edl', fixture('edl/25fps.edl'), { frame_rate: '25', name: 'Scene 2' })
  t.match(at25.body.preditorsequence, { name: 'Scene 2', frame_rate: '25', duration: 496 })
})

onEachDatabase(t, 'generate_sequence_report: clip usage and music cue sheet as XLSX from a job', async (t, s) => {
  const { p, ids, stranger } = await setup(s)
  const ask = (id: number, json: Record<string, unknown>, token = s.user.token) => s.request('POST', `/assets/${id}/generate_sequence_report`, { token, json })
  assertProblem(t, await s.request('POST', `/assets/${ids['cut.edl']}/generate_sequence_report`, { json: { type: 'clip_usage' } }), 401)
  assertProblem(t, await ask(ids['cut.edl'], { type: 'budget' }), 422, ['type'])
  assertProblem(t, await ask(ids['cut.edl'], { type: 'clip_usage', frame_rate: 'x' }), 422, ['frame_rate'])
  assertProblem(t, await ask(ids['cut.edl'], { type: 'clip_usage' }, stranger.token), 404)
  assertProblem(t, await ask(999999, { type: 'clip_usage' }), 404)

  const usage = await ask(ids['cut.edl'], { type: 'clip_usage', frame_rate: '24' })
  t.equal(usage.status, 202)
  const done = await waitForJob(s, s.user.token, usage.body.job.id)
  t.equal(done.state, 'finished')
  assertProblem(t, await s.request('GET', `/assets/${ids['cut.edl']}/sequence_reports/${usage.body.job.id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', `/assets/${ids['premiere.xml']}/sequence_reports/${usage.body.job.id}`, { token: s.user.token }), 404, undefined)
  const file = await s.request('GET', `/assets/${ids['cut.edl']}/sequence_reports/${usage.body.job.id}`, { token: s.user.token })
  t.equal(file.status, 200)
  t.match(file.headers.get('content-type'), /spreadsheetml/)
  const book = await readXlsx(file.buffer)
  const events = book.getWorksheet('Events')!
  t.equal(events.rowCount, 3, 'a header and two events')
  t.same(values(events, 2).slice(0, 10), [1, 'V1', 'take_1', 'ZZ100_50', '01:00:04:05', '01:00:05:12', '00:59:53:11', '00:59:54:18', '00:00:01:07', 31])
  t.same(values(events, 2).slice(10, 12), [ids['a001.mov'], 'a001.mov'], 'conformed to the reel\'s clip')
  t.equal(values(events, 2)[13], 'online')
  t.same(values(events, 3).slice(2, 5), ['take_2', 'ZZ100_50', '01:00:06:13'])
  t.equal(values(events, 3)[13], 'offline')
  const sources = book.getWorksheet('Sources')!
  t.same(sources.getColumn(1).values.slice(2), ['a001.mov', 'S:/path/to/ZZ100_502A.take_2.0101.exr'])

  // the music of the Premiere cut: two WAVs, each a stereo pair on two audio tracks; one of them is
  // in the project (conformed by name) with its composer and publisher in custom metadata
  const wav = await makeAudio(path.join(s.dataDir, 'generated', 'track_08.wav'), { seconds: 8 })
  const wavId = idsByName(await upload(s, s.user.token, p.id, [{ name: 'track_08.wav', file: wav }]))['track_08.wav']
  await waitForAsset(s, s.user.token, wavId, analysed)
  const set = await s.request('POST', '/custom_metadata_sets', { token: s.admin.token, json: { custom_metadata_set: { name: 'Music', applies_to: 'asset' } } })
  for (const name of ['composer', 'publisher']) t.equal((await s.request('POST', '/custom_metadata_fields', { token: s.admin.token, json: { custom_metadata_field: { name, type: 'text', custom_metadata_set_id: set.body.custommetadataset.id } } })).status, 201)
  t.equal((await s.request('PUT', `/assets/${wavId}/update_metadata`, { token: s.user.token, json: { custom_metadata: { composer: 'Ana Sound', publisher: 'Cue Music Ltd' } } })).status, 200)
  const cue = await ask(ids['premiere.xml'], { type: 'music_cue_sheet' })
  t.equal((await waitForJob(s, s.user.token, cue.body.job.id)).state, 'finished')
  const sheet = (await readXlsx((await s.request('GET', `/assets/${ids['premiere.xml']}/sequence_reports/${cue.body.job.id}`, { token: s.user.token })).buffer)).getWorksheet('Cue sheet')!
  t.same(values(sheet, 4).slice(0, 3), ['Cue', 'Title', 'Composer(s)'])
  t.same([values(sheet, 5)[0], values(sheet, 5)[1], values(sheet, 5)[7], values(sheet, 5)[8], values(sheet, 5)[9], values(sheet, 5)[10]], ['1M01', 'track_08', '00:00:05:03', '00:00:11:21', '00:00:07', 'A5 A6'], 'track_08.wav from frame 153 for 198 frames at 30 fps')
  t.same([values(sheet, 5)[2], values(sheet, 5)[3], values(sheet, 5)[11]], ['Ana Sound', 'Cue Music Ltd', 'track_08.wav'], 'composer and publisher from the conformed asset\'s custom metadata')
  t.same([values(sheet, 6)[0], values(sheet, 6)[1], values(sheet, 6)[7], values(sheet, 6)[10]], ['1M02', 'sc01_placeholder', '00:00:11:05', 'A3 A4'])
  t.equal(values(sheet, 7).length, 0, 'two cues, then the total')

  // a file that is no sequence fails the job, and its report is no download
  const bad = await ask(ids['a001.mov'], { type: 'clip_usage' })
  const failed = await waitForJob(s, s.user.token, bad.body.job.id)
  t.equal(failed.state, 'failed')
  t.match(failed.error, /not a sequence file/)
  assertProblem(t, await s.request('GET', `/assets/${ids['a001.mov']}/sequence_reports/${bad.body.job.id}`, { token: s.user.token }), 409)
  void p
})
