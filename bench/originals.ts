/**
 * What checking originals on read costs (plugins/assets/originals.ts, core/storage/paths.ts), beside
 * what the reads it guards cost anyway:
 *
 *   npx tsc -p . && node dist/bench/originals.js [--files 2000]
 *
 * --files small files in 20 folders below a project folder, each opened and closed in turn:
 * plain `open` (the ceiling), `openInside` (realpath before, /proc readlink after), and
 * `withOriginal` with the private tool path ffmpeg/ffprobe/sharp get (a symlink made and removed).
 * Beside them one ffprobe run on a 1 s clip, the cheapest read of an original the server makes per
 * file during an ingest. Figures per file, in microseconds; compare ratios within one run.
 */
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { openInside } from '../core/storage/paths.js'
import { MediaTools } from '../core/media/tools.js'
import { coreServices, type ServiceRef } from '../core/index.js'
import { withOriginal } from '../plugins/assets/originals.js'

const run = promisify(execFile)
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}

async function main() {
  const files = arg('files', 2000)
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-bench-originals-'))
  try {
    const root = path.join(dir, 'storage', 'Project')
    const relatives: string[] = []
    for (let i = 0; i < files; i++) {
      const relative = `Day ${i % 20}/clip ${i}.mov`
      await mkdir(path.join(root, `Day ${i % 20}`), { recursive: true })
      await writeFile(path.join(root, relative), 'x'.repeat(1024))
      relatives.push(relative)
    }
    // a context that resolves services by ref, as requests and jobs do: the core config, and the
    // projects service's pathOf (the only other service openOriginal asks for)
    const ctx = { resolve: (ref: ServiceRef<unknown>): any => (ref === coreServices.config ? { dataDir: path.join(dir, 'data') } : { pathOf: () => root }) }
    const perFile = async (label: string, each: (relative: string, i: number) => Promise<unknown>) => {
      for (const r of relatives.slice(0, 100)) await each(r, 0) // warm up
      const t0 = performance.now()
      for (const [i, r] of relatives.entries()) await each(r, i)
      const us = ((performance.now() - t0) * 1000) / files
      console.log(`${label.padEnd(58)} ${us.toFixed(1).padStart(8)} µs/file`)
      return us
    }
    const plain = await perFile('open + close (ceiling)', async (r) => (await open(path.join(root, r), 'r')).close())
    const inside = await perFile('openInside + close', async (r) => (await openInside(root, r, r)).close())
    const tool = await perFile('withOriginal + toolPath (symlink made and removed)', (r, i) =>
      withOriginal(ctx, { id: i, path: r, name: path.basename(r), project: {} } as any, async (o) => o.toolPath()),
    )
    const ffprobe = (await new MediaTools().ready()).get('ffprobe')
    if (ffprobe) {
      const clip = path.join(dir, 'clip.mov')
      await run((await new MediaTools().ready()).get('ffmpeg')!.path, ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=160x120:rate=25', '-t', '1', '-c:v', 'libx264', '-preset', 'ultrafast', clip])
      const t0 = performance.now()
      for (let i = 0; i < 20; i++) await run(ffprobe.path, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', clip])
      const us = ((performance.now() - t0) * 1000) / 20
      console.log(`${`ffprobe of a 1 s clip (${ffprobe.source}), for scale`.padEnd(58)} ${us.toFixed(1).padStart(8)} µs/file`)
      console.log(`\nchecked open over plain open: ${(inside / plain).toFixed(2)}×; with the tool path: ${(tool / plain).toFixed(2)}×; the tool path's whole cost is ${((100 * (tool - plain)) / us).toFixed(2)} % of one ffprobe run`)
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

await main()
