import path from 'node:path'
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { promisify } from 'node:util'
import t from 'tap'
import { assertProblem, createProject, idsByName, onEachDatabase, readerAndStranger, teamWith, upload, waitForAsset, type TestServer } from '../../../core/testing/index.js'
import { makeAudio, makeVideo } from '../../helpers/media.js'
import { readSequence } from '../../../plugins/sequences/formats/index.js'

const run = promisify(execFile)
const analysed = (a: any) => ['ready', 'failed'].includes(a.analysis_state)

/** a 2 s clip at 25 fps from 01:00:00:00 (50 frames), a 2 s WAV, a 29.97 clip and a text file in one project */
async function setup(s: TestServer) {
  const gen = path.join(s.dataDir, 'generated')
  const clip = await makeVideo(path.join(gen, 'clip.mov'), { seconds: 2, rate: 25, timecode: '01:00:00:00', title: 'Scene 1' })
  const music = await makeAudio(path.join(gen, 'music.wav'), { seconds: 2 })
  const ntsc = await makeVideo(path.join(gen, 'ntsc.mov'), { seconds: 1, rate: '30000/1001' as any, timecode: '00:59:59;28' })
  const p = await createProject(s, s.user, 'Cutting room')
  const people = await readerAndStranger(s, p.id)
  const up = await upload(s, s.user.token, p.id, [{ name: 'clip.mov', file: clip }, { name: 'music.wav', file: music }, { name: 'ntsc.mov', file: ntsc }, { name: 'notes.txt', data: 'not media' }])
  const ids = idsByName(up)
  for (const name of ['clip.mov', 'music.wav', 'ntsc.mov']) t.ok(analysed(await waitForAsset(s, s.user.token, ids[name], analysed)), `${name} analysed`)
  return { p, ids, ...people }
}

const rows = (s: TestServer, table: string, where: Record<string, unknown> = {}) => s.runtime.db.knex(table).where(where).orderBy('id')
const count = async (s: TestServer, table: string, where: Record<string, unknown> = {}) => Number((await s.runtime.db.knex(table).where(where).count({ n: '*' }))[0].n)

