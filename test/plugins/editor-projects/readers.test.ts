import t from 'tap'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { gzipSync } from 'node:zlib'
import { readProjectFile, ProjectFileError, UnsupportedProjectFile } from '../../../plugins/editor-projects/readers/index.js'
import { XmlStream, PathHandler } from '../../../plugins/editor-projects/readers/xml-stream.js'
import { normalizeMediaPath } from '../../../plugins/editor-projects/readers/types.js'
import { suffixesOf } from '../../../plugins/editor-projects/service.js'
import { NLE, limits, premiereProject, premiereXml, resolveProject } from './fixtures.js'

/** the readers on real files written by editing software (AAF by Media Composer, FCPXML, xmeml) and on hand-made .prproj/.drp */

const read = (file: string, overrides: Partial<typeof limits> = {}, name = path.basename(file)) =>
  import('node:fs/promises').then(async ({ stat }) => readProjectFile(file, name, (await stat(file)).size, { ...limits, ...overrides }))

let dir: string
t.before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'editor-projects-'))
})
t.teardown(() => rm(dir, { recursive: true, force: true }))
const put = async (name: string, data: Buffer | string) => {
  const file = path.join(dir, name)
  await writeFile(file, data)
  return file
}

t.test('AAF written by Avid Media Composer 18.12: the top-level composition and its media chain', async (t) => {
  const r = await read(`${NLE}/aaf/multiple_markers.aaf`)
  t.equal(r.format, 'aaf')
  t.same(r.sequences, ['zts02_betty_20211111_editron_v002.Exported.01'], 'the one composition with usage TopLevel (the others are lower level)')
  t.equal(r.media.length, 17, 'file source mobs reached from the sequence and the master clips')
  t.ok(r.media.every((m) => m.path?.startsWith('D:/Avid MediaFiles/MXF/1/') && m.path.endsWith('.mxf')), 'file:///D:/… locators become Windows paths')
  t.ok(r.media.some((m) => m.name === 'SLUG.aafV01.618A0F53822F34V.mxf'))
  const one = await read(`${NLE}/aaf/one_clip.aaf`)
  t.same(one.sequences, ['OTIO_Test_ppjoshm1.Exported.01'])
  t.same(one.media.map((m) => m.path).sort(), ['/VSD/Tools_Media/Avid MediaFiles/MXF/reverb.1/ppjoshm_1.V01.D8C35C9E69C8V.mxf', '/VSD/Tools_Media/OMFI MediaFiles/reverb/ppjoshm_1.A01.D8C35C9E69C8A.wav'])
  const df = await read(`${NLE}/aaf/2997fps-DFTC.aaf`)
  t.same(df.sequences, ['2997-hour5-DFTC'])
  t.equal(df.media[0].path, '/Macintosh HD/Users/ereinecke/Downloads/58982c7f-78b3-4cf9-8432-729fc4eafd55.mov')
  const clipOnly = await read(`${NLE}/aaf/marker-over-audio.aaf`)
  t.same(clipOnly.sequences, [], 'a master clip export has no sequence')
})

t.test('FCPXML and FCP7 XML exports', async (t) => {
  const event = await read(`${NLE}/fcpxml/fcpx_event.fcpxml`)
  t.same(event.sequences, ['OpenTimeline_Project', 'OpenTimeline_Project 1'])
  t.equal(event.media.length, 8)
  t.ok(event.media.every((m) => m.path?.startsWith('/Volumes/Media/otio/')))
  const premiere = await read(`${NLE}/xmeml/premiere_example.xml`)
  t.equal(premiere.format, 'xmeml')
  t.same(premiere.sequences, ['sc01_sh010_anim', 'sc01_sh010_layerA'], 'the nested sequence counts once')
  t.equal(premiere.media.length, 6)
  t.equal(premiere.media[0].path, 'D:/media/sc01_sh010_anim.mov')
  const generators = await read(`${NLE}/xmeml/premiere_generators.xml`)
  t.same(generators.media, [], 'bars, black video and leaders have no file to download')
  // an .xml that is FCPXML is read as FCPXML
  const asXml = await read(await put('export.xml', await import('node:fs/promises').then((f) => f.readFile(`${NLE}/fcpxml/fcpx_project.fcpxml`))))
  t.equal(asXml.format, 'fcpxml')
  t.same(asXml.sequences, ['OpenTimeline_Project'])
})

t.test('Premiere .prproj (hand-made, shaped like a saved project): reachable sequences and real media only', async (t) => {
  const r = await read(await put('show.prproj', premiereProject({ extraSequence: 'Trailer' })))
  t.equal(r.format, 'premiere')
  t.same(r.sequences, ['Main cut v3', 'Trailer'], 'the unreachable (deleted) sequence is left out')
  t.same(
    r.media.map((m) => [m.name, m.path, m.relativePath]),
    [
      ['A001.mov', '/Volumes/RAID/Show/media/A001.mov', '../media/A001.mov'],
      ['B002 & room tone.wav', 'C:/Users/ed/Show/sound/day1/B002 & room tone.wav', null],
      ['Missing.mov', '/Volumes/RAID/Show/media/Missing.mov', '../media/Missing.mov'],
    ],
    'Black Video (a number for a path) and the orphan media are left out; the preset XML inside a property is text',
  )
  const plain = await read(await put('plain.prproj', premiereXml()))
  t.same(plain.sequences, ['Main cut v3'], 'an uncompressed project reads the same')
})

