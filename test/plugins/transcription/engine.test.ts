import t from 'tap'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { PocketsphinxEngine, WhisperCppEngine, SherpaOnnxEngine, parsePocketsphinx, normalizeLanguage, type Word } from '../../../plugins/transcription/engine.js'
import { extractPcm, frameLevels, planChunks, writeWavSlice } from '../../../plugins/transcription/audio.js'
import { transcribeAudio } from '../../../plugins/transcription/jobs.js'
import { MediaTools } from '../../../core/media/tools.js'
import { has, makeSpeech, wordErrorRate } from './speech.js'
import type { Asserts } from '../../helpers/index.js'

const MODEL = '/usr/share/pocketsphinx/model/en-us'
const LIBRIVOX = '/usr/share/pocketsphinx/test/data/librivox'
const engine = new PocketsphinxEngine({ binary: 'pocketsphinx_continuous', modelDir: MODEL })

const monotonic = (t: Pick<Asserts, 'ok'>, words: Word[], duration: number) => {
  for (const [i, w] of words.entries()) {
    t.ok(w.word.length > 0 && !/[<>()]/.test(w.word), `word ${i} "${w.word}" is a word, no filler or variant number`)
    t.ok(w.start >= 0 && w.start <= w.end && w.end <= duration + 0.05, `word ${i} ${w.start}-${w.end} inside the ${duration} s`)
    if (i) t.ok(w.start >= words[i - 1].start, `word ${i} starts after word ${i - 1}`)
    t.ok(w.confidence >= 0 && w.confidence <= 1, `confidence ${w.confidence} within 0..1`)
  }
}

t.test('pocketsphinx output is parsed into words: fillers dropped, variants named plainly', async (t) => {
  const words = parsePocketsphinx('the ah world\n<s> 0.000 0.020 0.9998\nhello 0.030 0.360 0.5\n(NULL) 0.36 0.36 1\nuse(2) 3.040 3.290 0.093971\n<sil> 3.3 3.5 1\n[NOISE] 3.5 3.6 1\n</s> 4.46 4.93 1.000000\n')
  t.same(words, [
    { word: 'hello', start: 0.03, end: 0.36, confidence: 0.5 },
    { word: 'use', start: 3.04, end: 3.29, confidence: 0.093971 },
  ])
  t.equal(normalizeLanguage('EN_us'), 'en-us')
  t.equal(normalizeLanguage('english!'), null)
})

t.test('engines without binary or model report why, and refuse to run', async (t) => {
  const missing = new PocketsphinxEngine({ binary: 'no-such-pocketsphinx', modelDir: MODEL })
  t.match(missing.unavailable, /pocketsphinx/)
  t.match(missing.unavailable, /install the Debian packages pocketsphinx and pocketsphinx-en-us/)
  await t.rejects(missing.transcribe('/nonexistent.wav', { language: 'en-us' }))
  t.match(new PocketsphinxEngine({ binary: 'pocketsphinx_continuous', modelDir: '/nonexistent/en-us' }).unavailable ?? '', /pocketsphinx-en-us/)
  t.match(new WhisperCppEngine({ binary: 'whisper-cli', model: '' }).unavailable, /no whisper.cpp model configured/)
  t.match(new WhisperCppEngine({ binary: 'whisper-cli', model: '/nonexistent/ggml-base.en.bin' }).unavailable, /does not exist/)
  t.match(new SherpaOnnxEngine({ binary: '', model: '' }).unavailable, /sherpa-onnx/)
})

t.test('speech made by espeak-ng is transcribed with real engine runs', { skip: engine.unavailable ?? ((await has('espeak-ng')) ? false : 'espeak-ng missing') }, async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-stt-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const wav = await makeSpeech(path.join(dir, 'hello.wav'), ['hello world this is a test'])
  const ffmpeg = (await new MediaTools().ready()).get('ffmpeg')!.path
  const pcm = path.join(dir, 'hello.pcm')
  const duration = await extractPcm(ffmpeg, wav, pcm)
  t.ok(duration > 1.5 && duration < 5, `duration ${duration} s`)
  const clip = path.join(dir, 'clip.wav')
  await writeWavSlice(pcm, clip, { start: 0, end: duration })

  const words = await engine.transcribe(clip, { language: 'en-us' })
  t.ok(words.length >= 3, `free recognition finds words: ${words.map((w) => w.word).join(' ')}`)
  monotonic(t, words, duration)

  // a JSGF grammar of the phrase's vocabulary makes recognition deterministic enough to name words
  const grammar = path.join(dir, 'phrase.gram')
  await writeFile(grammar, '#JSGF V1.0;\ngrammar phrase;\npublic <s> = ( hello | world | this | is | a | test )+ ;\n')
  const constrained = await engine.transcribe(clip, { language: 'en-us', grammar })
  const text = constrained.map((w) => w.word).join(' ')
  t.match(text, /hello world/, `grammar variant: "${text}"`)
  t.match(text, /test/)
  monotonic(t, constrained, duration)
})

