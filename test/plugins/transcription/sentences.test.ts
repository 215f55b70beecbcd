import t from 'tap'
import { groupSentences, retext, retime, toSrt, toVtt, cuesOf, clock, type PlainSentence, type StoredWord } from '../../../plugins/transcription/sentences.js'

const w = (word: string, start: number, end: number, confidence = 0.5): StoredWord => ({ word, start, end, confidence })
const consistent = (t: { ok(v: unknown, m: string): unknown }, s: { start: number; end: number; text: string; words: StoredWord[] }) => {
  t.ok(s.text === s.words.map((x) => x.word).join(' '), `text is its words: "${s.text}"`)
  for (const [i, x] of s.words.entries()) {
    t.ok(x.start <= x.end && x.start >= s.start && x.end <= s.end, `word ${i} ${x.start}-${x.end} inside ${s.start}-${s.end}`)
    if (i) t.ok(x.start >= s.words[i - 1].end, `word ${i} starts after word ${i - 1} ends`)
  }
}

t.test('words are grouped into sentences at pauses, punctuation and length limits', async (t) => {
  const words = [
    { word: 'hello', start: 0.03, end: 0.36, confidence: 0.9 },
    { word: 'world', start: 0.37, end: 0.87, confidence: 0.8 },
    // a 1.1 s pause
    { word: 'it', start: 1.97, end: 2.1, confidence: 0.5 },
    { word: 'rains.', start: 2.11, end: 2.5, confidence: 0.5 },
    { word: 'Sun', start: 2.55, end: 2.9, confidence: 0.5 },
    // overlapping a chunk seam: moved after the previous word
    { word: 'again', start: 2.85, end: 3.2, confidence: 0.5 },
  ]
  const sentences = groupSentences(words)
  t.same(sentences.map((s) => s.text), ['hello world', 'it rains.', 'Sun again'])
  t.same(sentences.map((s) => [s.start, s.end]), [[30, 870], [1970, 2500], [2550, 3200]])
  t.same(sentences[2].words[1], { word: 'again', start: 2900, end: 3200, confidence: 0.5 })
  t.ok(sentences.every((s) => s.speaker === 'Speaker 1'))
  for (const s of sentences) consistent(t, s)
  const many = Array.from({ length: 60 }, (_, i) => ({ word: `w${i}`, start: i * 0.3, end: i * 0.3 + 0.25, confidence: 1 }))
  t.same(groupSentences(many).map((s) => s.words.length), [25, 25, 10], 'at most 25 words a sentence')
})

t.test('new text keeps the timings of the words that stayed', async (t) => {
  const s = { start: 1000, end: 3000, text: 'the ah world it is a truth', words: [w('the', 1000, 1100), w('ah', 1110, 1360), w('world', 1370, 1870), w('it', 1880, 2030), w('is', 2040, 2180), w('a', 2190, 2240), w('truth', 2250, 3000)] }
  const words = retext(s, 'Hello world, this is a test.')
  t.same(words.map((x) => x.word), ['Hello', 'world,', 'this', 'is', 'a', 'test.'])
  t.same(words[1], { word: 'world,', start: 1370, end: 1870, confidence: 0.5 }, 'a kept word keeps its times and confidence (punctuation ignored)')
  t.same([words[3].start, words[4].start], [2040, 2190])
  t.equal(words[0].start, 1000, '"Hello" takes the time of "the ah"')
  t.equal(words[0].end, 1360)
  t.same([words[2].start, words[2].end, words[2].confidence], [1880, 2030, 1], '"this" replaces "it", confidence 1 (a person wrote it)')
  t.same([words[5].start, words[5].end], [2250, 3000])
  consistent(t, { ...s, text: words.map((x) => x.word).join(' '), words })
  // inserted words without replaced ones share the gap between their neighbours
  const inserted = retext({ start: 0, end: 1000, words: [w('a', 0, 100), w('b', 500, 600)] }, 'a x y b')
  t.same(inserted.map((x) => [x.start, x.end]), [[0, 100], [100, 300], [300, 500], [500, 600]])
  const fresh = retext({ start: 0, end: 900, words: [w('one', 0, 300), w('two', 300, 900)] }, 'completely different')
  t.same(fresh.map((x) => [x.word, x.start, x.end]), [['completely', 0, 474], ['different', 474, 900]], 'by length: 10 and 9 characters')
})

