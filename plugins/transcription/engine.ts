import { spawn } from 'node:child_process'
import { accessSync, constants, statSync } from 'node:fs'
import path from 'node:path'

/** one recognised word; times in seconds from the start of the audio file given to the engine */
export interface Word {
  word: string
  start: number
  end: number
  /** 0..1 as the engine reports it (pocketsphinx: the word's posterior probability) */
  confidence: number
}

export interface TranscribeOptions {
  /** a language the engine has a model for (`en-us`) */
  language: string
  /** a JSGF grammar file restricting what is recognised (pocketsphinx only; tests and command vocabularies) */
  grammar?: string
  signal?: AbortSignal
}

/** A speech-to-text engine: audio in (16 kHz mono 16-bit WAV), timed words out. */
export interface TranscriptionEngine {
  readonly name: string
  /** why the engine cannot run here (missing binary, missing model); null when it can */
  readonly unavailable: string | null
  /** a version string for GET /version */
  readonly version: string
  /** the languages it has models for, normalised (`en-us`) */
  readonly languages: string[]
  transcribe(audioFile: string, options: TranscribeOptions): Promise<Word[]>
}

export interface EngineSettings {
  pocketsphinx: { binary: string; modelDir: string }
  whisper: { binary: string; model: string }
  sherpaOnnx: { binary: string; model: string }
}

/** `en`, `en_US`, `EN-us` → `en-us`; anything not a language tag → null */
export function normalizeLanguage(input: string): string | null {
  const tag = input.trim().toLowerCase().replace(/_/g, '-')
  return /^[a-z]{2,3}(-[a-z0-9]{2,8})*$/.test(tag) ? tag : null
}

/** the engine's language for a request: exact tag, else same primary language (`en` → `en-us`) */
export function pickLanguage(engine: TranscriptionEngine, wanted: string): string | null {
  if (engine.languages.includes(wanted)) return wanted
  const primary = wanted.split('-')[0]
  return engine.languages.find((l) => l === primary || l.startsWith(`${primary}-`)) ?? null
}

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK)
    return statSync(file).isFile()
  } catch {
    return false
  }
}

/** a bare name is looked up on the PATH; a path is taken as it is */
export function findBinary(name: string): string | null {
  if (name.includes('/')) return executable(name) ? name : null
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const file = path.join(dir, name)
    if (executable(file)) return file
  }
  return null
}

const exists = (file: string) => {
  try {
    statSync(file)
    return true
  } catch {
    return false
  }
}

/** runs a program with an argument array (never a shell); resolves with stdout, rejects with the end of stderr */
export function runProgram(binary: string, args: string[], signal?: AbortSignal, maxBytes = 64 << 20): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], signal })
    const out: Buffer[] = []
    let size = 0
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => {
      size += d.length
      if (size > maxBytes) child.kill('SIGKILL')
      else out.push(d)
    })
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)))
    child.on('error', reject)
    child.on('close', (code, sig) => {
      if (code === 0) return resolve(Buffer.concat(out).toString('utf8'))
      const last = stderr.trim().split('\n').filter((l) => !/^INFO:/.test(l)).slice(-3).join(' | ')
      reject(new Error(`${path.basename(binary)} failed (${code ?? sig}): ${last || 'no message'}`))
    })
  })
}

/**
 * Debian's pocketsphinx 0.8 (`pocketsphinx_continuous`) with the `pocketsphinx-en-us` model. With
 * `-time yes` it prints, per utterance, the hypothesis and then one `word start end posterior` line
 * per segment (times from the file's start); fillers (`<s>`, `</s>`, `<sil>`, `[NOISE]`, `(NULL)`)
 * are dropped and pronunciation variants (`use(2)`) lose their number.
 */
export class PocketsphinxEngine implements TranscriptionEngine {
  readonly name = 'pocketsphinx'
  readonly unavailable: string | null
  readonly version: string
  readonly languages: string[]
  private readonly binary: string | null
  private readonly models = new Map<string, { hmm: string; lm: string; dict: string }>()

  constructor(settings: EngineSettings['pocketsphinx']) {
    this.binary = findBinary(settings.binary)
    // a model folder per language: <modelDir>/<lang>/ holding <lang>/ (acoustic), <lang>.lm.bin, cmudict-<lang>.dict
    const lang = path.basename(settings.modelDir)
    const model = { hmm: path.join(settings.modelDir, lang), lm: path.join(settings.modelDir, `${lang}.lm.bin`), dict: path.join(settings.modelDir, `cmudict-${lang}.dict`) }
    if (Object.values(model).every(exists)) this.models.set(lang.toLowerCase(), model)
    this.languages = [...this.models.keys()]
    this.unavailable = !this.binary
      ? `${settings.binary} is not installed; install the Debian packages pocketsphinx and pocketsphinx-en-us`
      : !this.models.size
        ? `no pocketsphinx model in ${settings.modelDir}; install the Debian package pocketsphinx-en-us`
        : null
    this.version = this.unavailable ? 'missing' : `0.8 (${this.binary}, model ${this.languages.join(', ')})`
  }

  async transcribe(audioFile: string, options: TranscribeOptions): Promise<Word[]> {
    if (this.unavailable) throw new Error(this.unavailable)
    const model = this.models.get(options.language)
    if (!model) throw new Error(`pocketsphinx has no model for ${options.language} (has: ${this.languages.join(', ')})`)
    const args = ['-infile', audioFile, '-hmm', model.hmm, '-dict', model.dict, '-time', 'yes', '-logfn', '/dev/null']
    args.push(...(options.grammar ? ['-jsgf', options.grammar] : ['-lm', model.lm]))
    return parsePocketsphinx(await runProgram(this.binary!, args, options.signal))
  }
}

