import path from 'node:path'
import t from 'tap'
import { assertProblem, createProject, onEachDatabase, readerAndStranger, upload, waitForAsset, waitForJob, type Asserts, type TestServer } from '../../../core/testing/index.js'
import { builtinPlugins } from '../../../plugins/index.js'
import { makeSpeech } from '../transcription/speech.js'

/**
 * Issue 14: transcripts are indexed for search when the search plugin is loaded. Real speech through
 * the real engine (pocketsphinx), then GET /search finds the asset by a spoken word and names the
 * sentence and its time; edits and deletions of sentences and transcripts change the index with them.
 */

const config = { config: { plugins: { transcription: { chunkSeconds: 5, parallelChunks: 2 } } } }
const LINES = ['hello world this is a test', 'the weather today is sunny and warm', 'tomorrow it will rain in the city']

async function transcribedTalk(t: Asserts, s: TestServer) {
  const talk = await makeSpeech(path.join(s.dataDir, 'generated', 'talk.wav'), LINES, { gap: 1.2 })
  const p = await createProject(s, s.user, { name: 'Interviews' })
  const up = await upload(s, s.user.token, p.id, [{ name: 'talk.wav', file: talk }])
  const asset = await waitForAsset(s, s.user.token, up.body.assets[0].id)
  const queued = await s.request('PUT', `/assets/${asset.id}/transcribe`, { token: s.user.token })
  t.equal(queued.status, 202, 'transcription queued')
  t.equal((await waitForJob(s, s.user.token, queued.body.job.id, { route: '/asset_status', timeoutMs: 600_000 })).state, 'finished')
  const [transcription] = (await s.request('GET', `/assets/${asset.id}/transcriptions`, { token: s.user.token })).body.transcriptions
  const sentences = (await s.request('GET', `/assets/${asset.id}/transcriptions/${transcription.id}/sentences`, { token: s.user.token })).body.sentences
  return { p, asset, transcription, sentences }
}

/** a word of at least 4 letters the engine heard in `sentence` and nowhere else, nor in the asset's name */
function uniqueWord(sentences: Array<{ text: string }>, index: number): string | undefined {
  const words = (s: { text: string }) => s.text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w.length >= 4)
  const elsewhere = new Set(sentences.filter((_, i) => i !== index).flatMap(words))
  return words(sentences[index]).find((w) => !elsewhere.has(w) && !'talk.wav interviews'.includes(w))
}

const search = (s: TestServer, token: string, term: string) => s.request('GET', '/search', { token, query: { term } })

