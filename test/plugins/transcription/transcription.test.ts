import t from 'tap'
import path from 'node:path'
import { assertProblem, onEachDatabase, type Asserts, type TestServer } from '../../helpers/index.js'
import { makeStill, readZip, upload, waitForAsset, waitForJobEnd, waitForQuiet, idsByName } from '../../helpers/media.js'
import { createProject, exists, readerAndStranger } from '../projects/fixtures.js'
import { makeSpeech } from './speech.js'

// speech runs through the real engine: chunks of 5 s so a short talk is cut and run two at a time
const config = { plugins: { transcription: { chunkSeconds: 5, parallelChunks: 2 } } }

async function setup(s: TestServer) {
  const gen = path.join(s.dataDir, 'generated')
  const talk = await makeSpeech(path.join(gen, 'talk.wav'), ['hello world this is a test', 'the weather today is sunny and warm', 'tomorrow it will rain in the city'], { gap: 1.2 })
  const clip = await makeSpeech(path.join(gen, 'clip.mov'), ['please call me back when you can'], { video: true })
  const still = await makeStill(path.join(gen, 'still.jpg'))
  const p = await createProject(s, s.user, { name: 'Interviews' })
  const people = await readerAndStranger(s, p.id)
  const up = await upload(s, s.user.token, p.id, [
    { name: 'talk.wav', file: talk },
    { name: 'clip.mov', file: clip },
    { name: 'still.jpg', file: still },
  ])
  const ids = idsByName(up)
  for (const id of Object.values(ids)) await waitForAsset(s, s.user.token, id)
  return { p, talkId: ids['talk.wav'], clipId: ids['clip.mov'], stillId: ids['still.jpg'], ...people }
}

const sentenceRows = async (s: TestServer, transcriptionId: number) =>
  (await s.runtime.db.knex('transcription_sentences').where({ transcription_id: transcriptionId }).orderBy(['start_ms', 'id'])).map((r: any) => ({
    id: Number(r.id),
    start: Number(r.start_ms),
    end: Number(r.end_ms),
    text: r.text,
    speaker: r.speaker,
    words: JSON.parse(r.words),
  }))

/** the invariants every transcript keeps: sentences in order without overlap, text = words, words inside their sentence */
function assertConsistent(t: Asserts, sentences: Array<{ start: number; end: number; text: string; words: Array<{ word: string; start: number; end: number }> }>, duration: number) {
  for (const [i, s] of sentences.entries()) {
    t.ok(s.start <= s.end && s.start >= 0 && s.end <= duration + 0.001, `sentence ${i} ${s.start}-${s.end} inside ${duration} s`)
    if (i) t.ok(s.start >= sentences[i - 1].end, `sentence ${i} starts after sentence ${i - 1} ends`)
    t.equal(s.text, s.words.map((w) => w.word).join(' '), `sentence ${i}: text is its words`)
    for (const [j, w] of s.words.entries()) {
      t.ok(w.start >= s.start && w.end <= s.end && w.start <= w.end, `sentence ${i} word ${j} inside the sentence`)
      if (j) t.ok(w.start >= s.words[j - 1].end, `sentence ${i} word ${j} after word ${j - 1}`)
    }
  }
}

async function transcribe(t: Asserts, s: TestServer, assetId: number, json: Record<string, unknown> = {}) {
  const reply = await s.request('PUT', `/assets/${assetId}/transcribe`, { token: s.user.token, json })
  t.equal(reply.status, 202, reply.text)
  const job = await waitForJobEnd(s, s.user.token, reply.body.job.id, '/asset_status', 600_000)
  t.equal(job.state, 'finished', job.error ?? '')
  const list = await s.request('GET', `/assets/${assetId}/transcriptions`, { token: s.user.token })
  return list.body.transcriptions[list.body.transcriptions.length - 1]
}

