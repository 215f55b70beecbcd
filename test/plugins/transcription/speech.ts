import { execFile } from 'node:child_process'
import { mkdir, rm } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import { ffmpeg } from '../../helpers/media.js'

const run = promisify(execFile)

/** whether a program is installed (it may answer -v with an error status, but it ran) */
export const has = (tool: string, args = ['--version']) => run(tool, args).then(() => true, (err) => err.code !== 'ENOENT')

/**
 * Speech made here by espeak-ng (never a canned recording): `sentences` spoken with `gap` seconds
 * of silence between them, resampled by sox to 16 kHz mono (what the engine reads), then written
 * as `file` by ffmpeg (the container from its extension: .wav, .m4a, .mov with a test picture).
 */
export async function makeSpeech(file: string, sentences: string[], o: { gap?: number; video?: boolean } = {}): Promise<string> {
  const dir = `${file}.parts`
  await mkdir(dir, { recursive: true })
  const parts: string[] = []
  for (const [i, text] of sentences.entries()) {
    const raw = path.join(dir, `raw-${i}.wav`)
    await run('espeak-ng', ['-v', 'en-us', '-s', '140', '-w', raw, text])
    const part = path.join(dir, `part-${i}.wav`)
    // a pause after every sentence: sox pads with silence
    await run('sox', [raw, '-r', '16000', '-c', '1', '-b', '16', part, 'pad', '0', String(o.gap ?? 1)])
    parts.push(part)
  }
  const joined = path.join(dir, 'speech.wav')
  if (parts.length === 1) await run('sox', [parts[0], joined])
  else await run('sox', [...parts, joined])
  if (o.video) {
    await ffmpeg(['-f', 'lavfi', '-i', 'testsrc2=size=160x120:rate=25', '-i', joined, '-shortest', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', file])
  } else if (file.endsWith('.wav')) await run('sox', [joined, file])
  else await ffmpeg(['-i', joined, '-c:a', 'aac', file])
  await rm(dir, { recursive: true, force: true })
  return file
}

export async function durationOf(file: string): Promise<number> {
  const { stdout } = await run('soxi', ['-D', file]).catch(async () => ({ stdout: '0' }))
  return Number(stdout)
}

/** word error rate: word-level edit distance over the reference length */
export function wordErrorRate(reference: string[], hypothesis: string[]): number {
  const d: number[][] = Array.from({ length: reference.length + 1 }, (_, i) => [i, ...new Array<number>(hypothesis.length).fill(0)])
  for (let j = 1; j <= hypothesis.length; j++) d[0][j] = j
  for (let i = 1; i <= reference.length; i++)
    for (let j = 1; j <= hypothesis.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (reference[i - 1] === hypothesis[j - 1] ? 0 : 1))
  return d[reference.length][hypothesis.length] / Math.max(1, reference.length)
}