onEachDatabase(
  t,
  'transcript search: spoken words find the asset with the sentence and its time; edits, deletions and access rights follow',
  async (t, s) => {
    const { p, asset, transcription, sentences } = await transcribedTalk(t, s)
    t.ok(sentences.length >= 2, `the engine heard sentences (${sentences.map((x: any) => x.text).join(' | ')})`)
    const { reader, stranger } = await readerAndStranger(s, p.id)
    const index = sentences.findIndex((_: unknown, i: number) => uniqueWord(sentences, i))
    t.ok(index >= 0, 'a sentence with a word of its own')
    const word = uniqueWord(sentences, index)!
    const heard = sentences[index]

    const found = await search(s, reader.token, word)
    t.equal(found.status, 200)
    const hit = found.body.assets.find((a: any) => a.id === asset.id)
    t.ok(hit, `"${word}" finds the asset`)
    const spoken = hit.matched.find((m: any) => m.field === 'transcript')
    t.match(spoken, { field: 'transcript', snippet: new RegExp(word, 'i'), time: heard.start, timecode: /^\d\d:\d\d:\d\d\.\d{3}$/, transcription_id: transcription.id, sentence_id: heard.id })
    t.equal(spoken.timecode, `00:00:${String(Math.floor(heard.start)).padStart(2, '0')}.${String(Math.round(heard.start * 1000) % 1000).padStart(3, '0')}`, 'the time code is the sentence start')
    t.same((await search(s, stranger.token, word)).body.assets, [], 'a user who cannot read the project finds nothing')
    t.same((await search(s, s.user.token, `${word} -talk`)).body.assets, [], 'exclusions apply to the whole document')
    t.ok((await search(s, s.user.token, `talk ${word.slice(0, 3)}`)).body.assets.some((a: any) => a.id === asset.id), 'a name word and a spoken prefix together (AND over the document)')
    assertProblem(t, await search(s, s.user.token, '"unbalanced'), 422, ['term'])

    // an edited sentence: its new words are found, its old ones no longer
    const url = `/assets/${asset.id}/transcriptions/${transcription.id}/sentences/${heard.id}`
    const edited = await s.request('PUT', url, { token: s.user.token, json: { text: 'zebra marmalade crossing' } })
    t.equal(edited.status, 200, 'sentence edited')
    const afterEdit = (await search(s, s.user.token, 'marmalade')).body.assets
    t.equal(afterEdit.length, 1)
    t.match(afterEdit[0].matched, [{ field: 'transcript', snippet: 'zebra marmalade crossing', sentence_id: heard.id, time: heard.start }])
    t.same((await search(s, s.user.token, word)).body.assets, [], 'the replaced word is gone from the index')
    // two edits at once: the index ends with the text that was applied last
    await Promise.all([
      s.request('PUT', url, { token: s.user.token, json: { text: 'alpha walrus' } }),
      s.request('PUT', url, { token: s.user.token, json: { text: 'alpha penguin' } }),
    ])
    const last = (await s.request('GET', url, { token: s.user.token })).body.sentence.text
    const [kept, lost] = last.includes('walrus') ? ['walrus', 'penguin'] : ['penguin', 'walrus']
    t.equal((await search(s, s.user.token, kept)).body.assets.length, 1, `"${kept}", the last text, is found`)
    t.same((await search(s, s.user.token, lost)).body.assets, [], `"${lost}" is not`)

    // a deleted sentence leaves the index
    t.equal((await s.request('DELETE', url, { token: s.user.token })).status, 200)
    t.same((await search(s, s.user.token, kept)).body.assets, [])
    const rows = await s.runtime.db.knex('search_texts').where({ asset_id: asset.id }).orderBy('start_ms')
    t.equal(rows.length, sentences.length - 1, 'one indexed row per remaining sentence')

    // a deleted transcript takes its words along; the asset stays findable by name
    const other = sentences.findIndex((_: unknown, i: number) => i !== index && uniqueWord(sentences, i))
    const otherWord = other >= 0 ? uniqueWord(sentences, other) : undefined
    if (otherWord) t.equal((await search(s, s.user.token, otherWord)).body.assets.length, 1, `"${otherWord}" is found before the transcript is deleted`)
    t.equal((await s.request('DELETE', `/assets/${asset.id}/transcriptions/${transcription.id}`, { token: s.user.token })).status, 200)
    if (otherWord) t.same((await search(s, s.user.token, otherWord)).body.assets, [], 'and not after')
    t.same(await s.runtime.db.knex('search_texts').where({ asset_id: asset.id }), [])
    t.equal((await search(s, s.user.token, 'talk')).body.assets.length, 1, 'the name still finds it')
  },
  config,
)

onEachDatabase(
  t,
  'transcription works without the search plugin loaded',
  async (t, s) => {
    t.notOk((s.runtime.container.resolve('core.features') as any).list().some((f: any) => f.plugin.name === 'search'), 'search is not loaded')
    const { transcription, sentences } = await transcribedTalk(t, s)
    t.equal(transcription.state, 'ready')
    t.ok(sentences.length > 0, 'sentences were made')
    const edited = await s.request('PUT', `/assets/${transcription.asset_id}/transcriptions/${transcription.id}/sentences/${sentences[0].id}`, { token: s.user.token, json: { text: 'edited without an index' } })
    t.equal(edited.status, 200)
    assertProblem(t, await s.request('GET', '/search', { token: s.user.token, query: { term: 'edited' } }), 404)
  },
  { ...config, plugins: builtinPlugins.filter((p) => p.name !== 'search') },
)