t.test('long audio is cut at silences into chunks whose words land at asset time', { skip: engine.unavailable ?? false }, async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-stt-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const sentences = ['hello world this is a test', 'the weather today is sunny and warm', 'tomorrow it will rain in the city', 'please call me back when you can']
  const wav = await makeSpeech(path.join(dir, 'talk.m4a'), sentences, { gap: 1.5 })
  const ffmpeg = (await new MediaTools().ready()).get('ffmpeg')!.path
  const pcm = path.join(dir, 'talk.pcm')
  const duration = await extractPcm(ffmpeg, wav, pcm)
  const levels = await frameLevels(pcm)
  t.ok(Math.abs(levels.length / 100 - duration) < 0.05, '100 levels per second')
  const chunks = planChunks(levels, duration, 5)
  t.ok(chunks.length >= 2, `${chunks.length} chunks of ~5 s in ${duration.toFixed(2)} s`)
  t.equal(chunks[0].start, 0)
  t.equal(chunks[chunks.length - 1].end, duration)
  for (let i = 1; i < chunks.length; i++) {
    t.equal(chunks[i].start, chunks[i - 1].end, 'chunks are contiguous')
    // each cut lies in silence: the 10 ms frame there is quiet
    t.ok(levels[Math.round(chunks[i].start * 100)] < -35, `cut at ${chunks[i].start} s is silent (${levels[Math.round(chunks[i].start * 100)].toFixed(1)} dBFS)`)
  }
  t.same(planChunks(levels, duration, 600), [{ start: 0, end: duration }], 'short audio is one chunk')

  const whole = await transcribeAudio(wav, ffmpeg, engine, 'en-us', dir, { chunkSeconds: 600, parallelChunks: 1 })
  const cut = await transcribeAudio(wav, ffmpeg, engine, 'en-us', dir, { chunkSeconds: 5, parallelChunks: 2 })
  t.equal(whole.chunks, 1)
  t.ok(cut.chunks >= 2)
  monotonic(t, cut.words, duration)
  t.ok(cut.words[cut.words.length - 1].start > duration / 2, 'words of later chunks are shifted to asset time')
  // the same speech in chunks finds about as many words as in one piece (cuts fall in pauses)
  t.ok(Math.abs(cut.words.length - whole.words.length) <= Math.max(3, whole.words.length * 0.3), `${cut.words.length} words in chunks, ${whole.words.length} whole`)
})

t.test('real speech (Debian pocketsphinx-testdata LibriVox recordings): word error rate below 50 %', { skip: engine.unavailable ?? false }, async (t) => {
  const ids = (await readFile(path.join(LIBRIVOX, 'fileids'), 'utf8').catch(() => '')).split('\n').filter(Boolean)
  // CI installs the Debian package pocketsphinx-testdata
  t.ok(ids.length, 'the LibriVox recordings of pocketsphinx-testdata are installed')
  const refs = new Map<string, string[]>()
  for (const line of (await readFile(path.join(LIBRIVOX, 'transcription'), 'utf8')).split('\n')) {
    const m = /^<s> (.*) <\/s> \((.+)\)$/.exec(line.trim())
    if (m) refs.set(m[2], m[1].split(/\s+/))
  }
  let errors = 0
  let total = 0
  for (const id of ids) {
    const words = (await engine.transcribe(path.join(LIBRIVOX, `${id}.wav`), { language: 'en-us' })).map((w) => w.word.toLowerCase())
    const ref = refs.get(id)!
    const wer = wordErrorRate(ref, words)
    errors += wer * ref.length
    total += ref.length
    t.comment(`${id}: WER ${(wer * 100).toFixed(1)} % (${words.join(' ')})`)
  }
  const wer = errors / total
  t.comment(`LibriVox WER ${(wer * 100).toFixed(1)} % over ${total} words`)
  console.log(`# LibriVox word error rate: ${(wer * 100).toFixed(1)} % over ${total} reference words`)
  t.ok(wer < 0.5, `word error rate ${(wer * 100).toFixed(1)} % < 50 %`)
})