t.test('new times move and stretch the words', async (t) => {
  const s = { start: 1000, end: 2000, words: [w('a', 1000, 1200), w('b', 1500, 2000)] }
  t.same(retime(s, 3000, 5000).map((x) => [x.start, x.end]), [[3000, 3400], [4000, 5000]])
  t.same(retime(s, 1000, 1500).map((x) => [x.start, x.end]), [[1000, 1100], [1250, 1500]])
  t.same(retime({ start: 0, end: 0, words: [w('a', 0, 0), w('b', 0, 0)] }, 0, 1000).map((x) => [x.start, x.end]), [[0, 500], [500, 1000]], 'a zero-length sentence spreads its words')
})

t.test('SRT and WebVTT: numbered cues, HH:MM:SS,mmm, no overlaps, two lines at most', async (t) => {
  t.equal(clock(3_723_004, ','), '01:02:03,004')
  t.equal(clock(59_999, '.'), '00:00:59.999')
  const long = 'this sentence is much longer than two subtitle lines of forty two characters can hold so it is split'.split(' ')
  const sentences: PlainSentence[] = [
    { start: 500, end: 1500, text: 'hello <world> & --> you', speaker: 'Speaker 1', words: [w('hello', 500, 800), w('<world>', 800, 1000), w('&', 1000, 1100), w('-->', 1100, 1200), w('you', 1200, 1500)] },
    // starts before the first one ends: the first cue is cut back
    { start: 1400, end: 9000, text: long.join(' '), speaker: 'Speaker 1', words: long.map((x, i) => w(x, 1400 + i * 400, 1400 + i * 400 + 350)) },
    { start: 9500, end: 9500, text: 'blip', speaker: 'Speaker 1', words: [w('blip', 9500, 9500)] },
  ]
  const cues = cuesOf(sentences)
  t.ok(cues.length >= 4, `${cues.length} cues`)
  for (const [i, c] of cues.entries()) {
    t.ok(c.end > c.start, `cue ${i} lasts`)
    if (i) t.ok(c.start >= cues[i - 1].end, `cue ${i} does not overlap cue ${i - 1}`)
    t.ok(c.lines.length <= 2 && c.lines.every((l) => l.length <= 60), `cue ${i}: ${JSON.stringify(c.lines)}`)
  }
  const srt = toSrt(sentences)
  const blocks = srt.trim().split('\n\n')
  t.equal(blocks.length, cues.length)
  for (const [i, b] of blocks.entries()) {
    const lines = b.split('\n')
    t.equal(lines[0], String(i + 1), 'cues numbered from 1')
    t.match(lines[1], /^\d{2}:\d{2}:\d{2},\d{3} --> \d{2}:\d{2}:\d{2},\d{3}$/)
    t.ok(lines.slice(2).every((l) => !l.includes('-->') && l.trim() !== ''), 'no timing arrow in text')
  }
  t.match(blocks[0], /^1\n00:00:00,500 --> 00:00:01,400\nhello <world> & -> you$/)
  const vtt = toVtt(sentences, 'clip.mov')
  t.match(vtt, /^WEBVTT - clip\.mov\n\n1\n00:00:00\.500 --> 00:00:01\.400\nhello &lt;world&gt; &amp; -&gt; you\n/)
  t.notOk(vtt.slice(6).includes('-->\n'), 'no stray arrows')
  // several speakers are named
  const two = toSrt([{ ...sentences[0], speaker: 'Ann' }, { ...sentences[2], speaker: 'Bob' }])
  t.match(two, /Ann: hello/)
  t.match(toVtt([{ ...sentences[0], speaker: 'Ann' }, { ...sentences[2], speaker: 'Bob' }]), /<v Bob>blip/)
})