const FILLER = /^(<s>|<\/s>|<sil>|\(NULL\)|\[[A-Z_]+\]|\+\+[A-Z_]+\+\+)$/

/** the `word start end posterior` lines of pocketsphinx_continuous -time yes */
export function parsePocketsphinx(stdout: string): Word[] {
  const words: Word[] = []
  for (const line of stdout.split('\n')) {
    const m = /^(\S+) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?(?:e-?\d+)?)$/.exec(line.trim())
    if (!m || FILLER.test(m[1])) continue
    const word = m[1].replace(/\(\d+\)$/, '')
    const start = Number(m[2])
    const end = Math.max(start, Number(m[3]))
    words.push({ word, start, end, confidence: Math.min(1, Math.max(0, Number(m[4]))) })
  }
  return words
}

/**
 * whisper.cpp's command-line program (`whisper-cli`, formerly `main`) with a ggml model named in the
 * settings. One word per segment (`-ml 1 -sow`) in its full JSON (`-ojf`): offsets in milliseconds,
 * token probabilities averaged into the word's confidence. Without binary or model it is reported
 * as unavailable (no model can be downloaded on these machines).
 */
export class WhisperCppEngine implements TranscriptionEngine {
  readonly name = 'whisper'
  readonly unavailable: string | null
  readonly version: string
  readonly languages: string[]
  private readonly binary: string | null

  constructor(private readonly settings: EngineSettings['whisper']) {
    this.binary = settings.binary ? findBinary(settings.binary) : null
    this.unavailable = !settings.model
      ? 'no whisper.cpp model configured (plugins.transcription.whisper.model: a ggml .bin file)'
      : !exists(settings.model)
        ? `the whisper.cpp model ${settings.model} does not exist`
        : !this.binary
          ? `the whisper.cpp program ${settings.binary || 'whisper-cli'} is not installed (plugins.transcription.whisper.binary)`
          : null
    // whisper models are multilingual; `.en` models know English only
    this.languages = /\.en\.bin$/.test(settings.model) ? ['en'] : ['en', 'de', 'fr', 'es', 'it', 'nl', 'pt', 'pl', 'sv', 'da', 'no', 'fi', 'ru', 'uk', 'ja', 'zh', 'ko', 'ar', 'tr', 'cs', 'hu', 'el']
    this.version = this.unavailable ? 'missing' : `whisper.cpp (${this.binary}, model ${path.basename(settings.model)})`
  }

  async transcribe(audioFile: string, options: TranscribeOptions): Promise<Word[]> {
    if (this.unavailable) throw new Error(this.unavailable)
    const prefix = `${audioFile}.whisper`
    await runProgram(this.binary!, ['-m', this.settings.model, '-f', audioFile, '-l', options.language.split('-')[0], '-ml', '1', '-sow', '-ojf', '-of', prefix, '-np'], options.signal)
    const { readFile, rm } = await import('node:fs/promises')
    try {
      const json = JSON.parse(await readFile(`${prefix}.json`, 'utf8')) as { transcription?: Array<{ offsets: { from: number; to: number }; text: string; tokens?: Array<{ p?: number; text: string }> }> }
      const words: Word[] = []
      for (const seg of json.transcription ?? []) {
        const word = seg.text.trim()
        if (!word || /^\[.*\]$/.test(word)) continue
        const probs = (seg.tokens ?? []).filter((t) => !/^\[_/.test(t.text) && typeof t.p === 'number').map((t) => t.p!)
        words.push({ word, start: seg.offsets.from / 1000, end: Math.max(seg.offsets.from, seg.offsets.to) / 1000, confidence: probs.length ? probs.reduce((a, b) => a + b, 0) / probs.length : 0 })
      }
      return words
    } finally {
      await rm(`${prefix}.json`, { force: true })
    }
  }
}

/**
 * sherpa-onnx: selectable by configuration, but this server has no adapter for it yet, and no model
 * can be obtained on these machines; it is always reported as unavailable with that reason.
 */
export class SherpaOnnxEngine implements TranscriptionEngine {
  readonly name = 'sherpa-onnx'
  readonly version = 'missing'
  readonly languages: string[] = []
  readonly unavailable: string

  constructor(settings: EngineSettings['sherpaOnnx']) {
    this.unavailable = settings.model
      ? 'the sherpa-onnx engine is not built into this server yet (a model is configured, but no adapter reads it)'
      : 'no sherpa-onnx model configured (plugins.transcription.sherpaOnnx.model), and this server has no sherpa-onnx adapter yet'
  }

  transcribe(): Promise<Word[]> {
    return Promise.reject(new Error(this.unavailable))
  }
}

/** the engines of this server by name; `default` is the one used when a request names none */
export class Engines {
  readonly all: Map<string, TranscriptionEngine>

  constructor(
    engines: TranscriptionEngine[],
    readonly defaultName: string,
  ) {
    this.all = new Map(engines.map((e) => [e.name, e]))
  }

  get(name: string): TranscriptionEngine | undefined {
    return this.all.get(name)
  }

  /** for GET /version and the plugin README: name → version or why not */
  describe(): Record<string, string> {
    return Object.fromEntries([...this.all.values()].map((e) => [e.name, e.unavailable ? `unavailable: ${e.unavailable}` : e.version]))
  }
}
