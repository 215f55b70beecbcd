import { randomBytes } from 'node:crypto'
import { mkdir, rm } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, onEachDatabase, upload, waitForAsset, waitForJob, idsByName, createProject } from '../../../core/testing/index.js'
import { ffmpeg, readZip } from '../../helpers/media.js'
import { migrations } from '../../../plugins/assets/migrations.js'

/**
 * Issue 18 items 16, 21, 22 (asset job counts) and 23: non-media assets get a final proxy_state,
 * HTTP Range follows RFC 9110 (an invalid header is ignored, several ranges are multipart), asset
 * jobs report their counts, and QuickTime reel names are read from the timecode track.
 */

/** the parts of a multipart/byteranges body: [content-range, bytes] */
function byteRanges(body: Buffer, contentType: string): Array<[string, Buffer]> {
  const boundary = /boundary=([^;]+)/.exec(contentType)![1]
  const parts: Array<[string, Buffer]> = []
  let at = body.indexOf(`--${boundary}\r\n`)
  while (at >= 0) {
    const headEnd = body.indexOf('\r\n\r\n', at)
    const head = body.subarray(at, headEnd).toString()
    const next = body.indexOf(`\r\n--${boundary}`, headEnd)
    parts.push([/Content-Range: (.*)/.exec(head)![1].trim(), body.subarray(headEnd + 4, next)])
    at = body.indexOf(`--${boundary}\r\n`, next)
  }
  t.ok(body.subarray(-(boundary.length + 8)).equals(Buffer.from(`\r\n--${boundary}--\r\n`)), 'closing delimiter')
  return parts
}