onEachDatabase(
  t,
  'transcription: transcribe, read, edit sentences and speakers, access and validation',
  async (t, s) => {
    const { p, talkId, stillId, reader, stranger } = await setup(s)
    const url = `/assets/${talkId}/transcribe`
    assertProblem(t, await s.request('PUT', url), 401)
    assertProblem(t, await s.request('PUT', url, { token: stranger.token }), 404)
    assertProblem(t, await s.request('PUT', url, { token: reader.token }), 403)
    assertProblem(t, await s.request('PUT', '/assets/999999/transcribe', { token: s.user.token }), 404)
    assertProblem(t, await s.request('PUT', url, { token: s.user.token, json: { language: 'xx-yy' } }), 422, ['language'])
    assertProblem(t, await s.request('PUT', url, { token: s.user.token, json: { language: 'not a language' } }), 422, ['language'])
    assertProblem(t, await s.request('PUT', url, { token: s.user.token, json: { engine: 'dragon' } }), 422, ['engine'])
    const whisper = await s.request('PUT', url, { token: s.user.token, json: { engine: 'whisper' } })
    assertProblem(t, whisper, 503)
    t.match(whisper.body.detail, /whisper.cpp model/, 'an engine without a model is reported unavailable, never faked')
    assertProblem(t, await s.request('PUT', `/assets/${stillId}/transcribe`, { token: s.user.token }), 409)
    t.equal(Number((await s.runtime.db.knex('transcriptions').count({ n: '*' }))[0].n), 0, 'refused requests queue nothing')

    // GET /version names the engines
    const version = await s.request('GET', '/version', { token: s.admin.token })
    t.match(version.body.hash.tools, { 'transcription:pocketsphinx': /^0\.8/, 'transcription:whisper': /^unavailable: no whisper.cpp model/ })

    // two requests at once: one run, the other a 409
    const [a, b] = await Promise.all([s.request('PUT', url, { token: s.user.token, json: { language: 'en' } }), s.request('PUT', url, { token: s.user.token, json: { language: 'en' } })])
    t.same([a.status, b.status].sort(), [202, 409], 'one transcription run per asset at a time')
    const accepted = a.status === 202 ? a : b
    t.same(Object.keys(accepted.body), ['job'])
    const job = await waitForJobEnd(s, s.user.token, accepted.body.job.id, '/asset_status', 600_000)
    t.equal(job.state, 'finished', job.error ?? '')
    t.match(job.result, { words: Number, chunks: Number })
    t.ok(job.result.chunks >= 2, `the ${job.result.duration} s talk was cut into ${job.result.chunks} chunks`)

    const list = await s.request('GET', `/assets/${talkId}/transcriptions`, { token: reader.token })
    t.equal(list.status, 200)
    t.same(Object.keys(list.body), ['transcriptions'])
    t.equal(list.body.transcriptions.length, 1)
    const tr = list.body.transcriptions[0]
    t.match(tr, { asset_id: talkId, engine: 'pocketsphinx', language: 'en-us', state: 'ready', error: null, speakers: ['Speaker 1'] })
    t.ok(tr.sentence_count >= 2, `${tr.sentence_count} sentences`)
    t.ok(tr.duration > 6, `duration ${tr.duration} s`)
    assertProblem(t, await s.request('GET', `/assets/${talkId}/transcriptions`, { token: stranger.token }), 404)
    const one = await s.request('GET', `/assets/${talkId}/transcriptions/${tr.id}`, { token: reader.token })
    t.same(Object.keys(one.body), ['transcription'])
    assertProblem(t, await s.request('GET', `/assets/${stillId}/transcriptions/${tr.id}`, { token: s.user.token }), 404)

    const tUrl = `/assets/${talkId}/transcriptions/${tr.id}`
    const sentences = await s.request('GET', `${tUrl}/sentences`, { token: reader.token })
    t.same(Object.keys(sentences.body), ['sentences'])
    const all = sentences.body.sentences
    t.equal(all.length, tr.sentence_count)
    t.ok(all.every((x: any) => x.words.length > 0 && x.speaker === 'Speaker 1'))
    assertConsistent(t, all, tr.duration)
    t.ok(all[all.length - 1].start > tr.duration / 2, 'the later chunks were transcribed at their place in time')
    const paged = await s.request('GET', `${tUrl}/sentences`, { token: reader.token, query: { per_page: '1' } })
    t.equal(paged.body.sentences.length, 1)
    const next = await s.request('GET', `${tUrl}/sentences`, { token: reader.token, query: { per_page: '1', after: paged.headers.get('x-next-after')! } })
    t.equal(next.body.sentences[0].id, all[1].id, 'keyset paging')
    assertProblem(t, await s.request('GET', `${tUrl}/sentences`, { token: reader.token, query: { after: 'junk' } }), 422, ['after'])

    // edit a sentence's text: words that stayed keep their timings
    const first = all[0]
    const sUrl = `${tUrl}/sentences/${first.id}`
    assertProblem(t, await s.request('PUT', sUrl, { token: reader.token, json: { sentence: { text: 'x' } } }), 403)
    assertProblem(t, await s.request('PUT', `${tUrl}/sentences/999999`, { token: s.user.token, json: { sentence: { text: 'x' } } }), 404)
    const keep = first.words[first.words.length - 1]
    const newText = `Well ${first.words.map((w: any) => w.word).join(' ')}`
    const edited = await s.request('PUT', sUrl, { token: s.user.token, json: { sentence: { text: newText } } })
    t.equal(edited.status, 200, edited.text)
    t.same(Object.keys(edited.body), ['sentence'])
    t.equal(edited.body.sentence.text, newText)
    t.same(edited.body.sentence.words[edited.body.sentence.words.length - 1], keep, 'a kept word keeps its timing and confidence')
    t.match(edited.body.sentence.words[0], { word: 'Well', confidence: 1 })

    // bad edits name the field as it was sent and change nothing
    const before = await sentenceRows(s, tr.id)
    const second = all[1]
    const bad: Array<[unknown, string[]]> = [
      [{ sentence: { text: '   ' } }, ['sentence[text]']],
      [{ text: '' }, ['text']],
      [{ sentence: { start: -1 } }, ['sentence[start]']],
      [{ sentence: { end: tr.duration + 5 } }, ['sentence[end]']],
      [{ sentence: { start: 1, end: 0.5 } }, ['sentence[end]']],
      [{ sentence: { end: second.start + 0.5 } }, ['sentence[end]']],
      [{ end: second.start + 0.5 }, ['end']],
      [{ sentence: { speaker: '' } }, ['sentence[speaker]']],
      [{ sentence: { colour: 'red' } }, ['sentence[colour]']],
    ]
    for (const [json, params] of bad) assertProblem(t, await s.request('PUT', sUrl, { token: s.user.token, json }), 422, params)
    t.same(await sentenceRows(s, tr.id), before, 'refused edits write nothing')

    // new times move the words along
    const moved = await s.request('PUT', `${tUrl}/sentences/${second.id}`, { token: s.user.token, form: { start: String(second.start + 0.1), end: String(second.end - 0.05) } })
    t.equal(moved.status, 200, moved.text)
    t.match(moved.body.sentence, { start: second.start + 0.1, end: second.end - 0.05 })
    t.equal(moved.body.sentence.words[0].start, second.start + 0.1)

    // two edits of one sentence at once (text and speaker): both land
    const third = all[all.length - 1]
    const [r1, r2] = await Promise.all([
      s.request('PUT', `${tUrl}/sentences/${third.id}`, { token: s.user.token, json: { sentence: { text: 'it will rain' } } }),
      s.request('PUT', `${tUrl}/sentences/${third.id}`, { token: s.user.token, json: { sentence: { speaker: 'Narrator' } } }),
    ])
    t.same([r1.status, r2.status], [200, 200])
    const both = (await s.request('GET', `${tUrl}/sentences/${third.id}`, { token: s.user.token })).body.sentence
    t.match(both, { text: 'it will rain', speaker: 'Narrator' }, 'neither concurrent edit was lost')

    // two stretches at once that would overlap each other: at most one lands, the transcript stays consistent
    const rows = await sentenceRows(s, tr.id)
    const [x, y] = [rows[0], rows[1]]
    const middle = (x.end + y.start) / 2000
    const [e1, e2] = await Promise.all([
      s.request('PUT', `${tUrl}/sentences/${x.id}`, { token: s.user.token, json: { end: middle + 0.05 } }),
      s.request('PUT', `${tUrl}/sentences/${y.id}`, { token: s.user.token, json: { start: middle - 0.05 } }),
    ])
    t.ok([e1.status, e2.status].filter((st) => st === 200).length === 1 && [e1.status, e2.status].includes(422), `one of two colliding stretches lands (${e1.status}, ${e2.status})`)
    const after = (await s.request('GET', `${tUrl}/sentences`, { token: s.user.token })).body.sentences
    assertConsistent(t, after, tr.duration)

    // speakers: rename every sentence of one
    const tPut = (json: unknown, token = s.user.token) => s.request('PUT', tUrl, { token, json })
    assertProblem(t, await tPut({ speaker: 'Speaker 1', new_speaker: 'Ann' }, reader.token), 403)
    assertProblem(t, await tPut({ speaker: 'Nobody', new_speaker: 'Ann' }), 422, ['speaker'])
    assertProblem(t, await tPut({ transcription: { speaker: 'Nobody', new_speaker: 'Ann' } }), 422, ['transcription[speaker]'])
    assertProblem(t, await tPut({ speaker: 'Speaker 1' }), 422, ['new_speaker'])
    assertProblem(t, await tPut({ transcription: { speaker: 'Speaker 1', new_speaker: ' ' } }), 422, ['transcription[new_speaker]'])
    const renamed = await tPut({ transcription: { speaker: 'Speaker 1', new_speaker: 'Ann' } })
    t.equal(renamed.status, 200, renamed.text)
    t.same(renamed.body.transcription.speakers.sort(), ['Ann', 'Narrator'])
    t.same([...new Set((await sentenceRows(s, tr.id)).map((r) => r.speaker))].sort(), ['Ann', 'Narrator'])

    // delete a sentence, then the transcript
    const gone = await s.request('DELETE', `${tUrl}/sentences/${third.id}`, { token: s.user.token })
    t.equal(gone.status, 200)
    t.equal(gone.body.sentence.id, third.id)
    assertProblem(t, await s.request('GET', `${tUrl}/sentences/${third.id}`, { token: s.user.token }), 404)

    // frozen projects refuse writes, reads keep working
    t.equal((await s.request('PUT', `/projects/${p.id}/freeze`, { token: s.user.token })).status, 200)
    assertProblem(t, await s.request('PUT', sUrl, { token: s.user.token, json: { text: 'x' } }), 423)
    assertProblem(t, await s.request('PUT', url, { token: s.user.token }), 423)
    assertProblem(t, await s.request('DELETE', tUrl, { token: s.user.token }), 423)
    t.equal((await s.request('GET', `${tUrl}/sentences`, { token: s.user.token })).status, 200)
    t.equal((await s.request('DELETE', `/projects/${p.id}/unfreeze`, { token: s.user.token })).status, 200)

    assertProblem(t, await s.request('DELETE', tUrl, { token: reader.token }), 403)
    const removed = await s.request('DELETE', tUrl, { token: s.user.token })
    t.equal(removed.status, 200)
    t.equal(removed.body.transcription.id, tr.id)
    assertProblem(t, await s.request('GET', tUrl, { token: s.user.token }), 404)
    t.same(await sentenceRows(s, tr.id), [], 'its sentences went with it')

    // the text for search indexing, through the plugin's service ref
    const again = await transcribe(t, s, talkId)
    const { transcriptionServices } = await import('../../../plugins/transcription/refs.js')
    const text = await (s.runtime.container.resolve(transcriptionServices.service.id) as any).searchText(talkId)
    t.match(text, [{ transcription_id: again.id, language: 'en-us', text: /\w+/ }])
  },
  { config },
)

