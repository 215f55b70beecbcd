import { execFile } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { promisify } from 'node:util'
import { MamError } from '../errors.js'
import { toolVersions } from '../system/plugin.js'
import { Launcher } from './launcher.js'

const run = promisify(execFile)
const requireModule = createRequire(import.meta.url)

export type MediaToolName = 'ffmpeg' | 'ffprobe'

export interface MediaTool {
  name: MediaToolName
  path: string
  version: string
  /** where it was found: env, PATH or an npm package */
  source: 'env' | 'path' | 'package'
}

const ENV: Record<MediaToolName, string> = { ffmpeg: 'MAMKIT_FFMPEG', ffprobe: 'MAMKIT_FFPROBE' }
const PACKAGE: Record<MediaToolName, string> = { ffmpeg: '@ffmpeg-installer/ffmpeg', ffprobe: '@ffprobe-installer/ffprobe' }

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

function candidates(name: MediaToolName, env: NodeJS.ProcessEnv, packages: Partial<Record<MediaToolName, string>>): Array<[MediaTool['source'], string]> {
  const out: Array<[MediaTool['source'], string]> = []
  if (env[ENV[name]]) out.push(['env', env[ENV[name]]!])
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) out.push(['path', path.join(dir, name)])
  try {
    if (packages[name]) out.push(['package', (requireModule(packages[name]) as { path: string }).path])
  } catch {
    // optional dependency not installed on this platform
  }
  return out
}

/**
 * Finds ffmpeg and ffprobe: `MAMKIT_FFMPEG`/`MAMKIT_FFPROBE` first, then the PATH, then binaries
 * shipped in npm packages. A tool that cannot be found is remembered as missing; the jobs that
 * need it fail with a clear error and the endpoints answer 503 naming it. Resolved as `mediaTools`.
 */
export class MediaTools {
  private readonly found = new Map<MediaToolName, MediaTool | null>()
  private detecting?: Promise<this>
  private readonly launcher = new Launcher()

  constructor(
    private readonly env: NodeJS.ProcessEnv = process.env,
    /** npm packages that ship the binaries (optional dependencies of mamkit) */
    private readonly packages: Partial<Record<MediaToolName, string>> = PACKAGE,
  ) {}

  /** looks the tools up once (two short process starts), on first use rather than at boot */
  ready(): Promise<this> {
    this.detecting ??= (async () => {
      for (const name of ['ffmpeg', 'ffprobe'] as const) {
        const tool = await this.locate(name)
        this.found.set(name, tool)
        toolVersions.set(name, tool ? `${tool.version} (${tool.source}: ${tool.path})` : 'missing')
      }
      return this
    })()
    return this.detecting
  }

  private async locate(name: MediaToolName): Promise<MediaTool | null> {
    for (const [source, file] of candidates(name, this.env, this.packages)) {
      if (!executable(file)) continue
      try {
        const { stdout } = await run(file, ['-hide_banner', '-version'], { timeout: 10_000 })
        const version = /version\s+(\S+)/.exec(stdout)?.[1] ?? 'unknown'
        return { name, path: file, version, source }
      } catch {
        // not runnable here (wrong architecture, broken install): try the next candidate
      }
    }
    return null
  }

  get(name: MediaToolName): MediaTool | null {
    return this.found.get(name) ?? null
  }

  /**
   * Runs a tool that answers quickly (ffprobe) and returns its standard output. Started from a small
   * helper process, not from the server (see launcher.ts); a missing tool is a 503 naming it.
   */
  async run(name: MediaToolName, args: string[], options: { timeoutMs?: number; maxBuffer?: number } = {}): Promise<string> {
    return (await this.launcher.run(await this.require(name), args, options)).stdout
  }

  /** stops the helper process */
  close(): void {
    this.launcher.close()
  }

  /** the tool's path, or a 503 problem naming what is missing */
  async require(name: MediaToolName): Promise<string> {
    const tool = (await this.ready()).get(name)
    if (!tool) throw new MamError('service_unavailable', `${name} is not available on this server; install it or set ${ENV[name]} to its path`, { tool: name })
    return tool.path
  }
}
