import { createReadStream } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { StringDecoder } from 'node:string_decoder'
import { createGunzip } from 'node:zlib'
import JSZip from 'jszip'
import { readAaf } from './aaf.js'
import { XmlStream, type XmlHandler } from './xml-stream.js'
import { FcpxmlHandler, PremiereHandler, ResolveHandler, XmemlHandler, type ProjectXmlHandler } from './xml-readers.js'
import { ProjectFileError, type ProjectReading, type ReadLimits } from './types.js'

export { ProjectFileError, type ProjectReading, type MediaReference, type ReadLimits, type ProjectFormat } from './types.js'

/** why a file is refused before it is read: the extension says it is no project file this server reads */
export class UnsupportedProjectFile extends Error {
  constructor(
    message: string,
    /** 415: not a project file; 501: a project format that is known but not read here */
    readonly status: 415 | 501,
  ) {
    super(message)
  }
}

export const PROJECT_EXTENSIONS = ['.prproj', '.drp', '.fcpxml', '.xml', '.aaf', '.avb'] as const

const extensionOf = (name: string) => {
  const dot = name.lastIndexOf('.')
  return dot < 0 ? '' : name.slice(dot).toLowerCase()
}

/** throws `UnsupportedProjectFile` for names no reader takes (checked before the file is opened) */
export function assertReadable(name: string) {
  const ext = extensionOf(name)
  if (ext === '.avb')
    throw new UnsupportedProjectFile(
      'Avid bins (.avb) are a proprietary binary format this server does not read; export the bin or sequence from Media Composer as AAF and ask for that file',
      501,
    )
  if (!(PROJECT_EXTENSIONS as readonly string[]).includes(ext))
    throw new UnsupportedProjectFile(`${name} is not an editing-suite project file this server reads (Premiere .prproj, Resolve .drp, FCPXML .fcpxml, Final Cut Pro 7 .xml, AAF .aaf)`, 415)
}

/** refuses (413) a file over the limits before anything of it is read */
export function assertSize(name: string, size: number, limits: Pick<ReadLimits, 'maxFileBytes' | 'maxContainerBytes'>) {
  const ext = extensionOf(name)
  if (size > limits.maxFileBytes) throw new ProjectFileError(`the project file is ${size} bytes, more than the ${limits.maxFileBytes} bytes this server reads (limit maxFileBytes)`, 413)
  if ((ext === '.drp' || ext === '.aaf') && size > limits.maxContainerBytes)
    throw new ProjectFileError(`${ext} files are read whole into memory; this one is ${size} bytes, more than the ${limits.maxContainerBytes} bytes allowed (limit maxContainerBytes)`, 413)
}

/** counts decompressed bytes and stops at the limit */
class Expansion {
  private bytes = 0
  constructor(private readonly max: number) {}
  add(n: number) {
    this.bytes += n
    if (this.bytes > this.max) throw new ProjectFileError(`the project file expands to more than ${this.max} bytes when decompressed; it is not read (limit maxExpandedBytes)`)
  }
}

async function scanXml(source: AsyncIterable<Buffer>, handler: XmlHandler, expansion: Expansion | null) {
  const decoder = new StringDecoder('utf8')
  const xml = new XmlStream(handler)
  for await (const chunk of source) {
    expansion?.add(chunk.length)
    xml.write(decoder.write(chunk))
  }
  xml.write(decoder.end())
  xml.end()
}

/** an `.xml` file is FCP7 xmeml or FCPXML: its root element decides */
class SniffingHandler implements XmlHandler {
  chosen: ProjectXmlHandler | null = null
  constructor(private readonly limits: ReadLimits) {}
  open(name: string, attrs: Record<string, string>, empty: boolean) {
    this.chosen ??= this.choose(name)
    this.chosen.open(name, attrs, empty)
  }
  private choose(root: string): ProjectXmlHandler {
    if (root === 'xmeml') return new XmemlHandler(this.limits)
    if (root === 'fcpxml') return new FcpxmlHandler(this.limits)
    throw new ProjectFileError(`the XML file's root element is <${root}>, neither Final Cut Pro 7 XML (xmeml) nor FCPXML`)
  }
  result(): ProjectReading {
    if (!this.chosen) throw new ProjectFileError('the XML file has no root element')
    return this.chosen.result()
  }
  close(name: string) {
    this.chosen?.close(name)
  }
  text(raw: string, cdata: boolean) {
    this.chosen?.text(raw, cdata)
  }
}

/**
 * Reads a project file: its sequence names and the media it references. `file` is a path the
 * caller opened and checked (an original's descriptor path); `name` decides the reader. Streamed
 * formats (.prproj, .xml, .fcpxml) are scanned chunk by chunk; .drp and .aaf are containers read
 * whole, within `maxContainerBytes`.
 */
export async function readProjectFile(file: string, name: string, size: number, limits: ReadLimits): Promise<ProjectReading> {
  assertReadable(name)
  assertSize(name, size, limits)
  const ext = extensionOf(name)

  if (ext === '.aaf') return readAaf(await readFile(file), limits)

  if (ext === '.drp') {
    let zip: JSZip
    try {
      zip = await JSZip.loadAsync(await readFile(file))
    } catch (err) {
      throw new ProjectFileError(`the .drp file is not a readable zip archive: ${(err as Error).message}`)
    }
    const handler = new ResolveHandler(limits)
    const expansion = new Expansion(limits.maxExpandedBytes)
    const entries = Object.values(zip.files).filter((f) => !f.dir && f.name.toLowerCase().endsWith('.xml'))
    if (!entries.some((f) => /(^|\/)project\.xml$/i.test(f.name))) throw new ProjectFileError('the .drp archive has no project.xml: it is not a DaVinci Resolve project')
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) await scanXml(new Readable().wrap(entry.nodeStream('nodebuffer')), handler, expansion)
    return handler.result()
  }

  const stream = createReadStream(file, { highWaterMark: 1 << 20 })
  try {
    if (ext === '.prproj') {
      const handler = new PremiereHandler(limits)
      // Premiere writes gzip; an uncompressed XML project (older versions, hand-made) is read as is
      const first = await peek(file)
      if (first[0] === 0x1f && first[1] === 0x8b) {
        const gunzip = createGunzip()
        const piped = stream.pipe(gunzip)
        stream.on('error', (err) => gunzip.destroy(err))
        await scanXml(piped, handler, new Expansion(limits.maxExpandedBytes)).catch((err) => {
          if ((err as { code?: string }).code?.startsWith('Z_')) throw new ProjectFileError(`the .prproj file is not valid gzip: ${(err as Error).message}`)
          throw err
        })
      } else await scanXml(stream, handler, null)
      return handler.result()
    }
    if (ext === '.fcpxml') {
      const fcpxml = new FcpxmlHandler(limits)
      await scanXml(stream, fcpxml, null)
      return fcpxml.result()
    }
    const sniffing = new SniffingHandler(limits)
    await scanXml(stream, sniffing, null)
    return sniffing.result()
  } finally {
    stream.destroy()
  }
}

async function peek(file: string): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of createReadStream(file, { start: 0, end: 1 })) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