onEachDatabase(
  t,
  'transcription: project transcribe and SRT/WebVTT prepared downloads',
  async (t, s) => {
    const { p, talkId, clipId, reader, stranger } = await setup(s)
    const prepare = (id: number, token = s.user.token) => s.request('PUT', `/assets/${id}/prepare_download_transcripts`, { token })
    assertProblem(t, await prepare(talkId), 409)

    const pUrl = `/projects/${p.id}/transcribe`
    assertProblem(t, await s.request('POST', pUrl), 401)
    assertProblem(t, await s.request('POST', pUrl, { token: stranger.token }), 404)
    assertProblem(t, await s.request('POST', pUrl, { token: reader.token }), 403)
    assertProblem(t, await s.request('POST', pUrl, { token: s.user.token, json: { engine: 'nope' } }), 422, ['engine'])
    const batch = await s.request('POST', pUrl, { token: s.user.token })
    t.equal(batch.status, 202, batch.text)
    const done = await waitForJobEnd(s, s.user.token, batch.body.job.id, '/status', 600_000)
    t.match(done, { state: 'finished', result: { queued: 2 } }, 'the audio and the video, not the still')
    await waitForQuiet(s, ['transcription.transcribe'], 600_000)
    const byAsset = async (id: number) => (await s.request('GET', `/assets/${id}/transcriptions`, { token: s.user.token })).body.transcriptions
    for (const id of [talkId, clipId]) t.match(await byAsset(id), [{ state: 'ready' }], `asset ${id} transcribed once`)
    // a second run finds nothing left to do
    const rerun = await s.request('POST', pUrl, { token: s.user.token })
    t.match(await waitForJobEnd(s, s.user.token, rerun.body.job.id, '/status', 600_000), { state: 'finished', result: { queued: 0 } })
    const jobs = await s.runtime.db.knex('jobs').where({ type: 'transcription.transcribe' }).select('priority', 'project_id')
    t.equal(jobs.length, 2)

    // prepared download: state, then the zip
    const dUrl = `/assets/${clipId}/download_transcripts`
    const prepared = await prepare(clipId)
    t.equal(prepared.status, 202, prepared.text)
    t.same(Object.keys(prepared.body), ['assetstate'])
    t.match(prepared.body.assetstate, { asset_id: clipId, kind: 'transcripts' })
    const stateId = prepared.body.assetstate.id
    assertProblem(t, await s.request('GET', dUrl, { token: s.user.token }), 422, ['state_id'])
    await waitForJobEnd(s, s.user.token, prepared.body.assetstate.job_id, '/asset_status', 600_000)
    assertProblem(t, await s.request('GET', dUrl, { token: s.user.token, query: { state_id: '999999' } }), 404, ['state_id'])
    assertProblem(t, await s.request('GET', dUrl, { token: stranger.token, query: { state_id: String(stateId) } }), 404)
    // a reader's own state only: this one is the editor's
    assertProblem(t, await s.request('GET', dUrl, { token: reader.token, query: { state_id: String(stateId) } }), 404, ['state_id'])
    const zip = await s.request('GET', dUrl, { token: s.user.token, query: { state_id: String(stateId) } })
    t.equal(zip.status, 200, zip.text)
    t.match(zip.headers.get('content-type'), /application\/zip/)
    t.match(zip.headers.get('content-disposition'), /clip_transcripts\.zip/)
    const entries = readZip(zip.buffer)
    const names = entries.map((e) => e.name).sort()
    t.equal(names.length, 2)
    t.match(names[0], /^clip\.\d+\.en-us\.srt$/)
    t.match(names[1], /^clip\.\d+\.en-us\.vtt$/)
    const srt = entries.find((e) => e.name.endsWith('.srt'))!.data.toString('utf8')
    const vtt = entries.find((e) => e.name.endsWith('.vtt'))!.data.toString('utf8')
    const cues = srt.trim().split('\n\n')
    t.ok(cues.length >= 1, srt)
    let last = -1
    const ms = (tc: string) => {
      const [h, m, rest] = tc.split(':')
      const [sec, milli] = rest.split(/[,.]/)
      return ((Number(h) * 60 + Number(m)) * 60 + Number(sec)) * 1000 + Number(milli)
    }
    for (const [i, cue] of cues.entries()) {
      const lines = cue.split('\n')
      t.equal(lines[0], String(i + 1), 'cue numbers count from 1')
      const m = /^(\d{2}:\d{2}:\d{2},\d{3}) --> (\d{2}:\d{2}:\d{2},\d{3})$/.exec(lines[1])
      t.ok(m, `timing line ${lines[1]}`)
      t.ok(ms(m![1]) >= last && ms(m![2]) > ms(m![1]), 'cues in order, none overlapping')
      last = ms(m![2])
      t.ok(lines.length >= 3 && lines.slice(2).every((l) => l.trim() !== ''), 'cue text')
    }
    t.match(vtt, /^WEBVTT - clip\.mov\n\n1\n\d{2}:\d{2}:\d{2}\.\d{3} --> \d{2}:\d{2}:\d{2}\.\d{3}\n/)
    // the sentences' text is what the subtitles say
    const [tr] = await byAsset(clipId)
    const text = (await s.request('GET', `/assets/${clipId}/transcriptions/${tr.id}/sentences`, { token: s.user.token })).body.sentences.map((x: any) => x.text).join(' ')
    t.equal(cues.map((c) => c.split('\n').slice(2).join(' ')).join(' '), text)
    // Range works on the prepared zip
    const part = await s.request('GET', dUrl, { token: s.user.token, query: { state_id: String(stateId) }, headers: { range: 'bytes=0-3' } })
    t.equal(part.status, 206)
    t.equal(part.buffer.toString('latin1'), 'PK\u0003\u0004')

    // the package's files go when it expires: its removal was queued for that moment
    const folder = path.join(s.dataDir, 'transcripts', String(stateId))
    t.ok(await exists(folder), 'the prepared files are on disk')
    const [removal] = await s.runtime.db.knex('jobs').where({ type: 'transcription.expire-packages', state: 'queued' })
    t.ok(removal && new Date(removal.run_at).getTime() > Date.now() + 3600_000, 'removal queued for the expiry, a day ahead')
    await s.runtime.db.knex('asset_states').where({ id: stateId }).update({ expires_at: new Date(Date.now() - 1000) })
    assertProblem(t, await s.request('GET', dUrl, { token: s.user.token, query: { state_id: String(stateId) } }), 410, ['state_id'])
    await s.runtime.db.knex('jobs').where({ id: removal.id }).update({ run_at: new Date(Date.now() - 1000) })
    await waitForQuiet(s, ['transcription.expire-packages'])
    t.notOk(await exists(folder), 'expired files removed')
  },
  { config },
)