onEachDatabase(t, 'sequences: create, show, list, change and delete, with team rights of their own', async (t, s) => {
  const { p, reader, stranger, readersTeam } = await setup(s)
  assertProblem(t, await s.request('POST', '/preditor_sequences', { json: { project_id: p.id, name: 'Cut 1' } }), 401)

  const made = await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: ' Cut 1 ', frame_rate: 25 } })
  t.equal(made.status, 201)
  const seq = made.body.preditorsequence
  t.match(seq, { project_id: p.id, name: 'Cut 1', frame_rate: '25', drop_frame: false, start_timecode: '01:00:00:00', clips: [], markers: [], duration: 0, locked_by: null })
  const [row] = await rows(s, 'preditor_sequences', { id: seq.id })
  t.match(row, { name: 'Cut 1', rate_num: 25, rate_den: 1, start_frame: 90000 })
  const teams = await s.request('GET', `/preditor_sequences/${seq.id}/teams`, { token: s.user.token })
  t.same(teams.body.teams.map((x: any) => [x.user_owned, x.read, x.write]), [[true, true, true]], 'the creator\'s own team may read and change it')
  const rights = await s.request('GET', `/preditor_sequences/${seq.id}/effective_access_rights`, { token: s.user.token })
  t.ok(rights.body.hash[String(s.user.id)].write, 'effective rights name the creator')

  const wrapped = await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { preditor_sequence: { project_id: p.id, name: 'NTSC cut', frame_rate: '30000/1001', start_timecode: '00:59:59;28' } } })
  t.equal(wrapped.status, 201)
  t.match(wrapped.body.preditorsequence, { frame_rate: '30000/1001', drop_frame: true, start_timecode: '00:59:59;28' })

  // bad input names the parameter as sent, and nothing is made
  const before = await count(s, 'preditor_sequences')
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id } }), 422, ['name'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { preditor_sequence: { name: 'x' } } }), 422, ['preditor_sequence[project_id]'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'x', frame_rate: 'fast' } }), 422, ['frame_rate'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'x', frame_rate: 25, drop_frame: true } }), 422, ['drop_frame'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'x', start_timecode: '01:00:00:30' } }), 422, ['start_timecode'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'x', markers: [{ frame: 1, color: 'plaid' }] } }), 422, ['markers[0][color]'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: stranger.token, json: { project_id: p.id, name: 'x' } }), 422, ['project_id'])
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: reader.token, json: { project_id: p.id, name: 'x' } }), 403)
  assertProblem(t, await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'Cut 1' } }), 409, ['name'])
  t.equal(await count(s, 'preditor_sequences'), before, 'nothing was made')

  // two creations of one name at once: one wins, the other is a 409
  const race = await Promise.all([1, 2].map(() => s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'Same' } })))
  t.same(race.map((r) => r.status).sort(), [201, 409])
  t.equal(await count(s, 'preditor_sequences', { name: 'Same' }), 1)

  // reading: the list is scoped by the sequence's own rights
  const list = await s.request('GET', '/preditor_sequences', { token: s.user.token, query: { project_id: String(p.id) } })
  t.same(list.body.preditor_sequences.map((x: any) => x.name), ['Cut 1', 'NTSC cut', 'Same'])
  t.match(list.body.preditor_sequences[0], { clip_count: 0, offline_clips: 0, marker_count: 0 })
  t.equal(list.headers.get('x-total-count'), '3')
  t.same((await s.request('GET', '/preditor_sequences', { token: stranger.token })).body.preditor_sequences, [])
  assertProblem(t, await s.request('GET', `/preditor_sequences/${seq.id}`, { token: stranger.token }), 404)
  assertProblem(t, await s.request('GET', '/preditor_sequences/999999', { token: s.user.token }), 404)
  assertProblem(t, await s.request('GET', '/preditor_sequences', { token: s.user.token, query: { after: 'nonsense' } }), 422, ['after'])

  // a team given read may look, not change
  t.equal((await s.request('PUT', `/preditor_sequences/${seq.id}/teams`, { token: s.user.token, json: { team_id: readersTeam, read: true } })).status, 200)
  t.equal((await s.request('GET', `/preditor_sequences/${seq.id}`, { token: reader.token })).status, 200)
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: reader.token, json: { name: 'Mine' } }), 403)
  assertProblem(t, await s.request('DELETE', `/preditor_sequences/${seq.id}`, { token: reader.token }), 403)

  // changes
  const renamed = await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { name: 'Cut 2', start_timecode: '10:00:00:00', width: 1920, height: 1080, markers: [{ frame: 10, duration: 5, name: 'Logo', comment: 'too early', color: 'green' }, { frame: 2, name: 'Start' }] } })
  t.equal(renamed.status, 200)
  t.match(renamed.body.preditorsequence, { name: 'Cut 2', start_timecode: '10:00:00:00', width: 1920, height: 1080 })
  t.same(renamed.body.preditorsequence.markers.map((m: any) => [m.frame, m.timecode, m.name, m.color]), [[2, '10:00:00:02', 'Start', 'red'], [10, '10:00:00:10', 'Logo', 'green']])
  t.same((await rows(s, 'preditor_sequence_markers', { sequence_id: seq.id })).map((m: any) => [Number(m.frame), Number(m.duration), m.comment]), [[10, 5, 'too early'], [2, 0, '']])
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { name: 'Same' } }), 409, ['name'])
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { preditor_sequence: { name: '   ' } } }), 422, ['preditor_sequence[name]'])
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { remove_clip_ids: [123456] } }), 422, ['remove_clip_ids'])
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { project_id: p.id } }), 422, ['project_id'])
  assertProblem(t, await s.request('PUT', '/preditor_sequences/999999', { token: s.user.token, json: { name: 'x' } }), 404)
  t.equal((await rows(s, 'preditor_sequences', { id: seq.id }))[0].name, 'Cut 2', 'refused changes changed nothing')

  // delete: the rows and the rights go, the assets stay
  assertProblem(t, await s.request('DELETE', `/preditor_sequences/${seq.id}`, { token: stranger.token }), 404)
  const gone = await s.request('DELETE', `/preditor_sequences/${seq.id}`, { token: s.user.token })
  t.equal(gone.status, 200)
  t.equal(gone.body.preditorsequence.name, 'Cut 2')
  t.equal(await count(s, 'preditor_sequences', { id: seq.id }), 0)
  t.equal(await count(s, 'preditor_sequence_markers', { sequence_id: seq.id }), 0)
  t.equal(await count(s, 'access_rights', { object_type: 'preditor_sequence', object_id: seq.id }), 0)
  assertProblem(t, await s.request('GET', `/preditor_sequences/${seq.id}`, { token: s.user.token }), 404)
  assertProblem(t, await s.request('DELETE', `/preditor_sequences/${seq.id}`, { token: s.user.token }), 404)
})