onEachDatabase(t, 'final proxy states, RFC 9110 ranges, asset job counts, reel names from the timecode track', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Answers' })
  const random = randomBytes(4096)
  const up = await upload(s, s.user.token, p.id, [
    { name: 'notes.txt', data: 'plain text notes' },
    { name: 'noise.bin', data: random },
    { name: 'letters.txt', data: 'abcdefghijklmnopqrstuvwxyz'.repeat(4) },
    // ffprobe reads any `.bin` of this size as BinText "video" (text art): random bytes are not media
    // (the fault campaign's proxy jobs failed on such uploads)
    { name: 'art.bin', data: randomBytes(124_480) },
  ])
  const ids = idsByName(up)

  // item 16: files that are not media end in `none`, with the reason, instead of `pending` forever
  for (const name of ['notes.txt', 'noise.bin', 'letters.txt', 'art.bin']) {
    const asset = await waitForAsset(s, s.user.token, ids[name], (a) => a.analysis_state === 'ready' && a.proxy_state !== 'pending')
    t.match(asset, { type: 'other', analysis_state: 'ready', analysis_error: null, proxy_state: 'none', proxy_error: 'not audio, video or a still image: no proxy is made', proxy: { state: 'none', kinds: [] } }, `${name}: a final proxy state`)
  }
  const listed = await s.request('GET', `/projects/${p.id}/assets`, { token: s.user.token })
  t.ok(listed.body.assets.every((a: any) => a.proxy_state === 'none' && typeof a.proxy_error === 'string'), 'the listing (plain rows) says the same')
  // a project-wide reencode reaches them too: still `none`, never `ready` without a proxy
  const reencode = await s.request('PUT', `/projects/${p.id}/reencode`, { token: s.user.token })
  await waitForJob(s, s.user.token, reencode.body.job.id)
  const proxyJobs = await s.runtime.db.knex('jobs').where({ type: 'assets.proxy', asset_id: ids['notes.txt'] }).select('id')
  for (const { id } of proxyJobs) await waitForJob(s, s.user.token, Number(id), { route: '/asset_status' })
  t.match((await s.request('GET', `/assets/${ids['notes.txt']}`, { token: s.user.token })).body.asset, { proxy_state: 'none', proxy: { kinds: [] } })
  // rows written before this release: the migration gives them their final state
  await s.runtime.db.knex('assets').where({ id: ids['noise.bin'] }).update({ proxy_state: 'pending', proxy_error: null })
  await migrations.find((m) => m.name === '0006-proxy-state-none')!.up(s.runtime.db.knex, s.db)
  t.match((await s.request('GET', `/assets/${ids['noise.bin']}`, { token: s.user.token })).body.asset, { proxy_state: 'none', proxy_error: /no proxy is made/ }, 'migrated')

  // item 22: an asset job reports what it did in /asset_status
  const prepared = await s.request('PUT', `/assets/${ids['letters.txt']}/prepare_download_highres`, { token: s.user.token })
  t.match(await waitForJob(s, s.user.token, prepared.body.assetstate.job_id, { route: '/asset_status' }), { state: 'finished', success: 1, failure: 0 })
  const gone = await upload(s, s.user.token, p.id, [{ name: 'gone.txt', data: 'soon gone' }])
  await rm(path.join(p.path, 'gone.txt'))
  const goneState = await s.request('PUT', `/assets/${idsByName(gone)['gone.txt']}/prepare_download_highres`, { token: s.user.token })
  t.match(await waitForJob(s, s.user.token, goneState.body.assetstate.job_id, { route: '/asset_status' }), { state: 'failed', success: 0, failure: 1, error: /is offline/ })

  // item 21: Range on the highres zip
  const download = (range?: string) =>
    s.request('GET', `/assets/${ids['letters.txt']}/download_highres`, { token: s.user.token, query: { state_id: String(prepared.body.assetstate.id) }, headers: range ? { range } : {} })
  const zip = (await download()).buffer
  t.equal(readZip(zip)[0].data.toString(), 'abcdefghijklmnopqrstuvwxyz'.repeat(4))
  const size = zip.length
  for (const ignored of ['bytes=abc', 'bytes=100-5', 'bytes=-', 'bytes=1-2,', 'lines=1-2', `bytes=${Array.from({ length: 17 }, (_, i) => `${i}-${i}`).join(',')}`]) {
    const whole = await download(ignored)
    t.equal(whole.status, 200, `${ignored}: ignored, the whole body`)
    t.notOk(whole.headers.get('content-range'), 'no Content-Range')
    t.ok(whole.buffer.equals(zip), 'every byte')
  }
  for (const unsatisfiable of [`bytes=${size}-`, `bytes=${size + 10}-${size + 20}`, 'bytes=-0', `bytes=${size}-,${size + 1}-`]) {
    const refused = await download(unsatisfiable)
    assertProblem(t, refused, 416)
    t.equal(refused.headers.get('content-range'), `bytes */${size}`)
    t.match(refused.body.detail, new RegExp(`starts within the body, which has ${size} bytes`))
  }
  const long = await download(`bytes=${'9'.repeat(5000)}-`)
  assertProblem(t, long, 416)
  t.ok(long.body.detail.length < 400, 'a long header is not echoed whole')
  const one = await download('bytes=4-9')
  t.equal(one.status, 206)
  t.equal(one.headers.get('content-range'), `bytes 4-9/${size}`)
  t.ok(one.buffer.equals(zip.subarray(4, 10)))
  // several ranges: multipart/byteranges, in the order asked; a range past the end is left out
  const several = await download(`bytes=0-3, 40-59,-10, ${size + 5}-`)
  t.equal(several.status, 206)
  t.match(several.headers.get('content-type'), /^multipart\/byteranges; boundary=\w+$/)
  t.equal(Number(several.headers.get('content-length')), several.buffer.length, 'exact Content-Length')
  t.same(
    byteRanges(several.buffer, several.headers.get('content-type')!).map(([range, bytes]) => [range, bytes.toString('hex')]),
    [
      [`bytes 0-3/${size}`, zip.subarray(0, 4).toString('hex')],
      [`bytes 40-59/${size}`, zip.subarray(40, 60).toString('hex')],
      [`bytes ${size - 10}-${size - 1}/${size}`, zip.subarray(size - 10).toString('hex')],
    ],
  )

  // item 23: a QuickTime file that keeps its reel name in the timecode track only
  const clip = path.join(s.dataDir, 'gen', 'reel.mov')
  await mkdir(path.dirname(clip), { recursive: true })
  await ffmpeg(['-f', 'lavfi', '-i', 'testsrc2=size=160x120:rate=25', '-t', '1', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-timecode', '02:00:00:00', '-metadata:s:v:0', 'reel_name=A001', clip])
  const reel = await upload(s, s.user.token, p.id, [{ name: 'reel.mov', file: clip }])
  const video = await waitForAsset(s, s.user.token, idsByName(reel)['reel.mov'], (a) => a.analysis_state !== 'pending' && a.analysis_state !== 'processing')
  t.match(video, { type: 'video', proxy_state: /pending|processing|ready/, metadata: { reel_name: 'A001', start_timecode: '02:00:00:00', clip_name: 'reel' } })
})
