import t from 'tap'
import { readFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { formatTimecode, parseTimecode, timecodeBase, toRate, tcOf, frameOf } from '../../../plugins/markers/timecode.js'
import { EXPORT_FORMATS, readMarkers, sniffFormat, writeMarkers, type ExportClip } from '../../../plugins/markers/formats.js'
import { COLORS } from '../../../plugins/markers/colors.js'

const run = promisify(execFile)
const NLE = path.resolve(process.cwd(), '../shared/fixtures/nle')
const ntsc = { num: 30000, den: 1001 }
const ntsc60 = { num: 60000, den: 1001 }

t.test('timecode: drop-frame and non-drop labels (NLE-FORMATS.md §1.2)', async (t) => {
  t.equal(formatTimecode(17982, ntsc, true), '00:10:00;00')
  t.equal(formatTimecode(1800, ntsc, true), '00:01:00;02')
  t.equal(formatTimecode(3600, ntsc60, true), '00:01:00;04')
  t.equal(formatTimecode(1799, ntsc, true), '00:00:59;29')
  t.equal(formatTimecode(90000, { num: 25, den: 1 }, false), '01:00:00:00')
  t.equal(formatTimecode(86400, { num: 24000, den: 1001 }, false), '01:00:00:00')
  t.equal(parseTimecode('00:01:00;02', ntsc), 1800)
  t.equal(parseTimecode('00:01:00;00', ntsc), null, 'dropped labels do not exist')
  t.equal(parseTimecode('00:10:00;00', ntsc), 17982, 'every tenth minute keeps its labels')
  t.equal(parseTimecode('00:00:00:25', { num: 25, den: 1 }), null, 'frame 25 does not exist at 25 fps')
  // every label of the first 11 minutes converts back to its frame count (DF at 29.97 and 59.94, NDF at 25)
  for (const [rate, drop, until] of [[ntsc, true, 20_000], [ntsc60, true, 40_000], [{ num: 25, den: 1 }, false, 20_000], [{ num: 24000, den: 1001 }, false, 20_000]] as const) {
    let bad = 0
    for (let f = 0; f < until; f++) if (parseTimecode(formatTimecode(f, rate, drop), rate, drop) !== f) bad++
    t.equal(bad, 0, `${rate.num}/${rate.den} ${drop ? 'DF' : 'NDF'}: frames → label → frames is the identity`)
  }
  t.same(toRate(29.97002997), ntsc)
  t.same(toRate('30000/1001'), ntsc)
  t.same(toRate(25), { num: 25, den: 1 })
  t.equal(toRate('abc'), null)
  const base = timecodeBase(ntsc, '00:59:59;28')
  t.equal(tcOf(base, 2), '01:00:00;00')
  t.equal(frameOf(base, '01:00:00;00'), 2)
  t.equal(timecodeBase(ntsc, '01:00:00:00').dropFrame, false, 'a colon start timecode counts non-drop')
})

const clip = (rate = { num: 25, den: 1 }, start = '01:00:00:00'): ExportClip => ({
  name: 'Scene 1 & <take>',
  base: timecodeBase(rate, start),
  frames: 2000,
  hasVideo: true,
  hasAudio: true,
  width: 1920,
  height: 1080,
  url: 'file:///media/Scene%201.mov',
  markers: COLORS.map((color, i) => ({
    id: i + 1,
    in: i * 50 + (i % 3),
    out: i * 50 + (i % 3) + (i % 2 ? 24 : 0),
    text: i === 0 ? 'Logo "too" early & <loud>' : i === 1 ? '12 frames late' : `note ${i} ünïcödé`,
    color,
    track: 'V1',
    author: i % 2 ? 'ana' : 'Bob Smith',
    guid: i % 4 === 0 ? `060a2b340101010501010f1013-000000-${String(i).padStart(16, '0')}-03af480fcf67-113a` : null,
    createdAt: new Date('2026-01-02T03:04:05Z'),
  })),
})

t.test('every export format is read back with its frames, colours and text', async (t) => {
  for (const rate of [{ num: 25, den: 1 }, ntsc]) {
    const c = clip(rate, rate.den === 1 ? '01:00:00:00' : '00:59:59;28')
    for (const format of ['avid_xml', 'avid_txt', 'fcp7_xml', 'fcpxml', 'edl', 'resolve_edl'] as const) {
      const text = writeMarkers(format, c)
      const sniffed = sniffFormat(text)
      t.equal(sniffed, format === 'resolve_edl' ? 'edl' : format, `${format}: recognised`)
      const back = readMarkers(sniffed!, text, c.base)
      t.equal(back.length, c.markers.length, `${format} @${rate.num}: every marker read back`)
      t.same(back.map((m) => m.in), c.markers.map((m) => m.in), `${format} @${rate.num}: in frames`)
      const spans = format !== 'edl' // `* LOC:` carries positions only
      if (spans) t.same(back.map((m) => m.out), c.markers.map((m) => m.out), `${format} @${rate.num}: out frames`)
      const texts = c.markers.map((m) => m.text)
      t.same(back.map((m) => m.text), texts, `${format}: text`)
      // colours: Avid and Resolve keep all 16; Premiere 8; FCPXML 4 (marker kinds); EDL locators the 8 legacy names
      const expected = c.markers.map((m) => {
        if (format === 'fcpxml') return ['red', 'green', 'orange'].includes(m.color) ? m.color : 'blue'
        if (format === 'edl') return ({ orange: 'yellow', pink: 'magenta', violet: 'magenta', purple: 'magenta', grey: 'white', gold: 'yellow', forest: 'green', denim: 'blue' } as Record<string, string>)[m.color] ?? m.color
        if (format === 'fcp7_xml') return ({ black: 'white', pink: 'magenta', violet: 'magenta', purple: 'magenta', grey: 'white', gold: 'yellow', forest: 'green', denim: 'blue' } as Record<string, string>)[m.color] ?? m.color
        return m.color
      })
      t.same(back.map((m) => m.color), expected, `${format}: colours`)
      if (format === 'avid_xml') t.same(back.map((m) => m.guid), c.markers.map((m) => m.guid), 'avid_xml: _ATN_CRM_ID kept')
      if (format === 'avid_xml' || format === 'avid_txt') t.same(back.map((m) => m.author), c.markers.map((m) => m.author), `${format}: user kept`)
    }
  }
})

t.test('EDL and Avid text have the documented shapes', async (t) => {
  const edl = writeMarkers('edl', clip()).split('\n')
  t.equal(edl[0], 'TITLE: Scene 1 & <take>')
  t.equal(edl[1], 'FCM: NON-DROP FRAME')
  t.match(edl[3], /^001  AX\s+V\s+C\s+01:00:00:00 01:01:20:00 01:00:00:00 01:01:20:00$/)
  t.match(edl[5], /^\* LOC: 01:00:00:00 RED\s+Logo "too" early & <loud>$/)
  const dfEdl = writeMarkers('edl', clip(ntsc, '00:59:59;28'))
  t.match(dfEdl, /FCM: DROP FRAME/)
  t.match(dfEdl, /\* LOC: 00:59:59;28 RED/)
  const txt = writeMarkers('avid_txt', clip()).split('\n')
  t.same(txt[0].split('\t'), ['Bob Smith', '01:00:00:00', 'V1', 'red', 'Logo "too" early & <loud>', '1', 'Bob Smith', ''])
  t.same(txt[8].split('\t').slice(3), ['yellow', 'note 8 ünïcödé', '1', 'Bob Smith', 'orange'], 'extended colours: legacy fallback in column 4, the name in column 8')
  // six-column lines of older Media Composer versions
  const six = readMarkers('avid_txt', 'ana\t01:00:02:00\tV1\tred\tLogo too early\t25\n', timecodeBase({ num: 25, den: 1 }, '01:00:00:00'))
  t.same(six, [{ in: 50, out: 74, text: 'Logo too early', color: 'red', track: 'V1', author: 'ana', guid: null, source: 'line 1' }])
  const resolveEdl = writeMarkers('resolve_edl', clip())
  t.match(resolveEdl, /001  001      V     C        01:00:00:00 01:00:00:01 01:00:00:00 01:00:00:01/)
  t.match(resolveEdl, /\n 12 frames late \|C:ResolveColorGreen \|M:12 frames late \|D:25\n/, 'a note starting with a digit is indented')
})

t.test('FCPXML validates against Apple\'s DTD with xmllint when both are here', async (t) => {
  const dtd = path.resolve(process.cwd(), 'test/fixtures/nle/FCPXMLv1_10.dtd')
  const have = await run('xmllint', ['--version']).then(() => true, () => false)
  const dir = await mkdtemp(path.join(tmpdir(), 'fcpxml-'))
  const file = path.join(dir, 'markers.fcpxml')
  await writeFile(file, writeMarkers('fcpxml', clip(ntsc, '00:59:59;28')))
  if (!have) { t.comment('xmllint (Debian libxml2-utils) is not installed: skipped'); return }
  await run('xmllint', ['--noout', file])
  for (const format of EXPORT_FORMATS.filter((f) => f.endsWith('xml'))) {
    const f = path.join(dir, `${format}.xml`)
    await writeFile(f, writeMarkers(format, clip()))
    await run('xmllint', ['--noout', f])
    t.pass(`${format} is well-formed XML (xmllint)`)
  }
  const hasDtd = await import('node:fs/promises').then((fs) => fs.stat(dtd)).then(() => true, () => false)
  if (!hasDtd) { t.comment(`Apple's FCPXML 1.10 DTD is not at ${dtd}: DTD check skipped`); return }
  const { stderr } = await run('xmllint', ['--noout', '--dtdvalid', dtd, file])
  t.equal(stderr, '', 'valid against the FCPXML 1.10 DTD')
})

t.test('markers of files written by editing suites (../shared/fixtures/nle)', async (t) => {
  const base = timecodeBase({ num: 30, den: 1 }, '00:00:00:00')
  const fcpx = readMarkers('fcpxml', readFileSync(path.join(NLE, 'fcpxml/fcpx_event.fcpxml'), 'utf8'), base)
  t.ok(fcpx.length >= 8, `${fcpx.length} FCPXML markers read`)
  t.ok(fcpx.some((m) => m.text === 'Marker 5' && m.color === 'red'), 'a to-do marker (completed="0") reads as red')
  t.ok(fcpx.some((m) => m.text === 'Marker 7' && m.color === 'green'), 'a done marker reads as green')
  t.ok(fcpx.some((m) => m.text === 'Marker 4' && m.in === 167), 'start 167/30s is frame 167 at 30 fps')
  const premiere = readMarkers('fcp7_xml', readFileSync(path.join(NLE, 'xmeml/premiere_example.xml'), 'utf8'), base)
  t.ok(premiere.length >= 1, 'Premiere xmeml markers read')
  const all = readFileSync(path.join(NLE, 'xmeml/premiere_example.xml'), 'utf8')
  t.equal(sniffFormat(all), 'fcp7_xml')
  for (const name of ['avid_example.edl', 'premiere_example.edl', 'nucoda_example.edl', 'speed_effects.edl']) {
    const text = readFileSync(path.join(NLE, 'edl', name), 'utf8')
    t.equal(sniffFormat(text), 'edl', `${name} is recognised as an EDL`)
    t.same(readMarkers('edl', text, timecodeBase({ num: 24, den: 1 }, '00:00:00:00')), [], `${name}: no locators, no markers`)
  }
})