onEachDatabase(t, 'sequences: addasset checks rate, duration and track; the editing lock; downloads in every format', async (t, s) => {
  const { p, ids, stranger, reader, readersTeam } = await setup(s)
  const seq = (await s.request('POST', '/preditor_sequences', { token: s.user.token, json: { project_id: p.id, name: 'Edit', frame_rate: 25 } })).body.preditorsequence
  const add = (json: Record<string, unknown>, token = s.user.token) => s.request('POST', `/preditor_sequences/${seq.id}/addasset`, { token, json })
  assertProblem(t, await s.request('POST', `/preditor_sequences/${seq.id}/addasset`, { json: { asset_id: ids['clip.mov'] } }), 401)

  const first = await add({ asset_id: ids['clip.mov'] })
  t.equal(first.status, 201)
  t.match(first.body.preditorsequence.clips, [{ id: first.body.preditorsequence.added_clip_id, kind: 'video', track: 'V1', asset_id: ids['clip.mov'], offline: false, record_in: 0, record_out: 50, source_in: 0, source_out: 50, source_in_timecode: '01:00:00:00', source_out_timecode: '01:00:02:00', record_in_timecode: '01:00:00:00' }])
  t.equal(first.body.preditorsequence.clips[0].url, null, 'a user is not shown the original\'s absolute path (SECURITY.md)')
  t.equal(first.body.preditorsequence.clips[0].file_name, 'clip.mov', 'only its name')
  const asAdmin = await s.request('GET', `/preditor_sequences/${seq.id}`, { token: s.admin.token })
  t.match(asAdmin.body.preditorsequence.clips[0].url, /^file:\/\/\/.+\/clip\.mov$/, 'an administrator sees the original as a file URL')
  const second = await add({ asset_id: ids['clip.mov'], in: '01:00:00:10', out: 30, track: 'v1', name: 'Close-up' })
  t.match(second.body.preditorsequence.clips[1], { track: 'V1', name: 'Close-up', record_in: 50, record_out: 70, source_in: 10, source_out: 30 }, 'appended after the last clip; in as timecode')
  const audio = await add({ asset_id: ids['music.wav'] })
  t.match(audio.body.preditorsequence.clips.find((c: any) => c.track === 'A1'), { kind: 'audio', record_in: 0, source_out: 50 }, 'audio goes to A1 and is counted at the sequence rate')
  t.equal(audio.body.preditorsequence.duration, 70)

  const before = await count(s, 'preditor_sequence_clips', { sequence_id: seq.id })
  assertProblem(t, await add({ asset_id: ids['music.wav'], track: 'V2' }), 422, ['track'])
  assertProblem(t, await add({ asset_id: ids['ntsc.mov'] }), 422, ['asset_id'])
  assertProblem(t, await add({ asset_id: ids['notes.txt'] }), 422, ['asset_id'])
  assertProblem(t, await add({ asset_id: 999999 }), 422, ['asset_id'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'], in: 60 }), 422, ['in'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'], out: 51 }), 422, ['out'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'], in: 20, out: 20 }), 422, ['out'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'], in: '00:00:00:00' }), 422, ['in'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'], position: 10 }), 422, ['position'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'], track: 'X1' }), 422, ['track'])
  assertProblem(t, await add({ asset_id: ids['clip.mov'] }, stranger.token), 404)
  await s.request('PUT', `/preditor_sequences/${seq.id}/teams`, { token: s.user.token, json: { team_id: readersTeam, read: true } })
  assertProblem(t, await add({ asset_id: ids['clip.mov'] }, reader.token), 403)
  assertProblem(t, await s.request('POST', '/preditor_sequences/999999/addasset', { token: s.user.token, json: { asset_id: ids['clip.mov'] } }), 404)
  t.equal(await count(s, 'preditor_sequence_clips', { sequence_id: seq.id }), before, 'refused clips were not added')

  // two appends to one track at once land one after the other
  const both = await Promise.all([add({ asset_id: ids['clip.mov'], track: 'V2' }), add({ asset_id: ids['clip.mov'], track: 'V2', in: 0, out: 25 })])
  t.same(both.map((r) => r.status), [201, 201])
  const v2 = (await rows(s, 'preditor_sequence_clips', { sequence_id: seq.id, kind: 'video', track: 2 })).map((c: any) => [Number(c.record_frame), Number(c.source_out) - Number(c.source_in)]).sort((a, b) => a[0] - b[0])
  t.ok((v2[0][0] === 0 && v2[1][0] === v2[0][1]), `no overlap: ${JSON.stringify(v2)}`)

  // the editing lock
  const writer = await s.createUser('writer')
  const writersTeam = await teamWith(s, 'writers', writer)
  await s.request('PUT', `/preditor_sequences/${seq.id}/teams`, { token: s.user.token, json: { team_id: writersTeam, read: true, write: true } })
  assertProblem(t, await s.request('DELETE', `/preditor_sequences/${seq.id}/close`, { token: s.user.token }), 409)
  const opened = await s.request('PUT', `/preditor_sequences/${seq.id}/open`, { token: s.user.token })
  t.match(opened.body.preditorsequence, { locked_by: s.user.id, locked_by_username: s.user.username })
  t.equal((await s.request('PUT', `/preditor_sequences/${seq.id}/open`, { token: s.user.token })).status, 200, 'opening again is fine for the holder')
  const busy = await s.request('PUT', `/preditor_sequences/${seq.id}/open`, { token: writer.token })
  assertProblem(t, busy, 409)
  t.match(busy.body.detail, s.user.username, 'the 409 names the holder')
  t.equal(busy.body.locked_by.id, s.user.id)
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: writer.token, json: { name: 'Theirs' } }), 423)
  assertProblem(t, await add({ asset_id: ids['clip.mov'] }, writer.token), 423)
  assertProblem(t, await s.request('DELETE', `/preditor_sequences/${seq.id}`, { token: writer.token }), 423)
  assertProblem(t, await s.request('DELETE', `/preditor_sequences/${seq.id}/close`, { token: writer.token }), 403)
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}/open`, { token: reader.token }), 403)
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}/open`, { token: stranger.token }), 404)
  t.equal((await rows(s, 'preditor_sequences', { id: seq.id }))[0].name, 'Edit', 'the locked sequence kept its name')
  t.equal((await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { name: 'Edit 2' } })).status, 200, 'the holder writes')
  const broken = await s.request('DELETE', `/preditor_sequences/${seq.id}/close`, { token: s.admin.token })
  t.equal(broken.status, 200, 'an administrator breaks the lock')
  t.equal(broken.body.preditorsequence.locked_by, null)
  // two users open at once: one holds it, the other is told who
  const opens = await Promise.all([s.user, writer].map((u) => s.request('PUT', `/preditor_sequences/${seq.id}/open`, { token: u.token })))
  t.same(opens.map((r) => r.status).sort(), [200, 409])
  const holder = Number((await rows(s, 'preditor_sequences', { id: seq.id }))[0].locked_by_id)
  t.equal(holder, opens[0].status === 200 ? s.user.id : writer.id)
  t.equal((await s.request('DELETE', `/preditor_sequences/${seq.id}/close`, { token: holder === s.user.id ? s.user.token : writer.token })).status, 200)

  // downloads: what the readers of each format read back is the timeline
  const shown = (await s.request('GET', `/preditor_sequences/${seq.id}`, { token: s.user.token })).body.preditorsequence
  const expected = shown.clips.map((c: any) => `${c.track}@${c.record_in}:${c.source_in}-${c.source_out}`).sort()
  const rate = { num: 25, den: 1 }
  const dir = await mkdtemp(path.join(tmpdir(), 'sequence-downloads-'))
  for (const format of ['xml', 'fcpxml', 'otio']) {
    const reply = await s.request('GET', `/preditor_sequences/${seq.id}/download`, { token: reader.token, query: { format } })
    t.equal(reply.status, 200, `${format}: 200`)
    t.match(reply.headers.get('content-disposition'), /attachment; filename="Edit_2\./)
    const doc = readSequence(format as any, reply.text, rate)
    t.same(doc.clips.map((c) => `${c.kind === 'video' ? 'V' : 'A'}${c.track}@${c.record}:${c.sourceIn}-${c.sourceOut}`).sort(), expected, `${format}: the clips read back`)
    t.ok(doc.clips.every((c) => /^file:\/\/\/.+\/(clip\.mov|music\.wav)$/.test(c.url ?? '')), `${format}: clips point at the originals`)
    t.equal(doc.start, 90000, `${format}: start timecode`)
    if (format !== 'otio') {
      const file = path.join(dir, `edit.${format}`)
      await writeFile(file, reply.buffer)
      const lint = await run('xmllint', ['--noout', file]).then((r) => r.stderr, (err) => (err.code === 'ENOENT' ? '' : String(err.stderr)))
      t.equal(lint, '', `${format}: well-formed XML`)
    }
  }
  const edl = await s.request('GET', `/preditor_sequences/${seq.id}/download`, { token: s.user.token, query: { format: 'edl' } })
  const events = readSequence('edl', edl.text, rate).clips
  t.same(events.map((c) => `${c.kind}${c.track}:${c.sourceIn}`).sort(), ['audio1:0', 'video1:90000', 'video1:90010'], 'EDL: V1 and A1 events with source timecode (V2 cannot be said in an EDL; the WAV has no start timecode)')
  t.match(edl.text, /\* FROM CLIP NAME:  Close-up/)
  const aaf = await s.request('GET', `/preditor_sequences/${seq.id}/download`, { token: s.user.token, query: { format: 'aaf' } })
  assertProblem(t, aaf, 501)
  t.match(aaf.body.detail, /AAF writing is not built yet/)
  assertProblem(t, await s.request('GET', `/preditor_sequences/${seq.id}/download`, { token: s.user.token, query: { format: 'avb' } }), 422, ['format'])
  assertProblem(t, await s.request('GET', `/preditor_sequences/${seq.id}/download`, { token: stranger.token }), 404)
  const defaultFormat = await s.request('GET', `/preditor_sequences/${seq.id}/download`, { token: s.user.token })
  t.match(defaultFormat.text, /<xmeml version="4">/, 'FCP7 XML by default')

  // removing clips; a deleted asset leaves an offline clip
  const v2ids = shown.clips.filter((c: any) => c.track === 'V2').map((c: any) => c.id)
  t.equal((await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { remove_clip_ids: v2ids } })).status, 200)
  t.equal(await count(s, 'preditor_sequence_clips', { sequence_id: seq.id, kind: 'video', track: 2 }), 0)
  assertProblem(t, await s.request('PUT', `/preditor_sequences/${seq.id}`, { token: s.user.token, json: { frame_rate: 24 } }), 422, ['frame_rate'])
  await s.runtime.db.knex('assets').where({ id: ids['music.wav'] }).delete()
  const after = (await s.request('GET', `/preditor_sequences/${seq.id}`, { token: s.user.token })).body.preditorsequence
  t.match(after.clips.find((c: any) => c.track === 'A1'), { asset_id: null, offline: true, name: 'music.wav' })
  t.equal(after.offline_clips, 1)
})