t.test('Resolve .drp (hand-made zip): timelines and media paths, tags with ::', async (t) => {
  const r = await read(await put('show.drp', await resolveProject()))
  t.equal(r.format, 'resolve')
  t.same(r.sequences, ['Resolve cut 1'])
  t.same(r.media.map((m) => m.path), ['/Volumes/RAID/Show/media/A001.mov', '/Volumes/RAID/Show/sound/day1/B002 & room tone.wav'])
})

t.test('refusals: wrong content, sizes over the limits, decompression bombs, unsupported names', async (t) => {
  const refused = async (p: Promise<unknown>, status: number, pattern: RegExp) => {
    const err = await p.then(() => null, (e) => e)
    t.ok(err instanceof ProjectFileError || err instanceof UnsupportedProjectFile, `refused: ${err?.message}`)
    t.equal(err?.status, status)
    t.match(err?.message, pattern)
  }
  await refused(read(await put('fake.prproj', Buffer.from([0x1f, 0x8b, 1, 2, 3, 4, 5]))), 422, /gzip/)
  await refused(read(await put('other.prproj', gzipSync('<FCPXML/>'))), 422, /not a Premiere Pro project/)
  await refused(read(await put('notes.xml', '<html><body/></html>')), 422, /neither Final Cut Pro 7 XML/)
  await refused(read(await put('broken.xml', '<xmeml version="4"><sequence><name>cut')), 422, /ends inside|XML/)
  await refused(read(await put('fake.aaf', 'not a compound file')), 422, /not an AAF file/)
  await refused(read(await put('fake.drp', 'PK not a zip')), 422, /zip/)
  await refused(read(`${NLE}/aaf/one_clip.aaf`, { maxContainerBytes: 100_000 }), 413, /read whole into memory.*maxContainerBytes/)
  await refused(read(`${NLE}/xmeml/premiere_example.xml`, { maxFileBytes: 1000 }), 413, /maxFileBytes/)
  // 50 MB of zeros gzip to 50 KB: refused as soon as the expansion passes the limit
  await refused(read(await put('bomb.prproj', gzipSync(Buffer.alloc(50 * 1024 * 1024)))), 422, /not a Premiere|expands/)
  await refused(read(await put('bomb2.prproj', gzipSync(Buffer.alloc(50 * 1024 * 1024))), { maxExpandedBytes: 1024 * 1024 }), 422, /expands to more than 1048576 bytes/)
  await refused(read(await put('bin.avb', 'Domain')), 501, /Avid bins.*AAF/)
  await refused(read(await put('clip.mov', 'x')), 415, /not an editing-suite project file/)
  await refused(read(`${NLE}/fcpxml/fcpx_event.fcpxml`, { maxEntries: 3 }), 422, /more than 3/)
})

t.test('the XML stream gives the same answer whatever the chunk boundaries', async (t) => {
  const events: string[] = []
  class Recorder extends PathHandler {
    protected collect() {
      return this.at('a', 'b')
    }
    protected override onClose(text: string | undefined) {
      if (text !== undefined) events.push(`${this.path.join('/')}=${text}`)
    }
  }
  const xml = `<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "y">]><!-- <b>no</b> --><a k='1 > 0'><b>x &amp; y &#233;&#x4e2d;</b><b><![CDATA[<raw> & ]]></b><Ns::Tag/><b/></a>`
  for (const size of [1, 2, 3, 7, xml.length]) {
    events.length = 0
    const stream = new XmlStream(new Recorder())
    for (let i = 0; i < xml.length; i += size) stream.write(xml.slice(i, i + size))
    stream.end()
    t.same(events, ['a/b=x & y é中', 'a/b=<raw> &', 'a/b='], `chunks of ${size}`)
    t.equal(stream.openElements, 0)
  }
})

t.test('paths: file URLs, Windows separators, suffixes for the join', async (t) => {
  t.equal(normalizeMediaPath('file://localhost/Volumes/Media/A%20B.mov'), '/Volumes/Media/A B.mov')
  t.equal(normalizeMediaPath('file:///D:/Avid%20MediaFiles/x.mxf'), 'D:/Avid MediaFiles/x.mxf')
  t.equal(normalizeMediaPath('C:\\Users\\ed\\clip.mov'), 'C:/Users/ed/clip.mov')
  t.equal(normalizeMediaPath('1112293707'), null, 'a generated media id is no path')
  t.same(suffixesOf('/Volumes/RAID/media/A001.mov', 3), ['RAID/media/A001.mov', 'media/A001.mov', 'A001.mov'])
  t.same(suffixesOf(null), [])
})
