/**
 * Transcription speed and accuracy of the pocketsphinx engine as the transcription plugin runs it
 * (ffmpeg extraction, chunks cut at silences, engine processes in parallel). Prints figures.
 *
 *   npx tsc -p . && node dist/bench/transcription.js [--seconds 120] [--chunk 20]
 *
 * - real-time factor: wall time / audio time, and engine CPU time / audio time (= per core), for one
 *   piece and for chunks run 1 and 2 at a time (the speed-up of chunk parallelism on 2 cores);
 * - word error rate and real-time factor on the LibriVox recordings of Debian's pocketsphinx-testdata.
 * The speech is made here by espeak-ng and sox (long text, sentences with pauses).
 */
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { readFileSync } from 'node:fs'
import { PocketsphinxEngine } from '../plugins/transcription/engine.js'
import { transcribeAudio } from '../plugins/transcription/jobs.js'
import { MediaTools } from '../core/media/tools.js'

const run = promisify(execFile)
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const SECONDS = arg('seconds', 120)
const CHUNK = arg('chunk', 20)
const LIBRIVOX = '/usr/share/pocketsphinx/test/data/librivox'

const LINES = [
  'the meeting starts at nine in the morning',
  'please bring the reports from last week',
  'we will talk about the budget and the new office',
  'after lunch the team visits the factory',
  'the weather today is sunny and warm',
  'tomorrow it will rain in the city',
  'call me back when you have the numbers',
  'the film was shot on location in the mountains',
  'the editor needs the final cut by friday',
  'thank you all for coming and see you next time',
]

/** CPU seconds of this process's waited-for children (the engine and ffmpeg runs): /proc/self/stat cutime + cstime */
function childCpu(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')
  return (Number(fields[13]) + Number(fields[14])) / 100
}

async function speech(dir: string, seconds: number): Promise<string> {
  const parts: string[] = []
  let total = 0
  for (let i = 0; total < seconds; i++) {
    const raw = path.join(dir, `raw-${i}.wav`)
    await run('espeak-ng', ['-v', 'en-us', '-s', String(130 + (i % 4) * 10), '-w', raw, LINES[i % LINES.length]])
    const part = path.join(dir, `part-${i}.wav`)
    await run('sox', [raw, '-r', '16000', '-c', '1', '-b', '16', part, 'pad', '0', String(0.6 + (i % 3) * 0.4)])
    total += Number((await run('soxi', ['-D', part])).stdout)
    parts.push(part)
  }
  const out = path.join(dir, 'speech.wav')
  await run('sox', [...parts, out])
  return out
}

function wer(ref: string[], hyp: string[]): number {
  const d = Array.from({ length: ref.length + 1 }, (_, i) => [i, ...new Array<number>(hyp.length).fill(0)])
  for (let j = 1; j <= hyp.length; j++) d[0][j] = j
  for (let i = 1; i <= ref.length; i++) for (let j = 1; j <= hyp.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ref[i - 1] === hyp[j - 1] ? 0 : 1))
  return d[ref.length][hyp.length]
}

async function main() {
  const engine = new PocketsphinxEngine({ binary: 'pocketsphinx_continuous', modelDir: '/usr/share/pocketsphinx/model/en-us' })
  if (engine.unavailable) throw new Error(engine.unavailable)
  const ffmpeg = (await new MediaTools().ready()).get('ffmpeg')?.path
  if (!ffmpeg) throw new Error('ffmpeg is missing')
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-bench-stt-'))
  try {
    console.log(`# transcription bench: ${availableParallelism()} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
    const file = await speech(dir, SECONDS)
    const audio = Number((await run('soxi', ['-D', file])).stdout)
    console.log(`espeak-ng speech: ${audio.toFixed(1)} s\n`)
    console.log('| run | chunks | words | wall s | RTF (wall) | engine CPU s | RTF per core (CPU) |')
    console.log('|---|---|---|---|---|---|---|')
    const walls: Record<string, number> = {}
    for (const [label, chunkSeconds, parallel] of [
      ['one piece', 100_000, 1],
      [`${CHUNK} s chunks, 1 at a time`, CHUNK, 1],
      [`${CHUNK} s chunks, 2 at a time`, CHUNK, 2],
    ] as Array<[string, number, number]>) {
      const cpu0 = childCpu()
      const t0 = performance.now()
      const r = await transcribeAudio(file, ffmpeg, engine, 'en-us', dir, { chunkSeconds, parallelChunks: parallel })
      const wall = (performance.now() - t0) / 1000
      const cpu = childCpu() - cpu0
      walls[label] = wall
      console.log(`| ${label} | ${r.chunks} | ${r.words.length} | ${wall.toFixed(1)} | ${(wall / audio).toFixed(2)} | ${cpu.toFixed(1)} | ${(cpu / audio).toFixed(2)} |`)
    }
    const one = walls[`${CHUNK} s chunks, 1 at a time`]
    const two = walls[`${CHUNK} s chunks, 2 at a time`]
    console.log(`\nchunk parallelism speed-up (1 → 2 at a time): ${(one / two).toFixed(2)}×`)

    const ids = (await readFile(path.join(LIBRIVOX, 'fileids'), 'utf8').catch(() => '')).split('\n').filter(Boolean)
    if (!ids.length) return console.log('\n(pocketsphinx-testdata is not installed: no word error rate)')
    const refs = new Map<string, string[]>()
    for (const line of (await readFile(path.join(LIBRIVOX, 'transcription'), 'utf8')).split('\n')) {
      const m = /^<s> (.*) <\/s> \((.+)\)$/.exec(line.trim())
      if (m) refs.set(m[2], m[1].split(/\s+/))
    }
    let errors = 0
    let words = 0
    let seconds = 0
    const cpu0 = childCpu()
    const t0 = performance.now()
    for (const id of ids) {
      const wav = path.join(LIBRIVOX, `${id}.wav`)
      seconds += Number((await run('soxi', ['-D', wav])).stdout)
      const hyp = (await engine.transcribe(wav, { language: 'en-us' })).map((w) => w.word.toLowerCase())
      errors += wer(refs.get(id)!, hyp)
      words += refs.get(id)!.length
    }
    const wall = (performance.now() - t0) / 1000
    const cpu = childCpu() - cpu0
    console.log(`\nLibriVox (${ids.length} files, ${seconds.toFixed(1)} s, ${words} words): WER ${((100 * errors) / words).toFixed(1)} %, RTF ${(wall / seconds).toFixed(2)} wall, ${(cpu / seconds).toFixed(2)} per core (CPU)`)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
