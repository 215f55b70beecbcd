import { randomBytes } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import { createGzip } from 'node:zlib'
import { readProjectFile } from '../plugins/editor-projects/readers/index.js'

/**
 * Memory and time of reading a large Premiere project: a generated `.prproj` of N clips (each
 * with a MasterClip, a media source and a Media object, plus a 2 KB property blob as Premiere
 * writes), gzipped as Premiere does. Prints the file sizes, the time and the peak RSS growth.
 * `node dist/bench/editor-projects.js [clips]` (default 130000: about 200 MB of gzip, 0.6 GB of XML).
 */
const clips = Number(process.argv[2] ?? 130_000)

let xmlBytes = 0
function* parts() {
  yield `<?xml version="1.0" encoding="UTF-8" ?>\n<PremiereData Version="3">\n\t<Project ObjectRef="1"/>\n\t<Project ObjectID="1" Version="38"><RootProjectItem ObjectURef="root"/></Project>\n`
  yield `\t<RootProjectItem ObjectUID="root" Version="1"><ProjectItemContainer><Items>`
  for (let i = 0; i < clips; i++) yield `<Item Index="${i}" ObjectURef="c${i}"/>`
  yield `<Item ObjectURef="seq"/></Items></ProjectItemContainer></RootProjectItem>\n\t<Sequence ObjectUID="seq" Version="11"><Name>Feature reel 1</Name></Sequence>\n`
  for (let i = 0; i < clips; i++) {
    yield `\t<ClipProjectItem ObjectUID="c${i}" Version="1"><ProjectItem><Name>clip ${i}.mov</Name></ProjectItem><MasterClip ObjectURef="m${i}"/></ClipProjectItem>\n`
    yield `\t<MasterClip ObjectUID="m${i}" Version="11"><Clips><Clip Index="0" ObjectRef="${i + 10}"/></Clips></MasterClip>\n`
    yield `\t<VideoMediaSource ObjectID="${i + 10}" Version="2"><MediaSource><Media ObjectURef="media${i}"/></MediaSource><Blob Encoding="base64">${randomBytes(1536).toString('base64')}</Blob></VideoMediaSource>\n`
    yield `\t<Media ObjectUID="media${i}" Version="27"><FilePath>/Volumes/RAID/Show/media/day${i % 40}/clip ${i}.mov</FilePath><Title>clip ${i}.mov</Title></Media>\n`
  }
  yield '</PremiereData>\n'
}

const dir = await mkdtemp(path.join(tmpdir(), 'bench-editor-projects-'))
try {
  const file = path.join(dir, 'big.prproj')
  await pipeline(Readable.from((function* () { for (const part of parts()) { xmlBytes += part.length; yield part } })()), createGzip({ level: 1 }), createWriteStream(file))
  const size = (await stat(file)).size
  const baseline = process.memoryUsage().rss
  let peak = baseline
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20)
  const started = performance.now()
  const reading = await readProjectFile(file, 'big.prproj', size, { maxFileBytes: 2 ** 40, maxContainerBytes: 2 ** 30, maxExpandedBytes: 2 ** 40, maxEntries: 1_000_000 })
  const ms = performance.now() - started
  clearInterval(sampler)
  console.log(
    JSON.stringify({ clips, gzip_mb: +(size / 2 ** 20).toFixed(1), xml_mb: +(xmlBytes / 2 ** 20).toFixed(0), seconds: +(ms / 1000).toFixed(1), peak_rss_growth_mb: +((peak - baseline) / 2 ** 20).toFixed(0), sequences: reading.sequences.length, media: reading.media.length }),
  )
} finally {
  await rm(dir, { recursive: true, force: true })
}