onEachDatabase(
  t,
  'transcription: without the engine binary the routes answer 503 naming the package to install',
  async (t, s) => {
    const p = await createProject(s, s.user, { name: 'Silent' })
    const audio = await makeSpeech(path.join(s.dataDir, 'gen', 'a.wav'), ['hello'])
    const up = await upload(s, s.user.token, p.id, [{ name: 'a.wav', file: audio }])
    const id = idsByName(up)['a.wav']
    await waitForAsset(s, s.user.token, id)
    for (const reply of [await s.request('PUT', `/assets/${id}/transcribe`, { token: s.user.token }), await s.request('POST', `/projects/${p.id}/transcribe`, { token: s.user.token })]) {
      assertProblem(t, reply, 503)
      t.match(reply.body.detail, /install the Debian packages pocketsphinx and pocketsphinx-en-us/)
    }
    t.equal(Number((await s.runtime.db.knex('transcriptions').count({ n: '*' }))[0].n), 0)
    const version = await s.request('GET', '/version', { token: s.admin.token })
    t.match(version.body.hash.tools, { 'transcription:pocketsphinx': /^unavailable: .*install the Debian packages pocketsphinx/ })
  },
  { config: { plugins: { transcription: { pocketsphinx: { binary: 'no-such-pocketsphinx_continuous' } } } } },
)
